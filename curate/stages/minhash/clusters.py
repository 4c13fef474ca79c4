"""From candidate edges to clusters: union-find, representatives, optional exact-Jaccard verification.

Every step after the buckets is again the partitioned shuffle of ``curate.shuffle``; no task reads
every shard:

1. ``components_task`` (one task): union-find over every edge file in one pass (compiled; union by
   smaller index and path halving, so each root is the smallest global index of its component and
   the labels are the same whatever order the edges come in). Global index = documents in earlier
   shards + row (``offsets.npy``). ``components.npy``: the root of each document in a component of
   two or more, -1 for the others (8 bytes a document, the plan's only corpus-wide array).
2. ``members_task`` (one per shard group): the group's documents that sit in a component of two
   or more — id, quality score, text and band hashes (recomputed for these documents only) —
   written as ONE file ``members/GGGGG.arrow`` with one record batch per *cluster group*
   (``hash(component) mod cluster groups``, about ``CLUSTER_ROWS`` documents each).
3. ``cluster_task`` (one per cluster group): its batch of every members file; settles each component.
   The representative is the document with the highest quality score (when the column exists;
   ``quality_scores``: a null, NaN or non-numeric value is missing and ranks last), ties to the
   smallest ``id``, then to input order. Every other member's exact shingle Jaccard to
   the representative is computed and recorded. Without verification every member joins the
   representative's cluster. With verification, a member joins only when its Jaccard reaches the
   verification threshold; the rejected members are re-bucketed among themselves (same band
   hashes), and each new component of two or more gets its own representative, until none is
   left. Every member of a verified cluster is then within the threshold of its representative,
   so any two members of a cluster have Jaccard >= 2t - 1 (Jaccard distance is a metric).
   ``clusters/CCCCC.arrow``: one row per document in a cluster of two or more: ``cluster`` (the
   representative's global index), ``id``, ``representative`` (its id), ``is_representative``,
   ``jaccard`` (to the representative), ``quality``, ``size``, ``snippet``; ``drops/CCCCC.arrow``:
   the members set aside, one batch per shard group.
4. ``assign_task`` (one per shard group): its batch of every drops file, as one batch per shard:
   ``assign/GGGGG.arrow`` (row, duplicate_of, cluster), which ``apply_with_plan`` reads.

Memory: 8 bytes a document for union-find; every other step holds about one group's worth.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate import shuffle
from curate.schema import ID, TEXT
from curate.shards import read_json, read_shard, write_json, write_shard
from curate.stages.minhash.buckets import job_hasher
from curate.stages.minhash.kernels import flatten, jaccard_pairs, union_edges
from curate.stages.minhash.shingles import shingle_sets
from curate.stages.minhash.store import load_npy, save_npy

SNIPPET_CHARS = 200
CLUSTER_ROWS = 1 << 16  # documents with candidates per cluster group


def connected_components(n: int, edge_files, offsets: np.ndarray | None = None) -> np.ndarray:
    """Component root (smallest member index) of each of ``n`` documents. Edges hold global indices,
    or document keys (``shard << 32 | row``) when ``offsets`` (documents before each shard) is given."""
    parent = np.arange(n, dtype=np.int64)
    for f in edge_files:
        e = load_npy(f, mmap=False)
        if len(e):
            if offsets is not None:
                e = (offsets[shuffle.key_shard(e)] + shuffle.key_row(e)).reshape(-1, 2)
            union_edges(parent, np.ascontiguousarray(e, np.int64))
    flatten(parent)
    return parent


def components_task(job: shuffle.PlanJob) -> dict:
    """Union-find over all edges: ``offsets.npy`` and ``components.npy`` (one task)."""
    plan_dir = Path(job.plan_dir)
    comp_path, off_path = plan_dir / "components.npy", plan_dir / "offsets.npy"
    layout = shuffle.load_layout(plan_dir)
    if not comp_path.exists():
        rows = [r for g in range(layout.groups) for r in read_json(plan_dir / "sig" / f"{g:05d}.json")["rows"]]
        offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        save_npy(offsets, off_path)
        n = int(offsets[-1])
        roots = connected_components(n, shuffle.numbered(plan_dir, "edges", layout.ranges, ".npy"), offsets)
        size = np.bincount(roots, minlength=n)
        save_npy(np.where(size[roots] >= 2, roots, -1), comp_path)
    comp = np.load(comp_path)
    comp = comp[comp >= 0]
    return {"candidates": int(len(comp)), "components": int(len(np.unique(comp)))}


def group_of(comp: np.ndarray, groups: int) -> np.ndarray:
    h = comp.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return ((h >> np.uint64(29)) % np.uint64(groups)).astype(np.int64)


def members_schema(bands: int) -> pa.Schema:
    return pa.schema([
        ("gidx", pa.int64()), ("comp", pa.int64()), ("id", pa.string()), ("quality", pa.float64()),
        ("text", pa.large_string()), ("bands", pa.list_(pa.uint64(), bands)),
    ])


def members_task(job: shuffle.PlanJob) -> dict:
    """The group's documents that have a candidate partner, one batch per cluster group."""
    plan_dir = Path(job.plan_dir)
    out = plan_dir / "members" / f"{job.group:05d}.arrow"
    if out.exists():
        return {"members": None}
    layout = shuffle.load_layout(plan_dir)
    offsets = load_npy(plan_dir / "offsets.npy")
    comps = load_npy(plan_dir / "components.npy")
    schema = members_schema(job.settings.bands)
    qcol = job.settings.quality_column
    parts = []
    for i, shard in enumerate(layout.shards_of(job.group)):
        lo, hi = int(offsets[shard]), int(offsets[shard + 1])
        comp = np.asarray(comps[lo:hi])
        rows = np.flatnonzero(comp >= 0)
        if len(rows) == 0:
            continue
        path = job.inputs[i]
        has_quality = bool(qcol) and qcol in _column_names(path)
        table = read_shard(path, columns=list(dict.fromkeys([ID, TEXT] + ([qcol] if has_quality else []))))
        take = pa.array(rows, pa.int64())
        quality = quality_scores(table.column(qcol).take(take) if has_quality else None, len(rows))
        texts = pc.cast(table.column(TEXT).take(take), pa.large_string())
        bands, _ = job_hasher(job).bands_of(texts)
        parts.append(pa.table({
            "gidx": pa.array(rows + lo, pa.int64()), "comp": pa.array(comp[rows], pa.int64()),
            "id": table.column(ID).take(take), "quality": pa.array(quality, pa.float64()), "text": texts,
            "bands": pa.FixedSizeListArray.from_arrays(pa.array(bands.reshape(-1), pa.uint64()), job.settings.bands),
        }, schema=schema))
    t = pa.concat_tables(parts).combine_chunks() if parts else schema.empty_table()
    c = t.column("comp").to_numpy()
    shuffle.write_parts(t, group_of(c, job.settings.cluster_groups), job.settings.cluster_groups, out, compression="zstd")
    return {"members": int(t.num_rows)}


def quality_scores(column, n: int) -> np.ndarray:
    """float64 scores of ``n`` documents for choosing representatives; missing ones are -inf (they rank last).
    Missing: no column, a null, a NaN, and every value of a column that does not hold numbers (integer,
    floating-point or decimal): text, booleans, lists... (``minhash_dedup`` refuses the base schema's text columns
    at start; another one, e.g. a column some stage wrote as strings, is read as all missing, not a crash)."""
    if column is None:
        return np.full(n, -np.inf)
    if pa.types.is_dictionary(column.type):  # e.g. a Parquet dictionary page read back
        column = column.cast(column.type.value_type)
    t = column.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)):
        return np.full(n, -np.inf)
    q = pc.cast(column, pa.float64(), safe=False)  # an int64 beyond 2**53 rounds: a ranking needs no more
    quality = pc.fill_null(q, -np.inf).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    return np.where(np.isnan(quality), -np.inf, quality)


def _column_names(path: str) -> list[str]:
    if str(path).endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_schema(path).names
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_file(source).schema.names


def _residual_components(bands: np.ndarray) -> np.ndarray:
    """Components among documents given their band hashes [m, b]: label = smallest position, -1 if alone."""
    m = bands.shape[0]
    parent = np.arange(m, dtype=np.int64)
    for j in range(bands.shape[1]):
        col = bands[:, j]
        order = np.argsort(col, kind="stable")
        s = col[order]
        start = np.ones(m, bool)
        start[1:] = s[1:] != s[:-1]
        first = np.maximum.accumulate(np.where(start, np.arange(m), 0))
        member = ~start
        if member.any():
            union_edges(parent, np.stack([order[first[member]], order[member]], axis=1).astype(np.int64))
    flatten(parent)
    size = np.bincount(parent, minlength=m)
    return np.where(size[parent] >= 2, parent, -1)


def settle(comp, rank, flat, offsets, bands, verify: bool, threshold: float):
    """Representatives and Jaccard for the documents of some components (see the module doc).
    Returns (rep: local index of each document's representative or -1, jaccard, rejected count)."""
    n = len(comp)
    rep_of = np.full(n, -1, np.int64)
    jac = np.full(n, np.nan)
    rejected = 0
    active = np.arange(n)
    labels = np.asarray(comp, dtype=np.int64).copy()
    while len(active):
        order = np.lexsort((rank[active], labels[active]))
        act = active[order]
        lab = labels[act]
        start = np.ones(len(act), bool)
        start[1:] = lab[1:] != lab[:-1]
        first = np.maximum.accumulate(np.where(start, np.arange(len(act)), 0))
        member = ~start
        m, r = act[member], act[first[member]]
        j = jaccard_pairs(flat, offsets, m, r) if len(m) else np.zeros(0)
        ok = j >= threshold if verify else np.ones(len(m), bool)
        rep_of[m[ok]] = r[ok]
        jac[m[ok]] = j[ok]
        rep_of[r[ok]] = r[ok]
        jac[r[ok]] = 1.0
        if not verify:
            break
        resid = m[~ok]
        rejected += len(resid)
        if len(resid) < 2:
            break
        new = _residual_components(bands[resid])
        keep = new >= 0
        active = resid[keep]
        labels[active] = new[keep]
    return rep_of, jac, rejected


def cluster_schema() -> pa.Schema:
    return pa.schema([
        ("cluster", pa.int64()), ("gidx", pa.int64()), ("id", pa.string()), ("representative", pa.string()),
        ("is_representative", pa.bool_()), ("jaccard", pa.float32()), ("quality", pa.float64()),
        ("size", pa.int64()), ("snippet", pa.string()),
    ])


def cluster_task(job: shuffle.PlanJob) -> dict:
    plan_dir = Path(job.plan_dir)
    out, marker, info = shuffle.task_output(plan_dir, "clusters", job.group, also=("drops",))
    if info is not None:
        return info
    stats_keys = ("documents", "components", "clusters", "duplicates", "rejected")
    layout = shuffle.load_layout(plan_dir)
    t = shuffle.read_part(shuffle.numbered(plan_dir, "members", layout.groups), job.group, members_schema(job.settings.bands))
    if t.num_rows == 0:
        _write_drops(plan_dir, job.group, cluster_schema().empty_table(), layout)
        write_shard(cluster_schema().empty_table(), out)
        info = dict.fromkeys(stats_keys, 0)
        write_json(info, marker)
        return info
    gidx = t.column("gidx").to_numpy()
    comp = t.column("comp").to_numpy()
    order = np.lexsort((gidx, comp))
    t = t.take(pa.array(order))
    gidx, comp = gidx[order], comp[order]
    quality = t.column("quality").to_numpy()
    ids = t.column("id")
    # rank: quality descending, then id ascending, then input order
    by_rank = pc.sort_indices(pa.table({"q": quality, "id": ids, "g": gidx}),
                              sort_keys=[("q", "descending"), ("id", "ascending"), ("g", "ascending")]).to_numpy()
    rank = np.empty(len(gidx), np.int64)
    rank[by_rank] = np.arange(len(gidx))
    flat, offsets = shingle_sets(t.column("text"), job.settings.ngram)
    bands = t.column("bands").combine_chunks().flatten().to_numpy().reshape(-1, job.settings.bands)
    rep_of, jac, rejected = settle(comp, rank, flat, offsets, bands, job.settings.verify, job.settings.verify_threshold)
    inc = np.flatnonzero(rep_of >= 0)
    size = np.bincount(rep_of[inc], minlength=len(gidx))[rep_of[inc]]
    id_list = ids.to_pylist()
    texts = t.column("text")
    snippets = [" ".join(texts[int(i)].as_py()[: SNIPPET_CHARS * 2].split())[:SNIPPET_CHARS] for i in inc]
    res = pa.table({
        "cluster": pa.array(gidx[rep_of[inc]], pa.int64()), "gidx": pa.array(gidx[inc], pa.int64()),
        "id": pa.array([id_list[i] for i in inc], pa.string()),
        "representative": pa.array([id_list[rep_of[i]] for i in inc], pa.string()),
        "is_representative": pa.array(rep_of[inc] == inc), "jaccard": pa.array(jac[inc].astype(np.float32)),
        "quality": pa.array(quality[inc], pa.float64()), "size": pa.array(size, pa.int64()),
        "snippet": pa.array(snippets, pa.string()),
    }, schema=cluster_schema())
    res = res.sort_by([("cluster", "ascending"), ("is_representative", "descending"), ("gidx", "ascending")])
    _write_drops(plan_dir, job.group, res, layout)
    write_shard(res, out)
    reps = int(np.count_nonzero(rep_of[inc] == inc))
    info = {"documents": int(len(gidx)), "components": int(len(np.unique(comp))), "clusters": reps,
            "duplicates": int(len(inc) - reps), "rejected": int(rejected)}
    write_json(info, marker)  # written last: the group is done
    return info


DROPS_SCHEMA = pa.schema([("gidx", pa.int64()), ("duplicate_of", pa.string()), ("cluster", pa.int64())])
ASSIGN_SCHEMA = pa.schema([("row", pa.int64()), ("duplicate_of", pa.string()), ("cluster", pa.int64())])


def _shard_of(gidx: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.asarray(offsets), gidx, side="right") - 1


def _write_drops(plan_dir: Path, group: int, res: pa.Table, layout) -> None:
    """The cluster group's documents set aside, as one batch per shard group."""
    drops = res.filter(pc.invert(res.column("is_representative"))).sort_by("gidx")
    gidx = drops.column("gidx").to_numpy() if drops.num_rows else np.zeros(0, np.int64)
    t = pa.table({"gidx": pa.array(gidx, pa.int64()), "duplicate_of": drops.column("representative"),
                  "cluster": drops.column("cluster")}, schema=DROPS_SCHEMA)
    shard = _shard_of(gidx, load_npy(plan_dir / "offsets.npy"))
    shuffle.write_parts(t, layout.groups_of(shard), layout.groups, plan_dir / "drops" / f"{group:05d}.arrow")


def assign_task(job: shuffle.PlanJob) -> int:
    """Per shard group: the rows set aside and the id of the representative kept instead, one batch per
    shard (``assign/GGGGG.arrow``)."""
    plan_dir = Path(job.plan_dir)
    out = plan_dir / "assign" / f"{job.group:05d}.arrow"
    layout = shuffle.load_layout(plan_dir)
    t = shuffle.read_part(shuffle.numbered(plan_dir, "drops", job.settings.cluster_groups), job.group, DROPS_SCHEMA).sort_by("gidx")
    if out.exists():
        return t.num_rows
    offsets = load_npy(plan_dir / "offsets.npy")
    gidx = t.column("gidx").to_numpy()
    shard = _shard_of(gidx, offsets)
    a = pa.table({"row": pa.array(gidx - np.asarray(offsets)[shard], pa.int64()), "duplicate_of": t.column("duplicate_of"),
                  "cluster": t.column("cluster")}, schema=ASSIGN_SCHEMA)
    first = layout.bounds[job.group]
    shuffle.write_parts(a, shard - first, len(layout.shards_of(job.group)), out)
    return t.num_rows

"""From candidate edges to clusters: union-find, representatives, optional exact-Jaccard verification.

1. ``connected_components``: union-find over every edge file (compiled; union by smaller index and
   path halving, so each root is the smallest global index of its component and the labels are
   the same whatever order the edges come in). Documents alone in their component are done.
2. ``members_task`` (one per shard): the documents of the shard that sit in a component of two or
   more — id, quality score, text and band hashes — written as one Arrow IPC record batch per
   *group* of components (``members/NNNNN.arrow``). A group is ``hash(component) mod groups``; the
   number of groups is chosen so a group holds about a shard's worth of documents.
3. ``cluster_task`` (one per group): reads its batch from every shard and settles each component.
   The representative is the document with the highest quality score (when the column exists),
   ties to the smallest ``id``, then to input order. Every other member's exact shingle Jaccard to
   the representative is computed and recorded. Without verification every member joins the
   representative's cluster. With verification, a member joins only when its Jaccard reaches the
   verification threshold; the rejected members are re-bucketed among themselves (same band
   hashes), and each new component of two or more gets its own representative, until none is
   left. Every member of a verified cluster is then within the threshold of its representative,
   so any two members of a cluster have Jaccard >= 2t - 1 (Jaccard distance is a metric).
   ``clusters/GGGGG.arrow``: one row per document in a cluster of two or more: ``cluster`` (the
   representative's global index), ``id``, ``representative`` (its id), ``is_representative``,
   ``jaccard`` (to the representative), ``quality``, ``size``, ``snippet``; ``drops/GGGGG.arrow``:
   the members set aside, one IPC batch per input shard.
4. ``assign_task`` (one per shard): the shard's batch from every group, sorted by row:
   ``assign/NNNNN.arrow`` (row, duplicate_of, cluster), which ``apply_with_plan`` reads.

Memory: 8 bytes a document for union-find; every other step holds about one shard's worth.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.schema import ID, TEXT
from curate.shards import read_json, read_shard, write_json, write_shard
from curate.stages.minhash.buckets import sig_paths
from curate.stages.minhash.kernels import flatten, jaccard_pairs, union_edges
from curate.stages.minhash.shingles import shingle_sets
from curate.stages.minhash.store import load_npy, read_batch, write_batches

SNIPPET_CHARS = 200


def connected_components(n: int, edge_files) -> np.ndarray:
    """Component root (smallest member index) of each of ``n`` documents."""
    parent = np.arange(n, dtype=np.int64)
    for f in edge_files:
        e = load_npy(f, mmap=False)
        if len(e):
            union_edges(parent, e)
    flatten(parent)
    return parent


def group_of(comp: np.ndarray, groups: int) -> np.ndarray:
    h = comp.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return ((h >> np.uint64(29)) % np.uint64(groups)).astype(np.int64)


def members_schema(bands: int) -> pa.Schema:
    return pa.schema([
        ("gidx", pa.int64()), ("comp", pa.int64()), ("id", pa.string()), ("quality", pa.float64()),
        ("text", pa.large_string()), ("bands", pa.list_(pa.uint64(), bands)),
    ])


def members_task(job: dict) -> dict:
    """The shard's documents that have a candidate partner, one IPC batch per group."""
    plan_dir = Path(job["plan_dir"])
    out = plan_dir / "members" / f"{job['index']:05d}.arrow"
    if out.exists():
        return {"members": None}
    n, offset, groups, nb_ = job["rows"], job["offset"], job["groups"], job["bands"]
    comp = np.asarray(load_npy(plan_dir / "components.npy")[offset:offset + n])
    rows = np.flatnonzero(comp >= 0)
    schema = members_schema(nb_)
    if len(rows) == 0:
        write_batches([schema.empty_table()] * groups, schema, out)
        return {"members": 0}
    qcol = job["quality_column"]
    has_quality = bool(qcol) and qcol in _column_names(job["input"])
    table = read_shard(job["input"], columns=[ID, TEXT] + ([qcol] if has_quality else []))
    take = pa.array(rows, pa.int64())
    ids = table.column(ID).take(take)
    if has_quality:
        q = pc.cast(table.column(qcol).take(take), pa.float64())
        quality = pc.fill_null(q, -np.inf).to_numpy(zero_copy_only=False)
        quality = np.where(np.isnan(quality), -np.inf, quality)
    else:
        quality = np.full(len(rows), -np.inf)
    texts = table.column(TEXT).take(take)
    hpath, rpath, _ = sig_paths(plan_dir, job["index"])
    h, r = load_npy(hpath), load_npy(rpath)
    full = np.zeros((n, nb_), np.uint64)
    for j in range(nb_):
        full[np.asarray(r[j]), j] = np.asarray(h[j])
    c = comp[rows]
    g = group_of(c, groups)
    order = np.lexsort((rows, c, g))
    rows_o, c_o, g_o = rows[order], c[order], g[order]
    bands_flat = full[rows_o].reshape(-1)
    t = pa.table({
        "gidx": pa.array(rows_o + offset, pa.int64()), "comp": pa.array(c_o, pa.int64()),
        "id": ids.take(pa.array(order)), "quality": pa.array(quality[order], pa.float64()),
        "text": pc.cast(texts.take(pa.array(order)), pa.large_string()),
        "bands": pa.FixedSizeListArray.from_arrays(pa.array(bands_flat, pa.uint64()), nb_),
    })
    bounds = np.searchsorted(g_o, np.arange(groups + 1))
    write_batches([t.slice(bounds[k], bounds[k + 1] - bounds[k]) for k in range(groups)], schema, out)
    return {"members": int(len(rows))}


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


def cluster_task(job: dict) -> dict:
    plan_dir = Path(job["plan_dir"])
    out = plan_dir / "clusters" / f"{job['group']:05d}.arrow"
    marker = out.with_suffix(".json")
    stats_keys = ("documents", "components", "clusters", "duplicates", "rejected")
    if marker.exists() and out.exists() and (plan_dir / "drops" / f"{job['group']:05d}.arrow").exists():
        return read_json(marker)
    parts = [read_batch(plan_dir / "members" / f"{i:05d}.arrow", job["group"]) for i in range(job["shards"])]
    t = pa.concat_tables(parts) if parts else members_schema(job["bands"]).empty_table()
    if t.num_rows == 0:
        _write_drops(plan_dir, job["group"], cluster_schema().empty_table(), job["offsets"])
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
    flat, offsets = shingle_sets(t.column("text"), job["ngram"])
    bands = t.column("bands").combine_chunks().flatten().to_numpy().reshape(-1, job["bands"])
    rep_of, jac, rejected = settle(comp, rank, flat, offsets, bands, job["verify"], job["verify_threshold"])
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
    _write_drops(plan_dir, job["group"], res, job["offsets"])
    write_shard(res, out)
    reps = int(np.count_nonzero(rep_of[inc] == inc))
    info = {"documents": int(len(gidx)), "components": int(len(np.unique(comp))), "clusters": reps,
            "duplicates": int(len(inc) - reps), "rejected": int(rejected)}
    write_json(info, marker)  # written last: the group is done
    return info


DROPS_SCHEMA = pa.schema([("row", pa.int64()), ("duplicate_of", pa.string()), ("cluster", pa.int64())])


def _write_drops(plan_dir: Path, group: int, res: pa.Table, offsets: list[int]) -> None:
    """The group's documents set aside, as one IPC batch per input shard (row within the shard)."""
    drops = res.filter(pc.invert(res.column("is_representative"))).sort_by("gidx")
    gidx = drops.column("gidx").to_numpy() if drops.num_rows else np.zeros(0, np.int64)
    bounds = np.searchsorted(gidx, np.asarray(list(offsets) + [np.iinfo(np.int64).max], np.int64))
    batches = []
    for i in range(len(offsets)):
        part = drops.slice(bounds[i], bounds[i + 1] - bounds[i])
        batches.append(pa.table({
            "row": pa.array(gidx[bounds[i]:bounds[i + 1]] - offsets[i], pa.int64()),
            "duplicate_of": part.column("representative"), "cluster": part.column("cluster"),
        }, schema=DROPS_SCHEMA))
    write_batches(batches, DROPS_SCHEMA, plan_dir / "drops" / f"{group:05d}.arrow")


def assign_task(job: dict) -> int:
    """Per shard: the rows set aside and the id of the representative kept instead (``assign/NNNNN.arrow``)."""
    plan_dir = Path(job["plan_dir"])
    parts = [read_batch(plan_dir / "drops" / f"{g:05d}.arrow", job["index"]) for g in range(job["groups"])]
    t = pa.concat_tables(parts) if parts else DROPS_SCHEMA.empty_table()
    t = t.sort_by("row")
    write_shard(t, plan_dir / "assign" / f"{job['index']:05d}.arrow")
    return t.num_rows

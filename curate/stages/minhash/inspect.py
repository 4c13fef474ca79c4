"""The near-duplicate clusters a ``minhash_dedup`` plan keeps (``clusters/``), found and formatted for
``curate clusters`` (``curate/commands/clusters.py``): per cluster its id (the representative's global
index), size, and per member its id, whether it is the representative (``*``), its exact shingle Jaccard
to the representative, its quality score and the first characters of its text.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from curate.shards import read_shard
from curate.stages.minhash.stage import STATS_FILE


def find_plans(root: Path) -> list[Path]:
    if (root / STATS_FILE).exists():
        return [root]
    return sorted(p.parent for p in root.glob(f"plans/*/{STATS_FILE}")) or sorted(p.parent for p in root.rglob(STATS_FILE))


def load_clusters(plan: Path) -> pa.Table:
    files = sorted((plan / "clusters").glob("*.arrow"))
    tables = [read_shard(f) for f in files]
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return None
    return pa.concat_tables(tables)


def format_clusters(t: pa.Table, show: int, members: int, width: int, only: list[int] | None = None) -> str:
    reps = t.filter(t.column("is_representative"))
    if only:
        reps = reps.filter(pc.is_in(reps.column("cluster"), pa.array(only, pa.int64())))
    reps = reps.sort_by([("size", "descending"), ("cluster", "ascending")]).slice(0, show if not only else None)
    lines = []
    for rep in reps.to_pylist():
        m = t.filter(pc.equal(t.column("cluster"), rep["cluster"]))
        m = m.sort_by([("is_representative", "descending"), ("jaccard", "descending"), ("gidx", "ascending")])
        lines.append(f"cluster {rep['cluster']}  size {rep['size']}  representative {rep['id']}")
        for row in m.slice(0, members).to_pylist():
            q = "" if row["quality"] is None or row["quality"] == float("-inf") else f" q={row['quality']:.3f}"
            mark = "*" if row["is_representative"] else " "
            lines.append(f"  {mark} {row['id']:<40} J={row['jaccard']:.3f}{q}  {row['snippet'][:width]!r}")
        if m.num_rows > members:
            lines.append(f"    ... {m.num_rows - members} more")
    return "\n".join(lines)

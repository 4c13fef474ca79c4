"""The same pipeline file on a local Ray instance gives the same shards as the local process pool."""
import json

import pytest

from curate.executors.local import LocalExecutor
from curate.pipeline import load_pipeline
from curate.runner import run_pipeline

PIPELINE = """
[pipeline]
name = "ray-test"
output = "unused"
shard_rows = 40
[[sources]]
path = "{sample}/prose.jsonl.gz"
[[sources]]
path = "{sample}/fortunes.jsonl.gz"
[[stages]]
type = "normalize"
[[stages]]
type = "exact_dedup"
"""


def digests(out):
    m = json.loads((out / "manifest.json").read_text())
    return {e["path"]: (e["rows"], e["sha256"]) for e in m["shards"] + m["dropped"]}


@pytest.mark.slow
def test_ray_executor_matches_local(tmp_path, sample_dir):
    ray = pytest.importorskip("ray")
    from curate.executors.ray import RayExecutor

    p = tmp_path / "p.toml"
    p.write_text(PIPELINE.format(sample=sample_dir))
    local_stats = run_pipeline(load_pipeline(p, output=str(tmp_path / "local")), LocalExecutor(1), progress=False)
    ex = RayExecutor(workers=2)
    try:
        ray_stats = run_pipeline(load_pipeline(p, output=str(tmp_path / "ray")), ex, progress=False)
    finally:
        ex.close()
    assert digests(tmp_path / "ray") == digests(tmp_path / "local")
    strip = lambda st: [{k: v for k, v in s.items() if k != "plan"} for s in st["stages"]]
    assert strip(ray_stats) == strip(local_stats)

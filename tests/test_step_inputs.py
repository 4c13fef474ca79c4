"""A map step removes each input shard once its task's marker is written, so OUT holds about one copy of
the documents, not two; a run stopped in the middle of such a step resumes to the same shards without
redoing the step before it."""
import json

import pytest

from curate import tasks
from curate.executors.local import LocalExecutor
from curate.pipeline import load_pipeline
from curate.runner import run_pipeline
from curate.shards import sha256_file


def _pipeline(tmp_path, sample_dir, name):
    out = tmp_path / name
    toml = tmp_path / f"{name}.toml"
    toml.write_text(f'[pipeline]\nname = "t"\noutput = "{out}"\nshard_rows = 30\n'
                    f'[[sources]]\npath = "{sample_dir / "prose.jsonl.gz"}"\n'
                    '[[stages]]\ntype = "normalize"\n[[stages]]\ntype = "exact_dedup"\n'
                    '[[stages]]\ntype = "c4_quality"\n[[stages]]\ntype = "exact_dedup"\nname = "again"\n')
    return out, load_pipeline(toml)


def _digests(out):
    m = json.loads((out / "manifest.json").read_text())
    return {e["path"]: sha256_file(out / e["path"]) for e in m["shards"] + m["dropped"]}


class Stop(Exception):
    pass


def test_inputs_go_as_their_tasks_finish_and_a_stopped_step_resumes(tmp_path, sample_dir, monkeypatch):
    clean, p = _pipeline(tmp_path, sample_dir, "clean")
    run_pipeline(p, LocalExecutor(1), progress=False)
    out, p = _pipeline(tmp_path, sample_dir, "stopped")
    real, seen = tasks.map_task, []

    def stop_midway(task):  # step 1 stops after 5 of its tasks, as a kill would
        if len(seen) == 5:
            left = sorted(q.name for q in (out / "steps/00_read").glob("*.arrow"))
            seen.append(left)
            raise Stop
        seen.append(task.input)
        return real(task)

    monkeypatch.setattr(tasks, "map_task", stop_midway)
    with pytest.raises(Stop):
        run_pipeline(p, LocalExecutor(1), progress=False)  # in-process: the patched task is used
    finished, left = seen[:5], seen[5]
    assert len(left) >= 5 and not any(f.rsplit("/", 1)[-1] in left for f in finished)  # inputs of done tasks gone
    read_markers = {q.name: q.stat().st_mtime_ns for q in (out / "steps/00_read/_tasks").glob("*.json")}
    monkeypatch.setattr(tasks, "map_task", real)
    run_pipeline(p, LocalExecutor(1), progress=False)
    assert _digests(out) == _digests(clean)
    assert {q.name: q.stat().st_mtime_ns for q in (out / "steps/00_read/_tasks").glob("*.json")} == read_markers
    assert not list((out / "steps").rglob("*.arrow"))

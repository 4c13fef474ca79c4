"""The output folder: what it holds, claiming it for a run, and the files written at the end.

::

    OUT/data/*.arrow                    the kept documents: the result (a glob for pyarrow and Polars;
                                        DuckDB reads the shards of ``format = "parquet"``)
    OUT/dropped/NN_<step>/<stage>-<stem>.arrow   set-aside documents with ``stage``, ``reason``, ``duplicate_of``:
                                        in the folder of the step the stage runs in (the reader and the map
                                        stages after it: 00_read), named for the stage and the task's batch
    OUT/manifest.json, OUT/stats.json   both written atomically at the very end
    OUT/run.json                        the pipeline and input fingerprints this folder belongs to
    OUT/run.lock                        while a run holds the folder: who (see ``curate.lock``)
    OUT/steps/NN_<step>/_tasks/*.json   task markers: shards written (path, rows, sha256) and counts
    OUT/steps/NN_<step>/*.arrow         an intermediate step's shards, removed once the next step is done
                                        (``keep_intermediate = true`` keeps them)
    OUT/plans/NN_<step>/                a global stage's plan, removed at the end (``keep_plans = true``)
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from curate import fingerprint as fp
from curate.code_fingerprint import code_sha256
from curate.contracts import Manifest, Marker, StageCounts
from curate.config import ConfigError
from curate.pipeline import Pipeline
from curate.shards import read_record, write_json

LAYOUT = 2  # 1: shards under steps/ only (before data/); such a folder is refused with a message
RUN_FILE = "run.json"


def check_folder(out: Path) -> None:
    """Fail early, with a message, on an output path that cannot be a curate folder."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"output {out} is a file, not a folder; choose another --output")
    for parent in out.parents:
        if parent.exists() and not parent.is_dir():
            raise ConfigError(f"output {out}: {parent} is a file, not a folder; choose another --output")
    if out.is_dir() and not (out / RUN_FILE).exists() and any(p.name != "run.lock" for p in out.iterdir()):
        raise ConfigError(f"{out} exists and is not a curate output folder; choose another --output")


def identity(pipeline: Pipeline, files: list[dict]) -> dict:
    """What must match for a rerun to resume this folder (options that change no shard are left out)."""
    return json.loads(json.dumps({
        "stages": [[s.type, s.name, s.params] for s in pipeline.stages],
        "inputs": [[f["path"], f["format"]] for f in files],
        "format": pipeline.format, "shard_rows": pipeline.shard_rows, "max_doc_bytes": pipeline.max_doc_bytes,
        "split_bytes": pipeline.split_bytes, "keep_dropped": pipeline.keep_dropped,
    }))


def claim(out: Path, pipeline: Pipeline, files: list[dict], prints: dict, allow_changed: bool) -> tuple[list[str], dict]:
    """Record what this folder is for; refuse a different pipeline, an old layout, or changed inputs
    (unless ``allow_changed``). Returns the lines naming changed inputs (empty when none) and the fingerprints
    ``run.json`` holds (``fingerprint.as_recorded``: what the tasks' keys are made of)."""
    run_file = out / RUN_FILE
    ident = identity(pipeline, files)
    if run_file.exists():
        previous = read_record(run_file)
        if previous is None:
            raise ConfigError(f"{run_file} is damaged (not a JSON object), so this folder's run cannot be checked; "
                              f"choose another --output, or delete {out} to start over")
        if previous.get("layout") != LAYOUT:
            raise ConfigError(f"{out} was written by an earlier version of curate (its shards are not under data/); "
                              f"run into a new --output, or delete {out} to start over")
        if previous["pipeline"] != ident:
            raise ConfigError(f"{out} holds a run of a different pipeline or different inputs; "
                              f"choose another --output, or delete {out} to start over")
        was = previous.get("fingerprints") or {}
        changes = fp.changed(was, prints)
        if changes and not allow_changed:
            listing = "\n  ".join(changes)
            raise ConfigError(f"{len(changes)} input file(s) changed since {out} was written:\n  {listing}\n"
                              f"rerun with --allow-changed-inputs to redo what they feed, or choose another --output")
        recorded = fp.as_recorded(was, prints)
        if not changes:
            return [], recorded
        code = previous.get("code")  # the code that started the folder stays recorded
    else:
        changes, recorded, code = [], prints, code_sha256()
    write_json({"layout": LAYOUT, "pipeline": ident, "fingerprints": recorded, "code": code}, run_file)
    return changes, recorded


def other_code(out: Path) -> str | None:
    """The fingerprint of the curate code that started the run in ``out`` (``code_fingerprint``) when it is not
    this code's ("unrecorded" for a ``run.json`` written before the record existed: an earlier curate); None
    when it is this code's."""
    previous = read_record(out / RUN_FILE) or {}
    code = previous.get("code")
    if not isinstance(code, str):
        return "unrecorded"
    return code if code != code_sha256() else None


def assemble(pipeline: Pipeline, records: list[tuple], final_markers: list[Marker]) -> tuple[dict, dict]:
    """stats.json and manifest.json from the task markers alone (no shard is read or hashed here).
    ``records``: (stage names, markers, {global stage name: plan stats}) per step, in order."""
    order, totals, plans = [], {}, {}
    for names, markers, step_plans in records:
        for name in names:
            order.append(name)
            totals[name] = StageCounts(name)
        for s in (s for m in markers for s in m.stats):
            _add_counts(totals[s.name], s)
        plans.update({name: plan for name, plan in step_plans.items() if plan})
    stages = [totals[n] for n in order]
    check_conservation(stages)
    types = {s.name: s.type for s in pipeline.stages}
    rows = []
    for t in stages:
        row = t.to_json()
        if t.name in plans:
            row["plan"] = plans[t.name]
        row["type"] = types.get(t.name, "read")
        rows.append(row)
    stats = {"pipeline": pipeline.name, "stages": rows}
    manifest = Manifest(shards=[e for m in final_markers for e in m.outputs],
                        dropped=[e for _, ms, _ in records for m in ms for e in m.dropped])
    return stats, manifest.to_json()


def _add_counts(total: StageCounts, s: StageCounts) -> None:
    """Add one task's counts of a stage into the run's (the optional parts appear once a task has some)."""
    total.docs_in += s.docs_in
    total.kept += s.kept
    total.added += s.added
    _add(total.dropped, s.dropped)
    for key in ("skipped", "counters", "errors"):
        if getattr(s, key):
            setattr(total, key, _add(getattr(total, key) or {}, getattr(s, key)))


def _add(into: dict, counts: dict) -> dict:
    for k, n in counts.items():
        into[k] = into.get(k, 0) + n
    return into


def check_conservation(stages: list[StageCounts]) -> None:
    for prev, cur in zip([None] + stages, stages):
        if cur.docs_in + cur.added != cur.kept + sum(cur.dropped.values()):
            raise RuntimeError(f"stage {cur.name}: {cur.docs_in} in + {cur.added} added != "
                               f"{cur.kept} kept + dropped {cur.dropped}")
        if prev is not None and cur.docs_in != prev.kept:
            raise RuntimeError(f"stage {cur.name} saw {cur.docs_in} documents but {prev.name} kept {prev.kept}")


def remove_temp_files(out: Path) -> None:
    """Half-written files of a killed run (only ever removed while this run holds the folder's lock)."""
    for p in out.rglob(".*.tmp"):
        p.unlink(missing_ok=True)


def remove_plan(plan_dir: Path, keep: tuple[str, ...] = ()) -> None:
    """Remove a global stage's plan, except the parts named in ``keep`` (reports such as clusters)."""
    if not plan_dir.is_dir():
        return
    if not keep:
        shutil.rmtree(plan_dir)
        return
    for p in plan_dir.iterdir():
        if p.name in keep:
            continue
        shutil.rmtree(p) if p.is_dir() else p.unlink()

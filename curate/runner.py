"""Runs a pipeline: splits the work into tasks, runs them on an executor, writes markers and stats.

The pipeline's stages are cut into *steps*: the reader is step 0; every later step starts at a global
stage (or at the first stage) and runs the map stages that follow it, fused into one pass per shard.

Output folder::

    OUT/run.json                      the pipeline this folder belongs to (a rerun must match it)
    OUT/steps/NN_<stage>/part-*.arrow  kept shards after each step (the last step's are the result)
    OUT/steps/NN_<stage>/_tasks/*.json completion markers, written last, holding each task's stats
    OUT/dropped/NN_<stage>/*.arrow     set-aside documents with ``stage``, ``reason``, ``duplicate_of``
    OUT/plans/NN_<stage>/              the plan of a global stage (hashes, buckets, clusters, n-grams)
    OUT/manifest.json, OUT/stats.json  written atomically at the very end

A task's shards appear by atomic rename and its marker is written after them, so a rerun after a
crash skips finished tasks and redoes the rest, giving byte-identical output.
"""
from __future__ import annotations

import functools
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from tqdm import tqdm

from curate import readers
from curate.pipeline import ConfigError, Pipeline, StageSpec, resolve_inputs
from curate.schema import BASE_SCHEMA
from curate.shards import read_json, read_shard, shard_entry, shard_suffix, write_json, write_shard
from curate.stages.base import mark_dropped

READ_STAGE = "read"


@dataclass
class Step:
    index: int
    name: str
    global_stage: StageSpec | None
    map_stages: list[StageSpec]

    @property
    def dirname(self) -> str:
        return f"{self.index:02d}_{self.name}"

    @property
    def stages(self) -> list[StageSpec]:
        return ([self.global_stage] if self.global_stage else []) + self.map_stages


def plan_steps(stages: list[StageSpec]) -> list[Step]:
    steps: list[Step] = []
    for spec in stages:
        if spec.kind == "global" or not steps:
            glob = spec if spec.kind == "global" else None
            steps.append(Step(len(steps) + 1, spec.name, glob, [] if glob else [spec]))
        else:
            steps[-1].map_stages.append(spec)
    return steps


def run_pipeline(pipeline: Pipeline, executor, progress: bool = True) -> dict:
    """Run (or resume) ``pipeline``; returns the stats dict also written to ``OUT/stats.json``."""
    out = Path(pipeline.output)
    files = resolve_inputs(pipeline)
    for spec in pipeline.stages:  # a stage that cannot be built fails now, before any work
        try:
            spec.build()
        except (ValueError, FileNotFoundError, OSError) as e:
            raise ConfigError(f"stage {spec.name!r} ({spec.type}): {e}") from e
    _claim_output(out, pipeline, files)
    _remove_temp_files(out)

    say = print if progress else (lambda *a, **k: None)
    say(f"curate: {pipeline.name}: {len(files)} input file(s), {len(pipeline.stages)} stage(s) -> {out}")
    markers = _run_read_step(pipeline, files, executor, out, progress)
    shards = [out / p for m in markers for p in m["outputs"]]
    all_markers = [(None, markers, {})]  # (step, task markers, plan stats); step None is the reader
    for step in plan_steps(pipeline.stages):
        plan_stats = {}
        if step.global_stage is not None:
            plan_stats = _run_plan(step, shards, executor, out, say)
        markers = _run_map_step(step, shards, executor, out, pipeline.format, progress)
        shards = [out / p for m in markers for p in m["outputs"]]
        all_markers.append((step, markers, plan_stats))
    stats = _aggregate(pipeline, all_markers)
    manifest = {
        "shards": [shard_entry(p, out) for p in shards],
        "dropped": [shard_entry(out / p, out) for _, ms, _ in all_markers for m in ms for p in m["dropped"]],
    }
    write_json(stats, out / "stats.json")
    write_json(manifest, out / "manifest.json")
    return stats


# --- the read step ------------------------------------------------------------------------------

def _run_read_step(pipeline: Pipeline, files: list[dict], executor, out: Path, progress: bool) -> list[dict]:
    step_dir, drop_dir = out / "steps" / f"00_{READ_STAGE}", out / "dropped" / f"00_{READ_STAGE}"
    tasks = [
        {
            "task_id": f"src{i:05d}", "file": f, "step_dir": str(step_dir), "drop_dir": str(drop_dir), "root": str(out),
            "format": pipeline.format, "shard_rows": pipeline.shard_rows, "max_doc_bytes": pipeline.max_doc_bytes,
        }
        for i, f in enumerate(files)
    ]
    return _run_tasks(run_read_task, tasks, step_dir, executor, "read", progress)


def run_read_task(task: dict) -> dict:
    """Read one input file into shards of ``shard_rows`` documents plus one dropped shard."""
    f, fmt = task["file"], task["format"]
    suffix = shard_suffix(fmt)
    docs, dropped, skipped, outputs = [], [], {}, []
    n_docs = 0

    def flush():
        path = Path(task["step_dir"]) / f"{task['task_id']}-{len(outputs):05d}{suffix}"
        write_shard(pa.Table.from_pylist(docs, schema=BASE_SCHEMA), path, fmt)
        outputs.append(os.path.relpath(path, task["root"]))
        docs.clear()

    for item in readers.read_file(f["path"], f["format"], text_field=f.get("text_field", "text"),
                                  id_field=f.get("id_field", "id"), max_doc_bytes=task["max_doc_bytes"]):
        if item[0] == "doc":
            docs.append(item[1])
            n_docs += 1
            if len(docs) >= task["shard_rows"]:
                flush()
        elif item[0] == "drop":
            dropped.append({**item[1], "reason": item[2]})
        else:
            skipped[item[1]] = skipped.get(item[1], 0) + 1
    if docs or not outputs:
        flush()
    drop_paths, reasons = [], {}
    if dropped:
        table = pa.Table.from_pylist([{k: d[k] for k in BASE_SCHEMA.names} for d in dropped], schema=BASE_SCHEMA)
        table = mark_dropped(table, READ_STAGE, [d["reason"] for d in dropped])
        path = Path(task["drop_dir"]) / f"{task['task_id']}{suffix}"
        write_shard(table, path, fmt)
        drop_paths.append(os.path.relpath(path, task["root"]))
        for d in dropped:
            reasons[d["reason"]] = reasons.get(d["reason"], 0) + 1
    stats = [{"name": READ_STAGE, "in": n_docs + len(dropped), "kept": n_docs, "dropped": reasons, "skipped": skipped}]
    return {"task_id": task["task_id"], "outputs": outputs, "dropped": drop_paths, "stats": stats, "docs": n_docs + len(dropped)}


# --- global plans and map steps -----------------------------------------------------------------

def _run_plan(step: Step, shards: list[Path], executor, out: Path, say) -> dict:
    plan_dir = out / "plans" / step.dirname
    done = plan_dir / "_done.json"
    if done.exists():
        return read_json(done)
    say(f"  planning {step.global_stage.name} over {len(shards)} shard(s)")
    t0 = time.time()
    stats = step.global_stage.build().plan([str(p) for p in shards], plan_dir, executor) or {}
    stats = {**stats, "seconds": round(time.time() - t0, 3)}
    write_json(stats, done)
    return stats


def _run_map_step(step: Step, shards: list[Path], executor, out: Path, fmt: str, progress: bool) -> list[dict]:
    step_dir, drop_dir = out / "steps" / step.dirname, out / "dropped" / step.dirname
    specs = [(s.type, s.name, s.params) for s in step.stages]
    plan_dir = str(out / "plans" / step.dirname) if step.global_stage else None
    tasks = [
        {
            "task_id": f"part-{i:05d}", "input": str(p), "shard_index": i, "specs": specs, "plan_dir": plan_dir,
            "step_dir": str(step_dir), "drop_dir": str(drop_dir), "root": str(out), "format": fmt,
        }
        for i, p in enumerate(shards)
    ]
    label = "+".join(s.name for s in step.stages)
    return _run_tasks(run_map_task, tasks, step_dir, executor, label, progress)


def run_map_task(task: dict) -> dict:
    """Apply one step's stages to one shard: the global stage's plan first, then the fused map stages."""
    table = read_shard(task["input"])
    suffix = shard_suffix(task["format"])
    stats, drop_paths = [], []
    n_in = table.num_rows
    for i, (type_, name, params) in enumerate(task["specs"]):
        stage = _build_stage(type_, name, json.dumps(params, sort_keys=True))
        rows_in = table.num_rows
        if rows_in == 0:
            stats.append({"name": name, "in": 0, "kept": 0, "dropped": {}})
            continue
        if i == 0 and task["plan_dir"]:
            result = stage.apply_with_plan(table, task["shard_index"], Path(task["plan_dir"]))
        else:
            result = stage.apply(table)
        kept, dropped = result.kept, result.dropped
        if kept.num_rows + dropped.num_rows != rows_in:
            raise RuntimeError(f"stage {name} lost documents: {rows_in} in, {kept.num_rows} kept, {dropped.num_rows} dropped")
        reasons = {}
        if dropped.num_rows:
            for r in dropped.column("reason").to_pylist():
                reasons[r] = reasons.get(r, 0) + 1
            path = Path(task["drop_dir"]) / f"{name}-{task['task_id']}{suffix}"
            write_shard(dropped, path, task["format"])
            drop_paths.append(os.path.relpath(path, task["root"]))
        stats.append({"name": name, "in": rows_in, "kept": kept.num_rows, "dropped": reasons})
        table = kept
    outputs = []
    if table.num_rows:
        path = Path(task["step_dir"]) / f"{task['task_id']}{suffix}"
        write_shard(table, path, task["format"])
        outputs.append(os.path.relpath(path, task["root"]))
    return {"task_id": task["task_id"], "outputs": outputs, "dropped": drop_paths, "stats": stats, "docs": n_in}


@functools.lru_cache(maxsize=64)
def _build_stage(type_: str, name: str, params_json: str):
    """Stages are built once per worker process (fastText models load once)."""
    return StageSpec(type_, name, json.loads(params_json)).build()


# --- running tasks with markers -----------------------------------------------------------------

def _run_tasks(fn, tasks: list[dict], step_dir: Path, executor, label: str, progress: bool) -> list[dict]:
    marker_dir = step_dir / "_tasks"
    results: dict[str, dict] = {}
    todo = []
    for t in tasks:
        marker = marker_dir / f"{t['task_id']}.json"
        if marker.exists():
            results[t["task_id"]] = read_json(marker)
        else:
            todo.append(t)
    bar = tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc=f"  {label}", unit="shard",
               disable=not progress, dynamic_ncols=True)
    t0, docs = time.time(), 0

    def finished(result: dict) -> None:
        nonlocal docs
        write_json(result, marker_dir / f"{result['task_id']}.json")  # the marker comes last
        results[result["task_id"]] = result
        docs += result["docs"]
        bar.update()
        bar.set_postfix_str(f"{docs / max(time.time() - t0, 1e-9):,.0f} docs/s")

    if todo:
        executor.map(_call, [(fn, t) for t in todo], on_result=finished)
    bar.close()
    return [results[t["task_id"]] for t in tasks]


def _call(args):
    fn, task = args
    return fn(task)


# --- stats --------------------------------------------------------------------------------------

def _aggregate(pipeline: Pipeline, all_markers: list) -> dict:
    order, totals = [], {}
    for step, markers, plan_stats in all_markers:
        names = [READ_STAGE] if step is None else [s.name for s in step.stages]
        for name in names:
            order.append(name)
            totals[name] = {"name": name, "in": 0, "kept": 0, "dropped": {}}
        for s in (s for m in markers for s in m["stats"]):
            t = totals[s["name"]]
            t["in"] += s["in"]
            t["kept"] += s["kept"]
            for reason, n in s["dropped"].items():
                t["dropped"][reason] = t["dropped"].get(reason, 0) + n
            for kind, n in s.get("skipped", {}).items():
                t.setdefault("skipped", {})
                t["skipped"][kind] = t["skipped"].get(kind, 0) + n
        if step is not None and step.global_stage is not None and plan_stats:
            totals[step.global_stage.name]["plan"] = plan_stats
    stages = [totals[n] for n in order]
    for t in stages:
        t["dropped"] = dict(sorted(t["dropped"].items()))
    _check_conservation(stages)
    types = {s.name: s.type for s in pipeline.stages}
    for t in stages:
        t["type"] = types.get(t["name"], READ_STAGE)
    return {"pipeline": pipeline.name, "stages": stages}


def _check_conservation(stages: list[dict]) -> None:
    for prev, cur in zip([None] + stages, stages):
        if cur["in"] != cur["kept"] + sum(cur["dropped"].values()):
            raise RuntimeError(f"stage {cur['name']}: {cur['in']} in != {cur['kept']} kept + dropped {cur['dropped']}")
        if prev is not None and cur["in"] != prev["kept"]:
            raise RuntimeError(f"stage {cur['name']} saw {cur['in']} documents but {prev['name']} kept {prev['kept']}")


# --- the output folder --------------------------------------------------------------------------

def _claim_output(out: Path, pipeline: Pipeline, files: list[dict]) -> None:
    """Record what this folder is for; a rerun with a different pipeline or inputs is refused."""
    ident = {
        "stages": [[s.type, s.name, s.params] for s in pipeline.stages],
        "inputs": [[f["path"], f["format"]] for f in files],
        "format": pipeline.format, "shard_rows": pipeline.shard_rows, "max_doc_bytes": pipeline.max_doc_bytes,
    }
    run_file = out / "run.json"
    if run_file.exists():
        previous = read_json(run_file)
        if previous != json.loads(json.dumps(ident)):
            raise ConfigError(
                f"{out} holds a run of a different pipeline or different inputs; "
                f"choose another --output, or delete {out} to start over"
            )
        return
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} exists and is not a curate output folder; choose another --output")
    write_json(ident, run_file)


def _remove_temp_files(out: Path) -> None:
    for p in out.rglob(".*.tmp"):
        p.unlink(missing_ok=True)

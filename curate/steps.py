"""A pipeline's steps, and the life of one step from top to bottom: tasks, markers, plan, run, cleanup.

The stages are cut into steps. Step 0 reads the inputs (one task per split of a file) and runs the map
stages that follow the reader on each batch, fused; every later step starts at a global stage (its plan
is built first) and runs the map stages that follow it, fused, one task per shard of the step before.
The last step writes to ``OUT/data/``; the others to ``OUT/steps/NN_<name>/``.

Markers make a killed run resumable. A task's shards appear by atomic rename and its marker is written
after them; a marker counts only if its ``key`` matches what the task would read now (the input file's
fingerprint and split for a read task; the input shard's sha256, and the plan's inputs for a global
step), so a rerun skips finished tasks, redoes the rest, and gives byte-identical output.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from curate import readers, tasks
from curate.fingerprint import SAMPLE
from curate.contracts import MapTask, Marker, ReadTask, ShardEntry, StepOutput
from curate.executors import describe
from curate.output import remove_plan
from curate.progress import TaskProgress
from curate.pipeline import Pipeline, StageSpec
from curate.shards import is_inside, read_json, read_record, write_json
from curate.stages import stage_class


@dataclass
class Step:
    index: int
    name: str
    global_stage: StageSpec | None
    map_stages: list[StageSpec]

    @property
    def reads(self) -> bool:
        return self.index == 0

    @property
    def dirname(self) -> str:
        return f"{self.index:02d}_{self.name}"

    @property
    def stages(self) -> list[StageSpec]:
        return ([self.global_stage] if self.global_stage else []) + self.map_stages

    @property
    def stage_names(self) -> list[str]:
        return ([tasks.READ_STAGE] if self.reads else []) + [s.name for s in self.stages]


def plan_steps(stages: list[StageSpec]) -> list[Step]:
    steps = [Step(0, tasks.READ_STAGE, None, [])]
    for spec in stages:
        if spec.kind == "global":
            steps.append(Step(len(steps), spec.name, spec, []))
        else:
            steps[-1].map_stages.append(spec)
    return steps


@dataclass
class Run:
    """What every step needs to know about the run."""
    pipeline: Pipeline
    out: Path
    executor: object
    progress: bool = True

    def say(self, *args) -> None:
        if self.progress:
            print(*args, flush=True)


class MissingInputs(Exception):
    """Tasks must be redone but the shards they read were removed (``keep_intermediate = false``):
    the tasks that wrote those shards (their markers, listed here) must be redone first."""

    def __init__(self, producers: list[Path]):
        super().__init__(f"{len(producers)} earlier task(s) must be redone")
        self.producers = producers


@dataclass
class StepResult:
    step: Step
    markers: list[Marker]
    marker_paths: list[Path]
    plan_stats: dict
    ran: int = 0  # tasks run this time (0: every task was already done)


def run_step(run: Run, step: Step, previous: StepResult | None, final: bool, files: list[dict] | None = None,
             prints: dict | None = None, samples: dict | None = None) -> StepResult:
    """Run (or resume) one step; ``previous`` is the step before it (None for the reading step)."""
    out = run.out
    marker_dir = out / "steps" / step.dirname / "_tasks"
    shared = step_output(run, step, final)
    # 1. the tasks, each with the key its marker must hold
    if step.reads:
        step_tasks = read_tasks(run, files, prints, shared, samples)
        inputs, producers = [], []
    else:
        inputs = [e for m in previous.markers for e in m.outputs]
        producers = [p for m, p in zip(previous.markers, previous.marker_paths) for _ in m.outputs]
        step_tasks = map_tasks(run, step, inputs, shared)
    # 2. markers: finished tasks are kept, stale ones (another key, or no longer a task) removed
    markers, todo = {}, []
    for t in step_tasks:
        path = marker_dir / f"{t.task_id}.json"
        m = read_marker(path)
        if m is not None and m.key == t.key:
            markers[t.task_id] = m
        else:
            if path.exists():
                forget(path, out)
            todo.append(t)
    if marker_dir.is_dir():
        ids = {t.task_id for t in step_tasks}
        for p in marker_dir.glob("*.json"):
            if p.stem not in ids:
                forget(p, out)
    # 3. the plan, then the tasks
    plan_stats = {}
    if todo and not step.reads:
        # with its plan complete, a step's tasks need only their own input shards
        plan_built = step.global_stage is None or finished_plan(run, step, plan_digest(inputs)) is not None
        needed = [t.shard_index for t in todo] if plan_built else range(len(inputs))
        missing = sorted({producers[i] for i in needed if not (out / inputs[i].path).exists()})
        if missing:
            raise MissingInputs(missing)
    if step.global_stage is not None:
        plan_stats = ensure_plan(run, step, inputs, plan_digest(inputs), needed=bool(todo))
    if todo:
        fn = tasks.read_task if step.reads else tasks.map_task
        label = "+".join(step.stage_names)
        done = None if step.reads else (lambda m, by_id={t.task_id: t for t in todo}: remove_input(run, by_id[m.task_id]))
        for m in run_tasks(run, fn, todo, marker_dir, label, total=len(step_tasks), on_done=done):
            markers[m.task_id] = m
    ordered = [markers[t.task_id] for t in step_tasks]
    return StepResult(step, ordered, [marker_dir / f"{t.task_id}.json" for t in step_tasks], plan_stats, len(todo))


def step_output(run: Run, step: Step, final: bool) -> StepOutput:
    """What every task of ``step`` shares: its stages; the last step writes to OUT/data, the others to OUT/steps/NN."""
    out = run.out
    return StepOutput(stages=tuple(step.stages), root=str(out),
                      out_dir=str(out / "data" if final else out / "steps" / step.dirname),
                      drop_dir=str(out / "dropped" / step.dirname), format=run.pipeline.format,
                      keep_dropped=run.pipeline.keep_dropped)


def read_marker(path: Path) -> Marker | None:
    """A task's marker, or None when it is missing or damaged (the task is then redone)."""
    record = read_record(path)
    try:
        return Marker.from_json(record) if record is not None else None
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def read_tasks(run: Run, files: list[dict], prints: dict, shared: StepOutput,
               samples: dict | None = None) -> list[ReadTask]:
    """One task per split of every input file (splits are cached in ``_splits.json`` by fingerprint). Each task
    expects its file's size and mtime, and ``samples[path]`` (``fingerprint.SAMPLE``, taken when this run
    started) when known (tasks.InputChanged)."""
    p = run.pipeline
    cache_path = run.out / "steps" / "00_read" / "_splits.json"
    cache = read_record(cache_path) or {}
    fresh = {}
    need = [f for f in files if cache.get(f["path"], {}).get("fingerprint") != prints[f["path"]]]
    if need:
        found = run.executor.map(_plan_file, [(f["path"], f["format"], p.split_bytes, str(read_index_path(run, f["path"], prints)))
                                              for f in need])
        for f, splits in zip(need, found):
            fresh[f["path"]] = {"fingerprint": prints[f["path"]], "splits": splits}
        cache = {**cache, **fresh}
        write_json({f["path"]: cache[f["path"]] for f in files}, cache_path)
    prefixes = readers.id_prefixes([f["path"] for f in files])  # inputs that share a base name
    step_tasks = []
    for i, f in enumerate(files):
        source = {k: f[k] for k in ("text_field", "id_field") if k in f}
        for j, split in enumerate(cache[f["path"]]["splits"]):
            if f["path"] in prefixes:  # (in the key: its ids change with it; other files' keys do not)
                split = {**split, "id_prefix": prefixes[f["path"]]}
            key = _digest({"split": split, "fingerprint": prints[f["path"]], "source": source})
            expect = {"path": f["path"], **{k: prints[f["path"]][k] for k in ("size", "mtime_ns")}}
            if (samples or {}).get(f["path"]):
                expect[SAMPLE] = samples[f["path"]]
            step_tasks.append(ReadTask(task_id=f"src{i:05d}-{j:04d}", key=key, step=shared, split={**split, "expect": expect},
                                       source=source, max_doc_bytes=p.max_doc_bytes, shard_rows=p.shard_rows))
    return step_tasks


def _plan_file(args: tuple) -> list[dict]:
    path, fmt, target, index_path = args
    return readers.plan_splits(path, fmt, target_bytes=target, index_path=index_path)


READ_PLANS = Path("plans") / "00_read"  # seek indexes of one-stream .gz inputs, removed once the read step is done


def read_index_path(run: Run, path: str, prints: dict) -> Path:
    """Where the read step keeps the seek index of one input (a new name when the file changes)."""
    return run.out / READ_PLANS / f"{_digest([path, prints[path]])}.gzidx"


def remove_read_plans(run: Run) -> None:
    """The read step's seek indexes, once every read task is done (a split whose index is gone still reads,
    from the start of its file: the same records)."""
    if not run.pipeline.keep_plans and (run.out / READ_PLANS).is_dir():
        shutil.rmtree(run.out / READ_PLANS)


def map_tasks(run: Run, step: Step, inputs: list[ShardEntry], shared: StepOutput) -> list[MapTask]:
    plan_dir = str(run.out / "plans" / step.dirname) if step.global_stage else None
    plan_key = plan_digest(inputs) if step.global_stage else ""
    step_tasks = []
    for i, e in enumerate(inputs):
        stem = Path(e.path).name.split(".")[0]
        step_tasks.append(MapTask(task_id=stem, key=_digest([e.sha256, plan_key]), step=shared, input=str(run.out / e.path),
                           shard_index=i, plan_dir=plan_dir))
    return step_tasks


def plan_digest(inputs: list[ShardEntry]) -> str:
    return _digest([e.sha256 for e in inputs])


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:32]


def ensure_plan(run: Run, step: Step, inputs: list[ShardEntry], digest: str, needed: bool) -> dict:
    """Build the global stage's plan unless it is there for these very inputs; returns its stats.

    ``plans/NN/_inputs.json`` names the inputs a plan in progress is for (a killed plan resumes only for
    the same ones), ``plans/NN/_done.json`` marks it complete; ``steps/NN/_plan.json`` keeps the stats
    for stats.json after the plan itself is removed at the end of the run."""
    record = run.out / "steps" / step.dirname / "_plan.json"
    if not needed:  # every task of the step is done: the plan is not read again
        return (read_record(record) or {}).get("stats", {})
    finished = finished_plan(run, step, digest)
    if finished is not None:
        return finished["stats"]
    plan_dir = run.out / "plans" / step.dirname
    done, claimed = plan_dir / "_done.json", plan_dir / "_inputs.json"
    if plan_dir.exists() and (read_record(claimed) or {}).get("digest") != digest:
        shutil.rmtree(plan_dir)  # a plan of other inputs, or the report left by a finished run's cleanup
    write_json({"digest": digest}, claimed)
    run.say(f"  planning {step.global_stage.name} over {len(inputs)} shard(s)")
    t0 = time.time()
    stats = step.global_stage.build().plan([str(run.out / e.path) for e in inputs], plan_dir, run.executor) or {}
    stats = {**stats, "seconds": round(time.time() - t0, 3)}
    write_json({"digest": digest, "stats": stats}, record)
    write_json({"digest": digest, "stats": stats}, done)
    return stats


def run_tasks(run: Run, fn, todo: list, marker_dir: Path, label: str, total: int, on_done=None) -> list[Marker]:
    """Run tasks on the executor; each finished task's marker is written (last) as it arrives, then
    ``on_done(marker)`` is called."""
    progress = TaskProgress(label, total, done=total - len(todo), enabled=run.progress)

    def finished(marker: Marker) -> None:
        write_json(marker.to_json(), marker_dir / f"{marker.task_id}.json")
        if on_done is not None:
            on_done(marker)
        progress.update(marker.docs)

    try:
        extra = {}
        if fn is tasks.read_task and getattr(run.executor, "handles_crashes", False):  # a split a library crashes on
            def crashed(item, why):
                print(f"curate: warning: {describe(item)}: {why}; the split is set aside as read_crashed",
                      file=sys.stderr, flush=True)  # always said
                return tasks.read_crashed(item, why)

            extra["on_crash"] = crashed
            extra["journal"] = marker_dir.parent / "_in_process.json"  # a crash in-process: survived on the rerun
        return run.executor.map(tasks.call, [(fn, t) for t in todo], on_result=finished, **extra)
    finally:
        progress.close()


def forget(marker_path: Path, out: Path) -> None:
    """Undo a finished task: remove the shards its marker lists, then the marker."""
    m = read_record(marker_path) or {}
    entries = [e for key in ("outputs", "dropped") if isinstance(m.get(key), list) for e in m[key]]
    for e in entries:
        name = e.get("path") if isinstance(e, dict) else None
        if is_inside(name):
            (out / name).unlink(missing_ok=True)  # only files inside OUT, whatever a damaged marker says
    marker_path.unlink(missing_ok=True)


def finished_plan(run: Run, step: Step, digest: str) -> dict | None:
    """The step's ``plans/NN/_done.json`` record if its plan is complete for inputs of ``digest``, else None."""
    done = run.out / "plans" / step.dirname / "_done.json"
    record = read_record(done)
    return record if record is not None and record.get("digest") == digest else None


def remove_input(run: Run, task: MapTask) -> None:
    """A map task's input shard once its marker is written (its plan, if any, was built before the tasks ran):
    the steps' shards on disk shrink as the next step's grow, so OUT holds about one copy, not two."""
    path = Path(task.input)
    if not run.pipeline.keep_intermediate and path.parent.parent.name == "steps":
        path.unlink(missing_ok=True)


def remove_intermediate(run: Run, result: StepResult) -> None:
    """The shards of a step whose successor has finished: nothing reads them again (markers stay)."""
    if run.pipeline.keep_intermediate:
        return
    for m in result.markers:
        for e in m.outputs:
            path = run.out / e.path
            if path.parent.parent.name == "steps":
                path.unlink(missing_ok=True)


def remove_plans(run: Run, steps: list[Step]) -> None:
    """A global stage's plan once its step is done (its report parts stay), unless ``keep_plans``."""
    if run.pipeline.keep_plans:
        return
    for step in steps:
        if step.reads:
            remove_read_plans(run)
        if step.global_stage is not None:
            stage_cls = stage_class(step.global_stage.type)
            remove_plan(run.out / "plans" / step.dirname, tuple(getattr(stage_cls, "report_parts", ())))
    plans = run.out / "plans"
    if plans.is_dir() and not any(plans.iterdir()):
        os.rmdir(plans)

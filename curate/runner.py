"""Runs a pipeline: claims the output folder, runs its steps in order, writes manifest and stats.

See ``curate.steps`` for the life of one step and ``curate.output`` for what the folder holds.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from curate import fingerprint, output, stage_watch, steps
from curate.lock import OutputLock
from curate.config import ConfigError
from curate.pipeline import Pipeline, resolve_inputs
from curate.shards import write_json

READ_STAGE = steps.tasks.READ_STAGE


def run_pipeline(pipeline: Pipeline, executor, progress: bool = True, allow_changed_inputs: bool = False) -> dict:
    """Run (or resume) ``pipeline``; returns the stats dict also written to ``OUT/stats.json``."""
    try:
        return _run_pipeline(pipeline, executor, progress, allow_changed_inputs)
    finally:
        stage_watch.close_kept()  # tasks run here (workers = 1) left their watched child for the next one


def _run_pipeline(pipeline: Pipeline, executor, progress: bool, allow_changed_inputs: bool) -> dict:
    out = Path(pipeline.output).absolute()  # tasks on other nodes may run in another directory
    matches = resolve_inputs(pipeline)
    files = outside_output(matches.files, out)
    for spec in pipeline.stages:  # a stage that cannot be built fails now, before any work
        try:
            stage = spec.build()
            if hasattr(stage, "check_at_start"):  # files a stage reads only after the read step (eval sets)
                stage.check_at_start()
        except (ValueError, FileNotFoundError, OSError) as e:
            raise ConfigError(f"stage {spec.name!r} ({spec.type}): {e}") from e
    output.check_folder(out)
    prints = fingerprint.fingerprints([f["path"] for f in files])
    out.mkdir(parents=True, exist_ok=True)
    with OutputLock(out) as lock:
        run = steps.Run(pipeline, out, executor, progress)
        if lock.stale:
            run.say(f"curate: taking over the lock of a run that is gone ({lock.stale.get('pid')} on {lock.stale.get('host')})")
        changes, recorded = output.claim(out, pipeline, files, prints, allow_changed_inputs)
        for line in changes:
            run.say(f"curate: input changed, its tasks are redone: {line}")
        if output.other_code(out):
            print(f"curate: warning: {out} was started by other curate code (an upgrade or an edit): the tasks it "
                  "finished are kept as that code made them, and reading and stage rules change between versions, "
                  "so this folder may hold output of both; run into a new --output for output of this code alone",
                  file=sys.stderr, flush=True)  # always said
        output.remove_temp_files(out)
        run.say(f"curate: {pipeline.name}: {len(files)} input file(s), {len(pipeline.stages)} stage(s) -> {out}")
        skipped = matches.unusable
        if skipped:
            print(f"curate: warning: {len(skipped)} matched path(s) are not files and are not read: "  # always said
                  + ", ".join(skipped[:10]) + (f" and {len(skipped) - 10} more" if len(skipped) > 10 else ""),
                  file=sys.stderr, flush=True)
        repeated = matches.repeated
        if repeated:
            print(f"curate: warning: {len(repeated)} matched path(s) name a file already read and are not read "
                  "again: " + ", ".join(repeated[:10]) + (f" and {len(repeated) - 10} more" if len(repeated) > 10 else ""),
                  file=sys.stderr, flush=True)
        plan = steps.plan_steps(pipeline.stages)
        samples = {path: p.get(fingerprint.SAMPLE) for path, p in prints.items()}  # checked by each read task
        results = _run_steps(run, plan, files, recorded, samples)
        if not any(r.ran for r in results):  # a rerun of a finished run: say so before the funnel it prints again
            run.say(f"curate: nothing to do: {out} already holds this run's finished output (delete it, or give "
                    f"another --output, to run again)")
        records = [(r.step.stage_names, r.markers, {r.step.global_stage.name: r.plan_stats} if r.step.global_stage else {})
                   for r in results]
        stats, manifest = output.assemble(pipeline, records, results[-1].markers)
        write_json(stats, out / "stats.json")
        write_json(manifest, out / "manifest.json")
        steps.remove_plans(run, plan)
    return stats


def outside_output(files: list[dict], out: Path) -> list[dict]:
    """The inputs less any file inside the output folder (a glob such as ``data/**/*.arrow`` with the output
    under ``data/`` would otherwise read the run's own shards, and every rerun would see other inputs)."""
    root = os.path.realpath(out)
    inside = [f for f in files if os.path.realpath(f["path"]).startswith(root + os.sep)]
    if not inside:
        return files
    if len(inside) == len(files):
        raise ConfigError(f"every input file matched is inside the output folder {out}; a run never reads its own "
                          f"output: choose inputs outside it, or another --output")
    print(f"curate: warning: {len(inside)} matched file(s) inside the output folder {out} are not read "
          f"(e.g. {inside[0]['path']}); a run never reads its own output", file=sys.stderr, flush=True)
    return [f for f in files if f not in inside]


def _run_steps(run: steps.Run, plan: list[steps.Step], files: list[dict], prints: dict,
               samples: dict) -> list[steps.StepResult]:
    """Every step in order; a step's intermediate shards go once the step after it is done. When a task must be
    redone but its input shards were removed (changed inputs), the tasks that wrote them are redone first."""
    for _ in range(10 * len(plan) + 10):
        results: list[steps.StepResult] = []
        try:
            for i, step in enumerate(plan):
                prev = results[-1] if results else None
                results.append(steps.run_step(run, step, prev, final=i == len(plan) - 1, files=files, prints=prints,
                                              samples=samples))
                steps.remove_plans(run, [step])  # a finished step never reads its plan again
                if prev is not None:
                    steps.remove_intermediate(run, prev)
            return results
        except steps.MissingInputs as e:
            run.say(f"curate: {len(e.producers)} earlier task(s) are redone: the shards they wrote were removed")
            for marker in e.producers:
                steps.forget(marker, run.out)
    raise RuntimeError("curate: could not bring the steps up to date (tasks kept needing removed shards)")

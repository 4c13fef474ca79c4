"""`pretrain ablate SPEC.toml --output DIR`, the whole loop: check the spec, make the data (prepare.py), check
each variant for the evaluation items (contamination.py), train and evaluate every variant x seed (runs.py, or
ray_runs.py in parallel), then the statistics (stats.py), ``DIR/results.json`` and ``DIR/report.md``.

``DIR`` belongs to one spec: ``DIR/spec.json`` records it (with checksums of the files it names) and a rerun with
another spec stops at start. A rerun of the same spec continues where the last one stopped and writes the same
``results.json``: finished runs are read back, the run in progress resumes from its checkpoint.
"""
from __future__ import annotations

import dataclasses
import hashlib
import time
from pathlib import Path

from curate.config import ConfigError
from pretrain.ablate import contamination, prepare, report, runs, stats
from pretrain.ablate.spec import Spec

RESULTS = "results.json"


def load_tasks(spec: Spec, log=print) -> tuple[list, dict[str, list[dict]]]:
    """(task specs with absolute paths, {task name: its items}); an unreadable eval file is a ConfigError."""
    from pretrain.eval.tasks import EvalDataError, read_items, task_specs_from_tables

    specs = task_specs_from_tables(spec.tasks, f"{spec.source}: [[tasks]]")
    specs = [dataclasses.replace(t, path=str(Path(t.path).resolve())) for t in specs]
    names = [t.name for t in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"{spec.source}: two [[tasks]] are named {dupes[0]!r}: give each a distinct name")
    from curate.file_kind import file_name_key

    files: dict[str, str] = {}
    for n in names:  # DIR/curves/TASK_METRIC.png: one file on a case-insensitive file system (macOS, Windows)
        other = files.setdefault(file_name_key(n), n)
        if other != n:
            raise ConfigError(f"{spec.source}: [[tasks]] {other!r} and {n!r} differ only in case: their curves "
                              "(DIR/curves/TASK_METRIC.png) would be one file on macOS and Windows; rename one")
    items = {}
    for t in specs:
        try:
            got = read_items(t)
        except (EvalDataError, OSError) as e:
            raise ConfigError(f"{spec.source}: task {t.name!r}: {e}") from e
        items[t.name] = list(getattr(got, "items", got))
        if getattr(got, "skipped", 0):
            log(f"task {t.name}: {got.skipped} items of {t.path} set aside ({'; '.join(got.problems[:2])})")
    return specs, items


def task_tables(task_specs: list) -> list[dict]:
    return [{k: v for k, v in dataclasses.asdict(t).items() if v is not None} for t in task_specs]


def fingerprint(spec: Spec, task_specs: list) -> dict:
    """What decides an ablation's results: the spec and the content of every file it names."""
    files = [spec.config, *(spec.tokenizer and [spec.tokenizer] or []), *(t.path for t in task_specs),
             *(str(Path(f) / "manifest.json") for v in spec.variants for f in v.curated),
             *(v.blend for v in spec.variants if v.blend)]
    return {"spec": {k: v for k, v in dataclasses.asdict(spec).items() if k != "source"},
            "files": {f: _sha256(f) for f in files}}


def _sha256(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def claim(out: Path, fp: dict) -> None:
    """``DIR/spec.json``: written by the first run; a rerun must bring the same spec and files."""
    from curate.shards import read_record, write_json

    path = out / "spec.json"
    old = read_record(path)
    if old is None:
        write_json(fp, path)
        return
    if old != fp:
        changed = sorted({k for k in (*old["spec"], *fp["spec"]) if old["spec"].get(k) != fp["spec"].get(k)}
                         | {f for f in (*old["files"], *fp["files"]) if old["files"].get(f) != fp["files"].get(f)})
        raise ConfigError(f"{out} holds an ablation of another spec (changed: {', '.join(changed[:5])}): its runs "
                          "would not match; use another --output, or delete that folder to start again")


def contamination_of(spec: Spec, out: Path, items: dict, tokenizer: str, log) -> dict:
    """Cached in ``DIR/contamination.json`` (the spec, and so the data, is fixed for a DIR)."""
    from curate.shards import read_record, write_json

    path = out / "contamination.json"
    found = read_record(path)
    if found is None:
        found = contamination.check_variants(spec, items, tokenizer)
        write_json(found, path)
    for name, c in found.items():
        log(contamination.format_line(name, c))
    for line in contamination.warnings_for(found, spec.contamination_threshold):
        log(line)
    return found


def run_ablation(spec: Spec, out: Path, executor: str = "local", address: str | None = None,
                 ray_cpus: int | None = None, log=print, command_for=runs.command) -> dict:
    """The whole ablation; returns results.json's content."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    task_specs, items = load_tasks(spec, log)
    pool = None
    if executor == "ray":
        from pretrain.ablate.ray_runs import RayRuns

        pool = RayRuns(address, ray_cpus)
    try:
        records, plan, shape, found = _train_all(spec, out, task_specs, items, pool, log, command_for)
    finally:
        if pool is not None:
            pool.close()
    by_variant = {v.name: [records[(v.name, s)] for s in spec.seeds] for v in spec.variants}
    result = stats.results(spec.tokens, spec.seeds, spec.baseline, by_variant)
    result["tokens_per_run"] = shape.tokens
    result["contamination"] = found
    from curate.shards import write_json

    write_json(result, out / RESULTS)
    report.write_report(result, plan, out)
    return result


def _train_all(spec: Spec, out: Path, task_specs: list, items: dict, pool, log, command_for):
    """Checks, data, contamination and every run; -> (DONE records by (variant, seed), runs, shape, contamination)."""
    import torch

    shape = runs.shape_of(spec, pool.has_gpus() if pool is not None else torch.cuda.is_available())
    # every run's config as it will be written, checked before any data is made (its blend a stand-in)
    runs.plan_runs(spec, out, {}, spec.tokenizer or str(out / "tokenizer.model"), task_tables(task_specs), shape,
                   write=False)
    given = [v.blend for v in spec.variants if v.blend]  # token files made before: with the spec's tokenizer?
    if given:
        from curate.shards import sha256_file
        from pretrain.train import check_blend_tokenizer

        for blend in given:
            check_blend_tokenizer(blend, spec.tokenizer, sha256_file(spec.tokenizer), log)
    if pool is not None:
        pool.check_fits(shape)
        runs.check_index_memory(spec, shape, pool.largest_memory(), "the largest node of the Ray cluster")
    else:
        from curate.host_memory import available_bytes

        runs.check_local_devices(shape)
        runs.check_index_memory(spec, shape, available_bytes())
    claim(out, fingerprint(spec, task_specs))
    tokenizer = prepare.tokenizer_path(spec, out, log)
    blends = {v.name: prepare.prepare_variant(v, tokenizer, out, log) for v in spec.variants}
    found = contamination_of(spec, out, items, tokenizer, log)
    plan = runs.plan_runs(spec, out, blends, tokenizer, task_tables(task_specs), shape)
    log(f"{len(plan)} runs ({len(spec.variants)} variants x {len(spec.seeds)} seeds): {shape.steps} steps, "
        f"{shape.tokens:,} tokens each, {shape.nproc} process(es) per run; evaluation every {shape.eval_interval} "
        f"steps; runs in {out / 'runs'}")
    records = pool.run_all(plan, log, command_for) if pool is not None else run_local(plan, log, command_for)
    return records, plan, shape, found


def run_local(plan: list, log, command_for) -> dict:
    """The runs one after another in this machine; {(variant, seed): DONE record}."""
    records = {}
    for i, run in enumerate(plan, 1):
        t0 = time.monotonic()
        was_done = runs.done(run) is not None
        if not was_done:
            log(f"[{i}/{len(plan)}] {run.name}: training {run.steps} steps (log: {Path(run.dir) / 'train.log'})")
        records[(run.variant, run.seed)] = rec = runs.execute(run, command_for)
        log(progress_line(i, len(plan), run, rec, None if was_done else time.monotonic() - t0))
    return records


def progress_line(i: int, n: int, run, rec: dict, seconds: float | None) -> str:
    firsts = {}  # each task's first metric: bits_per_byte, acc
    for m, v in rec["metrics"].items():
        firsts.setdefault(m.split("/")[0], (m, v))
    shown = ", ".join(f"{m} {v:.4g}" for m, v in firsts.values())
    when = "done earlier" if seconds is None else f"{seconds:.0f} s"
    return f"[{i}/{n}] {run.name}: {rec['tokens']:,} tokens; {shown} ({when})"


def print_summary(result: dict, out: Path, log=print) -> None:
    log("")
    log(report.table(result))
    log(report.snr_line(result))
    log(f"{stats.RULE}")
    log(f"wrote {out / RESULTS} and {out / 'report.md'}")


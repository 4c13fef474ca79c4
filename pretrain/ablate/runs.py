"""One training run per variant x seed, each a `pretrain train` in its own folder ``DIR/runs/VARIANT/seed-S/``:

    config.toml     the spec's config with this run's data, tokenizer, seed, steps, evaluation and folders
    train.log       the trainer's output (appended to by a resumed run)
    checkpoints/    the trainer resumes from here when the run is started again
    logs/metrics.jsonl  training rows and one row per evaluation (``eval/TASK/METRIC``, ``tokens``)
    DONE.json       written atomically after the run ended with its last evaluation: the run's final metrics

A run with ``DONE.json`` is not run again; one without resumes from its newest checkpoint (the trainer's own
resume). Every run of a variant trains ``steps = tokens // (global_batch * seq_len)`` steps, so every variant
sees the same number of tokens; ``train.seed`` and ``model.init_seed`` are the seed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from curate import json_files
from curate.config import ConfigError
from pretrain.ablate.toml_out import dumps

DONE = "DONE.json"


class RunFailed(RuntimeError):
    """A training run exited with an error; the message names its log."""


@dataclass(frozen=True)
class Run:
    variant: str
    seed: int
    dir: str
    steps: int
    tokens: int  # tokens trained: steps * global_batch * seq_len
    nproc: int  # processes (torchrun --nproc-per-node when > 1)
    gpu: bool  # each process holds one GPU

    @property
    def name(self) -> str:
        return f"{self.variant} seed {self.seed}"

    @property
    def config_path(self) -> Path:
        return Path(self.dir) / "config.toml"


# --- the plan -------------------------------------------------------------------------------------------

# the keys of a run's config the ablation sets itself (run_config), and the spec key or option that controls each:
# an override of one of them would be replaced without a word, so the spec check refuses it (spec.py)
RUN_KEYS = {
    "train.steps": "the spec's `tokens` (steps = tokens // (train.global_batch x data.seq_len))",
    "train.seed": "the spec's `seeds`",
    "model.init_seed": "the spec's `seeds`",
    "data.kind": "the spec's [[variants]] (every run trains on its variant's blend)",
    "data.blend": "the spec's [[variants]] (`curated` and `weights`, or `blend`)",
    "data.tokenizer": "the spec's `tokenizer` (absent: one trained on the variants, of `vocab_size` pieces)",
    "data.cache_dir": "--output (each run's DIR/runs/VARIANT/seed-S/blend-cache)",
    "checkpoint.dir": "--output (each run's DIR/runs/VARIANT/seed-S/checkpoints)",
    "log.dir": "--output (each run's DIR/runs/VARIANT/seed-S/logs)",
    "eval.interval": "the spec's `eval_points` (eval.interval = steps // eval_points)",
    "eval.tasks": "the spec's [[tasks]]",
}


def base_config(spec) -> dict:
    """The spec's train config as TOML tables, with the spec's ``overrides`` applied, refused as `pretrain train`
    refuses a config (``pretrain.config.config_tables``: a top-level key that is not a table, an unknown table or
    key, a wrong type, an ablation or blend spec given as the config)."""
    from pretrain.config import config_tables

    try:
        return config_tables(spec.config, spec.overrides)
    except ConfigError as e:
        raise ConfigError(f"{spec.source}: the runs' config ({spec.config} with the spec's overrides): {e}") from None


def processes(cfg) -> int:
    """Processes one run needs for the config's layout: tp * pp * dp (dp 0 counts as 1)."""
    p = cfg.parallel
    return p.tp * p.pp * max(1, p.dp)


def steps_for(cfg, tokens: int) -> tuple[int, int]:
    """(steps, tokens trained): the most steps whose samples fit in ``tokens`` (batch ramp-up counted), the
    steps of one batch size at once (``tokens = 1e300`` looped for ever, a step at a time). A size below 1
    (seq_len, global_batch, the ramp's start or increment) is a ConfigError: it divided by zero or never ended."""
    from pretrain.config import batch_size_at, steps_at_batch

    seq, ramp = cfg.data.seq_len, cfg.train.rampup_batch_size
    if seq < 1 or cfg.train.global_batch < 1 or (ramp is not None and (len(ramp) != 3 or min(ramp[:2]) < 1)):
        raise ConfigError(f"data.seq_len = {seq}, train.global_batch = {cfg.train.global_batch}, "
                          f"train.rampup_batch_size = {ramp}: sizes must be at least 1 (the ramp: [start, "
                          "increment, samples])")
    budget = tokens // seq  # samples that fit
    steps = consumed = 0
    while True:
        gbs = batch_size_at(cfg, consumed)
        if consumed + gbs > budget:
            return steps, consumed * seq
        fit = (budget - consumed) // gbs
        same = steps_at_batch(cfg, consumed, gbs)
        n = fit if same is None else min(fit, same)
        steps, consumed = steps + n, consumed + n * gbs


def run_config(raw: dict, run: Run, blend: str, tokenizer: str, tasks: list[dict], eval_interval: int) -> dict:
    """The TOML tables of one run."""
    out = {table: dict(values) for table, values in raw.items()}  # tables only: base_config refused the rest
    d = Path(run.dir)
    out.setdefault("model", {})["init_seed"] = run.seed
    out.setdefault("train", {}).update(seed=run.seed, steps=run.steps)
    out.setdefault("data", {}).update(kind="blend", blend=blend, tokenizer=tokenizer,
                                      cache_dir=str(d / "blend-cache"))
    ckpt = out.setdefault("checkpoint", {})
    ckpt.update(dir=str(d / "checkpoints"), interval=ckpt.get("interval") or eval_interval)
    out.setdefault("log", {})["dir"] = str(d / "logs")
    out["eval"] = {**out.get("eval", {}), "interval": eval_interval, "tasks": tasks}
    return out


@dataclass(frozen=True)
class Shape:
    """What every run shares: steps, tokens trained, processes, one GPU per process or not, eval interval."""
    steps: int
    tokens: int
    nproc: int
    gpu: bool
    eval_interval: int
    seq_len: int = 0  # tokens per sample (tokens // seq_len: the samples of a run's blend)

    @property
    def samples(self) -> int:
        return self.tokens // self.seq_len if self.seq_len else 0


def shape_of(spec, have_cuda: bool) -> Shape:
    """The runs' shape from the spec's config, checked first as `pretrain train` checks it at start (before any
    data exists: the blend is a stand-in; the tokenizer's size is the spec's tokenizer's, else ``vocab_size``,
    the size of the one trained). ``have_cuda``: where the runs go has GPUs (train.device "auto" then takes one
    per process)."""
    from pretrain.config import check, check_vocab, finalize, from_dict

    raw = base_config(spec)
    cfg = from_dict(_checkable(raw, spec.tokenizer or "<tokenizer>"))
    cfg.data.kind, cfg.data.blend = "blend", "<blend>"
    nproc = processes(cfg)
    if spec.tokenizer:
        from pretrain.data.tokenizer import load_tokenizer

        pieces, name = load_tokenizer(spec.tokenizer).vocab_size, spec.tokenizer
    else:
        pieces, name = spec.vocab_size, f"the ablation trains (vocab_size = {spec.vocab_size})"
    try:
        check(cfg, nproc)
        check_vocab(cfg, name, pieces)
        cfg.model.vocab_size = cfg.model.vocab_size or pieces
        finalize(cfg, nproc)  # the padded vocabulary
    except ConfigError as e:
        raise ConfigError(f"{spec.source}: the runs' config ({spec.config} with the spec's overrides): {e}") from None
    steps, tokens = steps_for(cfg, spec.tokens)
    if steps < 1:
        raise ConfigError(f"tokens = {spec.tokens:,} is less than one step of {spec.config} (global_batch "
                          f"{cfg.train.global_batch} x seq_len {cfg.data.seq_len} = "
                          f"{cfg.train.global_batch * cfg.data.seq_len:,} tokens): raise tokens or lower "
                          "train.global_batch / data.seq_len")
    if steps >= 2 ** 63:  # a TOML integer, as train.steps is written into each run's config
        raise ConfigError(f"tokens = {spec.tokens:.3g} is {steps:.3g} steps of {spec.config}, more than a run "
                          "counts (2^63 - 1): a proxy run trains on millions to billions of tokens")
    gpu = cfg.train.device == "cuda" or (cfg.train.device == "auto" and have_cuda)
    return Shape(steps, tokens, nproc, gpu, max(1, steps // spec.eval_points), cfg.data.seq_len)


def check_index_memory(spec, shape: Shape, have: int | None, where: str = "this machine") -> None:
    """Before any data is made: the blend indices of a run's samples (``tokens // seq_len``) must fit in the memory
    ``have`` (bytes; None: unknown, not checked) where the runs go. The bound is the index rule of
    ``pretrain.data.gpt_dataset.check_index_fits`` at its least (:func:`pretrain.data.blend.least_index_bytes`:
    no documents, one epoch; the run's datasets share the samples and each is built in the same process), which the
    trainer applies after every variant is tokenized, blaming "samples" the spec does not have. The message names
    ``tokens`` and a value whose indices take at most half of ``have``."""
    from pretrain.data.blend import least_index_bytes, most_samples_within

    if have is None or not shape.seq_len:
        return
    need = least_index_bytes(shape.samples, shape.seq_len)
    if need <= have:
        return
    fit = _round_down(shape.seq_len * most_samples_within(have // 2, shape.seq_len))
    raise ConfigError(f"{spec.source}: tokens = {spec.tokens:,} is {shape.samples:,} samples of {shape.seq_len:,} "
                      f"tokens per run, whose blend indices need at least {need / 2 ** 30:,.1f} GiB, more than the "
                      f"{have / 2 ** 30:,.1f} GiB of memory available on {where}: lower tokens (e.g. tokens = "
                      f"{fit:.2g}; a proxy run trains on millions to billions of tokens)")


def _round_down(n: int) -> int:
    """``n`` rounded down to 2 significant digits (at least 1)."""
    if n < 100:
        return max(1, n)
    scale = 10 ** (len(str(n)) - 2)
    return n // scale * scale


def plan_runs(spec, out: Path, blends: dict[str, str], tokenizer: str, tasks: list[dict], shape: Shape,
              write: bool = True) -> list[Run]:
    """Every run of the ablation (variants in spec order, seeds within), its config checked and (``write``)
    written. A variant missing from ``blends`` gets a stand-in blend: ``write=False`` checks every run's config
    before its data is made."""
    from pretrain.config import check, from_dict

    raw = base_config(spec)
    runs = []
    for v in spec.variants:
        for seed in spec.seeds:
            run = Run(v.name, seed, str(out / "runs" / v.name / f"seed-{seed}"), shape.steps, shape.tokens,
                      shape.nproc, shape.gpu)
            tables = run_config(raw, run, blends.get(v.name, "<blend>"), tokenizer, tasks, shape.eval_interval)
            check(from_dict(tables), shape.nproc)
            if write:
                write_text(run.config_path, dumps(tables))
            runs.append(run)
    return runs


def _checkable(raw: dict, tokenizer: str) -> dict:
    tables = {t: dict(v) for t, v in raw.items()}  # tables only: base_config refused the rest
    tables.setdefault("data", {})["tokenizer"] = tokenizer
    return tables


def check_local_devices(run: Shape) -> None:
    """A run needs more devices than this machine has: fail before anything trains."""
    import torch

    if run.gpu:
        have, what = torch.cuda.device_count(), "GPUs"
    else:
        have, what = os.cpu_count() or 1, "CPU cores"
    if run.nproc > have:
        raise ConfigError(f"each run needs {run.nproc} processes (tp x pp x dp of the config) but this machine has "
                          f"{have} {what}: lower parallel.tp / pp / dp in the config (or `overrides`), or use "
                          "--executor ray on a cluster with larger nodes")


# --- one run --------------------------------------------------------------------------------------------

def done(run: Run) -> dict | None:
    """The run's DONE.json (its final metrics) when it finished, else None."""
    from curate.shards import read_record

    return read_record(Path(run.dir) / DONE)


def command(run: Run) -> list[str]:
    train = ["-m", "pretrain", "train", "--config", str(run.config_path)]
    if run.nproc == 1:
        return [sys.executable, *train]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(run.nproc), *train]


def execute(run: Run, command_for=command) -> dict:
    """Train (or resume, or skip) one run; returns its DONE record. ``command_for`` builds the trainer's
    command line (tests give a stand-in)."""
    record = done(run)
    if record is not None:
        return record
    d = Path(run.dir)
    argv = command_for(run)
    kill_leftovers(str(run.config_path))  # trainers of a killed ablation still writing this run's folders
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (_code_root(), os.environ.get("PYTHONPATH"))
                                                      if p))
    with open(d / "train.log", "ab") as logf:
        logf.write(f"\n# {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
        logf.flush()
        proc = subprocess.run(argv, stdout=logf, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
    if proc.returncode != 0:
        raise RunFailed(f"run {run.name} failed (exit code {proc.returncode}); its output: {d / 'train.log'}\n"
                        + tail(d / "train.log"))
    rows = eval_rows(d / "logs")
    last = rows[-1] if rows else {}
    if last.get("step") != run.steps:
        raise RunFailed(f"run {run.name} ended without an evaluation at its last step {run.steps} "
                        f"(last one: step {last.get('step')}); its output: {d / 'train.log'}")
    record = {"variant": run.variant, "seed": run.seed, "steps": run.steps, "tokens": run.tokens,
              "metrics": metrics_of(last)}
    from curate.shards import write_json

    write_json(record, d / DONE)
    return record


def metrics_of(row: dict) -> dict:
    """``{"TASK/METRIC": value}`` of an eval row's ``eval/TASK/METRIC`` keys."""
    return {k[len("eval/"):]: v for k, v in row.items() if k.startswith("eval/") and isinstance(v, (int, float))}


def eval_rows(log_dir: str | Path) -> list[dict]:
    """The eval rows of a run's metrics.jsonl, one per step (a resumed run's later row wins), by step; a
    half-written last line of a killed run is skipped."""
    path = Path(log_dir) / "metrics.jsonl"
    by_step: dict[int, dict] = {}
    if not path.is_file():
        return []
    with open(path) as f:
        for line in f:
            try:
                row = json_files.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int) and any(k.startswith("eval/") for k in row):
                by_step[row["step"]] = row
    return [by_step[s] for s in sorted(by_step)]


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join("  " + ln for ln in text[-lines:])


def write_text(path: Path, text: str) -> None:
    from curate.shards import atomic_path

    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)


def _code_root() -> str:
    """The folder holding the ``pretrain`` package this process runs, so the trainers run the same code."""
    return str(Path(__file__).resolve().parents[2])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """In the trainer's process, before exec: SIGKILL it when the ablation's process dies (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def kill_leftovers(config_path: str, wait: float = 30.0) -> list[int]:
    """Stop processes (a torchrun agent and its workers, which do not die with the ablation) still training
    with ``config_path``, which only this run uses; returns their pids."""
    proc = Path("/proc")
    if not proc.is_dir():
        return []
    found = []
    me = os.getpid()
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if config_path.encode() in argv and b"pretrain" in argv:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                found.append(int(entry.name))
            except OSError:
                pass
    deadline = time.monotonic() + wait
    while found and time.monotonic() < deadline and any(_alive(p) for p in found):
        time.sleep(0.1)
    return found


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (dead, waiting for its parent to read its status)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] != ["Z"]

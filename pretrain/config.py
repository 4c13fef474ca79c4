"""Training configuration: a TOML file with tables [model], [parallel], [train], [data], [checkpoint], [log];
any key can be overridden on the command line with ``--set table.key=value`` (the value is read as a TOML value,
else as a string). Unknown tables or keys and wrong types are rejected, naming them.

``check(cfg, world_size)`` validates a config before any process group exists, with messages that say what to
change; ``finalize`` fills the derived values (dp, ffn size, padded vocabulary, ...). Relative paths are taken
relative to the current directory.
"""
from __future__ import annotations

import dataclasses
import math
import os
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path

from curate.config import ConfigError, check_keys, coerce, load_toml  # noqa: F401 - ConfigError: pretrain's too
from curate.write_guard import blocking_file


@dataclass
class ModelConfig:
    vocab_size: int | None = None  # real vocabulary size; None: read from data.tokenizer
    hidden_size: int = 64  # width of the residual stream (h)
    num_layers: int = 4  # transformer blocks
    num_heads: int = 4  # attention heads (hidden_size / num_heads is the head dim)
    ffn_hidden_size: int | None = None  # None: 4h (gelu), 8h/3 rounded up to a multiple of 64 (swiglu)
    max_seq_len: int | None = None  # None: data.seq_len
    norm: str = "layernorm"  # layernorm | rmsnorm
    norm_eps: float = 1e-5  # epsilon of layernorm / rmsnorm
    position: str = "learned"  # learned | rope
    rope_theta: float = 10000.0  # RoPE base frequency (position = "rope")
    mlp: str = "gelu"  # gelu | swiglu
    bias: bool = True  # biases in the attention and MLP layers and LayerNorm (GPT-2 style); false: none (LLaMA style)
    tie_embeddings: bool = True  # the output head shares the input embedding's weights
    init_std: float = 0.02  # std of the normal init (Megatron: output layers scaled by 1/sqrt(2 * num_layers))
    init_seed: int | None = None  # None: train.seed
    make_vocab_size_divisible_by: int = 128  # vocabulary padded to a multiple of this times tp; 0: no padding
    padded_vocab_size: int | None = None  # derived (or taken from a checkpoint being resumed)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


MODEL_CHOICES = {"norm": ("layernorm", "rmsnorm"), "position": ("learned", "rope"), "mlp": ("gelu", "swiglu")}


@dataclass
class ParallelConfig:
    tp: int = 1  # tensor-parallel ranks (innermost: keep them inside one node)
    pp: int = 1  # pipeline-parallel stages
    vpp: int = 1  # virtual pipeline stages per pipeline rank (interleaved 1F1B when > 1)
    dp: int = 0  # 0: world_size // (tp * pp)
    sequence_parallel: bool = False  # norms run on sequence shards across the tp ranks (needs tp >= 2)
    pp_schedule: str = "auto"  # auto | 1f1b | interleaved_1f1b
    dp_mode: str = "fsdp"  # fsdp (FSDP2 fully_shard) | replicate (all-reduce, parameters replicated)
    fsdp_reshard_after_forward: bool | None = None  # None: true without pipeline parallelism, false with it
    fsdp_reduce_every_microbatch: bool = True  # false: sync on the last micro-batch only (full fp32 grads held)
    pp_balance: str = "flops"  # flops (embedding and head counted as layers' worth) | even
    timeout_s: float = 300.0  # seconds a rank waits for the others (joining, each collective) before it stops


@dataclass
class TrainConfig:
    steps: int = 100  # optimizer steps to train to (a resumed run trains on to this step)
    micro_batch: int = 1  # sequences per forward/backward on one rank
    global_batch: int = 8  # sequences per optimizer step over all dp ranks (a multiple of micro_batch * dp)
    seed: int = 1234  # the shuffle of the blend's samples and (without model.init_seed) the initialisation
    lr: float = 3e-4  # peak learning rate (AdamW), reached after warmup_steps
    min_lr: float = 3e-5  # cosine decay floor
    warmup_steps: int = 0  # linear warm-up from 0 to lr
    decay_steps: int | None = None  # None: steps (cosine from warmup_steps to decay_steps, then min_lr)
    weight_decay: float = 0.1  # AdamW decoupled weight decay (not on biases and norms)
    beta1: float = 0.9  # AdamW first-moment decay
    beta2: float = 0.95  # AdamW second-moment decay
    eps: float = 1e-8  # AdamW epsilon
    grad_clip: float = 1.0  # 0: off
    rampup_batch_size: list[int] | None = None  # [start, increment, samples], e.g. MT-NLG [32, 32, 5859375]
    eval_interval: int = 0  # 0: no evaluation
    eval_iters: int = 1  # global batches per evaluation
    precision: str = "auto"  # auto (bf16 on CUDA, fp32 on CPU) | fp32 | bf16
    recompute: str = "none"  # none | selective | full
    compile: bool | None = None  # None: on for CUDA, off on CPU (torch.compile per block, norm, head, loss)
    compile_backend: str = "inductor"  # torch.compile backend (e.g. aot_eager: no code generation)
    device: str = "auto"  # auto | cpu | cuda
    peak_tflops: float | None = None  # per device, for MFU; None: from the device name (see flops.py)


@dataclass
class DataConfig:
    kind: str = "blend"  # blend | synthetic
    blend: str | None = None  # a data_specs/*.toml blend spec
    tokenizer: str | None = None  # a sentencepiece .model, for the vocabulary size
    seq_len: int = 256  # tokens per training sequence
    cache_dir: str | None = None  # blend index cache (pretrain blend build --out); None: built in memory
    order: str = "stable"  # stable (the first N samples never depend on train.steps) | megatron (its arrays)


@dataclass
class CheckpointConfig:
    dir: str | None = None  # None: no checkpoints; a dir that holds one is resumed from
    interval: int = 0  # steps between checkpoints; 0: only at the end
    on_damage: str = "fallback"  # latest checkpoint damaged: fallback (newest intact one, with a message) | stop
    async_save: bool = False  # write in the background (DCP async_save) while training goes on; latest moves when done


@dataclass
class LogConfig:
    dir: str | None = None  # metrics.jsonl and TensorBoard events; None: stdout only
    interval: int = 1  # stdout line every N steps
    tensorboard: bool = True  # also write TensorBoard events to log.dir


@dataclass
class EvalConfig:
    interval: int = 0  # run eval.tasks every this many steps and at the last step; 0: at the last step only
    tasks: list[dict] = field(default_factory=list)  # [[eval.tasks]]: name, kind (bpb|cloze|choice), path, shots, stride, limit (see `pretrain eval --help`)
    batch_size: int | None = None  # sequences per evaluation forward on a rank; None (and under pipeline parallelism): train.micro_batch


@dataclass
class Config:
    model: ModelConfig = field(default_factory=ModelConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    data: DataConfig = field(default_factory=DataConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    log: LogConfig = field(default_factory=LogConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


TABLES = {f.name: f.type for f in dataclasses.fields(Config)}
TABLE_CLASSES = {"model": ModelConfig, "parallel": ParallelConfig, "train": TrainConfig, "data": DataConfig,
                  "checkpoint": CheckpointConfig, "log": LogConfig, "eval": EvalConfig}


def from_dict(raw: dict) -> Config:
    cfg = Config()
    for table, values in raw.items():
        if table not in TABLE_CLASSES:
            raise ConfigError(f"unknown table [{table}]; known: {', '.join(TABLE_CLASSES)}")
        if not isinstance(values, dict):
            raise ConfigError(f"[{table}] must be a table")
        section = getattr(cfg, table)
        hints = typing.get_type_hints(type(section))
        check_keys(values, hints, f"[{table}]", qualify=f"{table}.")
        for key, value in values.items():
            setattr(section, key, coerce(f"{table}.{key}", value, hints[key]))
    return cfg


def parse_override(text: str) -> tuple[str, str, object]:
    """``table.key=value`` -> (table, key, value); the value is parsed as TOML, else taken as a string."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError(f"--set {text!r}: expected table.key=value, e.g. --set parallel.tp=2")
    lhs, rhs = text.split("=", 1)
    table, key = lhs.strip().split(".", 1)
    if not table or not key:  # ".x=1" said "unknown table []"
        raise ConfigError(f"--set {text!r}: expected table.key=value, e.g. --set parallel.tp=2")
    if not rhs.strip():  # `--set checkpoint.dir=$CKPT` with CKPT unset turned checkpoints off, silently
        raise ConfigError(f"--set {text!r}: no value after '=' (an unset shell variable?); give one, or write "
                          f"'' for an empty string where a key takes one (an empty checkpoint.dir or log.dir "
                          f"turns that output off)")
    try:
        value = tomllib.loads(f"v = {rhs.strip()}")["v"]
    except (tomllib.TOMLDecodeError, RecursionError):  # not TOML (or nested too deep): the text itself
        value = rhs.strip()
    return table, key, value


# top-level keys of the other TOML files Quarry reads, for a config file that is one of them (`pretrain ablate`'s
# spec naming itself as its `config` trained on default settings): (keys, what the file is, what to give instead)
OTHER_FILES = (
    ({"variants", "baseline", "seeds"}, "an ablation spec (`pretrain ablate SPEC.toml`)",
     "a train config, e.g. pretrain/configs/proxy-tiny.toml"),
    ({"datasets"}, "a blend spec", "a train config; a blend spec goes in its [data] table as blend = \"SPEC.toml\""),
)


def config_tables(path: str | Path | None, overrides: list[str] | None = None) -> dict:
    """The config file's tables with ``overrides`` (``table.key=value``) applied, refused as `pretrain train`
    refuses them (:func:`from_dict`: a top-level key that is not a known table, an unknown key, a wrong type;
    a file that is an ablation or blend spec is named as such). `pretrain ablate` reads its runs' config here."""
    raw = _tables(path, overrides)
    from_dict(raw)
    return raw


def _tables(path, overrides) -> dict:
    raw: dict = {}
    if path is not None:
        raw = load_toml(path, what="config file", hint=" (see pretrain/configs/ for examples)")
        if not any(k in TABLE_CLASSES for k in raw):
            for keys, what, instead in OTHER_FILES:
                if keys & set(raw):
                    has = ", ".join(sorted(keys & set(raw)))
                    raise ConfigError(f"config file {str(path)!r} is {what} (it has {has}), not a train config: "
                                      f"give {instead}")
    for text in overrides or []:
        table, key, value = parse_override(text)
        if not isinstance(raw.setdefault(table, {}), dict):  # `hidden = 5` and --set hidden.x=1: a TypeError
            from_dict(raw)  # names it: an unknown table, or [model] must be a table
        raw[table][key] = value
    return raw


def load_config(path: str | Path | None, overrides: list[str] | None = None) -> Config:
    return from_dict(_tables(path, overrides))


def batch_size_at(cfg: Config, consumed_samples: int) -> int:
    """Global batch size after ``consumed_samples`` (Megatron's --rampup-batch-size start incr samples):
    start, start + incr, ... up to train.global_batch, each stage lasting samples / #increments samples."""
    t = cfg.train
    if not t.rampup_batch_size:
        return t.global_batch
    start, incr, ramp_samples = t.rampup_batch_size
    n_incr = (t.global_batch - start) // incr
    if n_incr <= 0 or consumed_samples >= ramp_samples:
        return t.global_batch
    per_incr = ramp_samples / n_incr
    return min(t.global_batch, start + int(consumed_samples // per_incr) * incr)


def steps_at_batch(cfg: Config, consumed_samples: int, batch: int) -> int | None:
    """Steps that surely keep the batch size ``batch`` (``batch_size_at(cfg, consumed_samples)``) from
    ``consumed_samples`` on: None past the ramp (it stays), else the steps before the ramp's next stage could
    begin, less one (its float bound: callers take that step by step), at least 1. Counting a batch size's steps
    at once, never a step at a time: a ramp over 10^15 samples kept `pretrain train` from starting."""
    t = cfg.train
    if batch == t.global_batch:
        return None
    start, incr, ramp = t.rampup_batch_size
    per_incr = ramp / ((t.global_batch - start) // incr)
    boundary = (int(consumed_samples // per_incr) + 1) * per_incr
    return max(1, math.ceil((boundary - consumed_samples) / batch) - 1)


SEED_LIMIT = 2 ** 32  # numpy's and the blend's seeds are 32-bit: train.seed, --seed of blend and tokenizer


def total_train_samples(cfg: Config, step: int = 0, consumed: int = 0) -> int:
    """Samples the run has consumed after ``train.steps`` steps (the ramp's batch sizes, then
    ``train.global_batch``), from ``step`` with ``consumed`` samples consumed (a resumed run)."""
    while step < cfg.train.steps:
        batch = batch_size_at(cfg, consumed)
        same = steps_at_batch(cfg, consumed, batch)
        n = cfg.train.steps - step if same is None else min(cfg.train.steps - step, same)
        step, consumed = step + n, consumed + n * batch
    return consumed


def padded_vocab(vocab_size: int, multiple: int, tp: int) -> int:
    """``vocab_size`` rounded up to a multiple of ``multiple * tp`` (Megatron); ``multiple = 0``: unpadded."""
    if multiple <= 0:
        return vocab_size
    m = multiple * tp
    return int(math.ceil(vocab_size / m) * m)


def check(cfg: Config, world_size: int) -> None:
    """Raise ConfigError listing every problem of ``cfg`` for ``world_size`` processes, each with what to change."""
    m, p, t, d = cfg.model, cfg.parallel, cfg.train, cfg.data
    errors: list[str] = []

    def err(msg):
        errors.append(msg)

    for name, value in (("parallel.tp", p.tp), ("parallel.pp", p.pp), ("parallel.vpp", p.vpp),
                        ("train.micro_batch", t.micro_batch), ("train.global_batch", t.global_batch),
                        ("model.num_layers", m.num_layers), ("model.num_heads", m.num_heads),
                        ("model.hidden_size", m.hidden_size), ("data.seq_len", d.seq_len)):
        if value < 1:
            err(f"{name} = {value}: must be at least 1")
    if errors:
        raise ConfigError("invalid config:\n  - " + "\n  - ".join(errors))
    dp = _check_layout(cfg, world_size, err)
    _check_batches(cfg, dp, err)
    _check_choices(cfg, err)
    _check_values(cfg, err)
    _check_eval(cfg, err)
    _check_folders(cfg, err)
    if errors:
        raise ConfigError("invalid config:\n  - " + "\n  - ".join(errors))


def _check_folders(cfg: Config, err) -> None:
    """The folders a run writes into: each is a folder or can be made one (not a file, a device, or below one:
    mkdir raised FileExistsError / NotADirectoryError after the run had started)."""
    for name, value in (("checkpoint.dir", cfg.checkpoint.dir), ("log.dir", cfg.log.dir),
                        ("data.cache_dir", cfg.data.cache_dir)):
        if not value:
            continue
        above = blocking_file(value)
        if above:
            what = "is" if above == os.path.abspath(value) else f"is below {above}, which is"
            err(f"{name} = {value!r} {what} not a folder: give a folder (it is made if missing)")
    if cfg.log.dir:  # appended to: a named pipe there blocked the run before its first step, silently
        from curate.file_kind import file_problem

        metrics = os.path.join(cfg.log.dir, "metrics.jsonl")
        problem = file_problem(metrics) if os.path.lexists(metrics) else None
        if problem:
            err(f"log.dir = {cfg.log.dir!r}: its metrics.jsonl {problem}: remove it, or give another log.dir")


def _check_eval(cfg: Config, err) -> None:
    """[eval]: the tasks' tables and files (read before training starts, not at the first evaluation)."""
    e = cfg.eval
    if e.interval < 0:
        err(f"eval.interval = {e.interval}: must be >= 0 (0: evaluate at the last step only)")
    if e.batch_size is not None and e.batch_size < 1:
        err(f"eval.batch_size = {e.batch_size}: must be at least 1 (or unset: train.micro_batch)")
    if not e.tasks:
        return
    from pretrain.eval.tasks import task_specs_from_tables

    from pretrain.eval.requests import stride_problem

    try:
        specs = task_specs_from_tables(e.tasks, "[[eval.tasks]]")
    except ConfigError as ex:
        err(str(ex))
        specs = []
    window = cfg.model.max_seq_len or cfg.data.seq_len  # the model's window, as the tasks are prepared with
    for spec in specs:  # a bpb stride past the window: said now, not when the tasks are read before step 1
        why = stride_problem(spec.stride, window) if spec.kind == "bpb" else None
        if why:
            err(f"[[eval.tasks]] {spec.name!r}: {why}")
    if not cfg.data.tokenizer:
        err("[[eval.tasks]] needs data.tokenizer (the tasks' text is tokenized with it)")
    if cfg.parallel.pp > 1 and cfg.model.max_seq_len not in (None, cfg.data.seq_len):
        err(f"[[eval.tasks]] with parallel.pp > 1 needs model.max_seq_len = data.seq_len (the pipeline's shapes)")


def _check_layout(cfg: Config, world_size: int, err) -> int:
    """The parallel layout against the world size and the model's shapes; returns dp."""
    m, p, d = cfg.model, cfg.parallel, cfg.data
    mp = p.tp * p.pp
    dp = p.dp
    if world_size % mp:
        err(f"world size {world_size} is not divisible by tp * pp = {p.tp} * {p.pp} = {mp}: "
            f"launch a multiple of {mp} processes (torchrun --nproc-per-node) or change parallel.tp / parallel.pp")
    elif dp and dp * mp != world_size:
        err(f"parallel.dp = {dp} but world size {world_size} / (tp * pp = {mp}) = {world_size // mp}: "
            f"set parallel.dp = {world_size // mp} (or 0 to derive it), or launch {dp * mp} processes")
    dp = dp or max(1, world_size // mp)
    if m.num_heads % p.tp:
        err(f"model.num_heads = {m.num_heads} is not divisible by parallel.tp = {p.tp}: "
            f"choose tp among the divisors of {m.num_heads} or change num_heads")
    if m.hidden_size % m.num_heads:
        err(f"model.hidden_size = {m.hidden_size} is not divisible by model.num_heads = {m.num_heads}")
    elif m.position == "rope" and m.head_dim % 2:
        err(f"RoPE needs an even head dim; hidden_size / num_heads = {m.head_dim}")
    if m.ffn_hidden_size is not None and m.ffn_hidden_size % p.tp:
        err(f"model.ffn_hidden_size = {m.ffn_hidden_size} is not divisible by parallel.tp = {p.tp}")
    if m.vocab_size is not None:
        vocab = padded_vocab(m.vocab_size, m.make_vocab_size_divisible_by, p.tp)
        if m.padded_vocab_size is not None:
            vocab = m.padded_vocab_size
        if vocab % p.tp:
            err(f"vocabulary {vocab} is not divisible by parallel.tp = {p.tp}: set "
                f"model.make_vocab_size_divisible_by = 128 (the vocabulary is then padded to a multiple of 128 x tp)")
    stages = p.pp * p.vpp
    if m.num_layers % stages:
        err(f"model.num_layers = {m.num_layers} is not divisible by pp * vpp = {p.pp} * {p.vpp} = {stages}: "
            f"use a number of layers that is a multiple of {stages} or change parallel.pp / parallel.vpp")
    if p.vpp > 1 and p.pp == 1:
        err(f"parallel.vpp = {p.vpp} needs pipeline parallelism: set parallel.pp >= 2 or parallel.vpp = 1")
    if p.pp_schedule not in ("auto", "1f1b", "interleaved_1f1b"):
        err(f"parallel.pp_schedule = {p.pp_schedule!r}: use auto, 1f1b or interleaved_1f1b")
    elif p.pp_schedule == "1f1b" and p.vpp > 1:
        err(f"parallel.pp_schedule = '1f1b' runs one stage per rank but parallel.vpp = {p.vpp}: "
            f"use interleaved_1f1b (or auto), or set vpp = 1")
    if p.sequence_parallel and p.tp == 1:
        err("parallel.sequence_parallel = true needs tensor parallelism: set parallel.tp >= 2 "
            "or sequence_parallel = false")
    if p.sequence_parallel and d.seq_len % p.tp:
        err(f"data.seq_len = {d.seq_len} is not divisible by parallel.tp = {p.tp} (sequence parallelism "
            f"shards the sequence): use a multiple of {p.tp}")
    if p.dp_mode not in ("fsdp", "replicate"):
        err(f"parallel.dp_mode = {p.dp_mode!r}: use fsdp or replicate")
    return dp


def _check_batches(cfg: Config, dp: int, err) -> None:
    """Global batch, micro-batches and batch ramp-up against dp and the pipeline."""
    p, t = cfg.parallel, cfg.train
    unit = t.micro_batch * dp
    if t.global_batch % unit:
        err(f"train.global_batch = {t.global_batch} is not divisible by micro_batch * dp = {t.micro_batch} * "
            f"{dp} = {unit}: use a multiple of {unit} or change train.micro_batch")
    if t.rampup_batch_size is not None:
        if len(t.rampup_batch_size) != 3:
            err("train.rampup_batch_size must be [start, increment, samples], e.g. [32, 32, 1000000]")
        else:
            start, incr, _ = t.rampup_batch_size
            if start < 1 or incr < 1:
                err("train.rampup_batch_size start and increment must be at least 1")
            elif start % unit or incr % unit:
                err(f"train.rampup_batch_size start {start} and increment {incr} must be multiples of "
                    f"micro_batch * dp = {unit}")
            elif start > t.global_batch or (t.global_batch - start) % incr:
                err(f"train.rampup_batch_size: global_batch {t.global_batch} must be start {start} plus a "
                    f"whole number of increments {incr}")
            elif p.pp > 1 and start // unit < p.pp:
                err(f"train.rampup_batch_size starts at {start} samples = {start // unit} micro-batches, fewer than "
                    f"pp = {p.pp}: start at {p.pp * unit} or more")
    num_micro = t.global_batch // max(1, unit)
    if p.pp > 1 and num_micro < p.pp:
        err(f"{num_micro} micro-batches per step for pp = {p.pp}: the pipeline needs at least pp micro-batches; "
            f"raise train.global_batch or lower train.micro_batch")
    if p.vpp > 1 and num_micro % p.pp:
        err(f"interleaved 1F1B needs the number of micro-batches per step ({num_micro}) to be a multiple of "
            f"pp = {p.pp}: change train.global_batch or train.micro_batch")


def _check_choices(cfg: Config, err) -> None:
    """Keys with a fixed set of values, and settings that need another one."""
    m, p, t, d = cfg.model, cfg.parallel, cfg.train, cfg.data
    if m.max_seq_len is not None and m.max_seq_len < d.seq_len:
        err(f"model.max_seq_len = {m.max_seq_len} is shorter than data.seq_len = {d.seq_len}")
    for name, value, allowed in (*((f"model.{k}", getattr(m, k), v) for k, v in MODEL_CHOICES.items()),
                                 ("train.precision", t.precision, ("auto", "fp32", "bf16")),
                                 ("train.recompute", t.recompute, ("none", "selective", "full")),
                                 ("parallel.pp_balance", p.pp_balance, ("flops", "even")),
                                 ("train.device", t.device, ("auto", "cpu", "cuda")),
                                 ("data.kind", d.kind, ("blend", "synthetic"))):
        if value not in allowed:
            err(f"{name} = {value!r}: use one of {', '.join(allowed)}")
    if d.kind == "blend" and not d.blend:
        err("data.blend is not set: point it at a data_specs/*.toml blend spec (or set data.kind = 'synthetic')")
    if d.kind == "blend" and d.seq_len == 1:  # was a ValueError of the blend's builder, after the checks
        err("data.seq_len = 1: a blend's samples need at least 2 tokens (inputs and next-token labels); use 2 or more")
    if m.vocab_size is None and not d.tokenizer:
        err("model.vocab_size is not set and there is no data.tokenizer to read it from: set one of them")
    if t.steps < 0:
        err(f"train.steps = {t.steps}: must be >= 0")
    if t.eval_interval and t.eval_iters < 1:
        err("train.eval_iters must be >= 1 when train.eval_interval > 0")


MAX_LR = 3.4028234663852886e38  # the largest float32: the optimizer's state cannot hold a larger rate


def _compile_backends() -> list[str]:
    """torch.compile's backends in this torch (what ``torch.compile(backend=...)`` accepts by name)."""
    import torch._dynamo

    return sorted(set(torch._dynamo.list_backends(exclude_tags=())))


def _check_values(cfg: Config, err) -> None:
    """Values that make no sense whatever the layout: negative or non-finite rates, betas outside [0, 1), ..."""
    m, t, d, c, lg = cfg.model, cfg.train, cfg.data, cfg.checkpoint, cfg.log

    def finite(name, value):
        if value is not None and not math.isfinite(value):
            err(f"{name} = {value}: must be a finite number")
            return False
        return value is not None

    for name, value in (("train.lr", t.lr), ("train.min_lr", t.min_lr), ("train.grad_clip", t.grad_clip),
                        ("train.weight_decay", t.weight_decay)):
        if finite(name, value) and value < 0:
            err(f"{name} = {value}: must be >= 0" + (" (0 turns clipping off)" if name == "train.grad_clip" else ""))
    for name, value in (("train.lr", t.lr), ("train.min_lr", t.min_lr)):
        if math.isfinite(value) and value > MAX_LR:  # 1e300 failed inside Adam (no float32 holds it)
            err(f"{name} = {value}: above the largest float32 ({MAX_LR:.4g}), which the optimizer computes in; "
                f"learning rates of GPT pretraining are about 1e-4 to 1e-2")
    # (listing the backends imports torch._dynamo, about 2 s: only for a backend other than the default)
    if t.compile is not False and t.compile_backend != "inductor" and t.compile_backend not in _compile_backends():
        err(f"train.compile_backend = {t.compile_backend!r}: not a torch.compile backend of this torch; use one of "
            f"{', '.join(_compile_backends())}")
    if math.isfinite(t.lr) and math.isfinite(t.min_lr) and t.min_lr > t.lr >= 0:
        err(f"train.min_lr = {t.min_lr} is above train.lr = {t.lr}: the cosine decay would raise the rate; "
            f"set min_lr <= lr")
    for name, value in (("train.beta1", t.beta1), ("train.beta2", t.beta2)):
        if finite(name, value) and not 0 <= value < 1:
            err(f"{name} = {value}: must be in [0, 1) (e.g. beta1 = 0.9, beta2 = 0.95)")
    if finite("train.eps", t.eps) and t.eps <= 0:
        err(f"train.eps = {t.eps}: must be > 0 (e.g. 1e-8)")
    for name, value in (("train.seed", t.seed), ("model.init_seed", m.init_seed)):
        if value is not None and not 0 <= value < SEED_LIMIT:
            err(f"{name} = {value}: must be in [0, 2**32 - 1]")
    for name, value in (("train.warmup_steps", t.warmup_steps), ("train.eval_interval", t.eval_interval),
                        ("checkpoint.interval", c.interval)):
        if value < 0:
            err(f"{name} = {value}: must be >= 0")
    if t.decay_steps is not None and t.decay_steps < 0:
        err(f"train.decay_steps = {t.decay_steps}: must be >= 0 (or unset: train.steps)")
    elif t.decay_steps is not None and t.decay_steps < t.warmup_steps:
        err(f"train.decay_steps = {t.decay_steps} is shorter than train.warmup_steps = {t.warmup_steps}")
    if finite("model.init_std", m.init_std) and m.init_std <= 0:
        err(f"model.init_std = {m.init_std}: must be > 0 (e.g. 0.02)")
    if finite("model.norm_eps", m.norm_eps) and not 0 < m.norm_eps < 1:  # 1e308 trained a model of constant output
        err(f"model.norm_eps = {m.norm_eps}: must be > 0 and below 1 (e.g. 1e-5)")
    if finite("model.rope_theta", m.rope_theta) and m.rope_theta <= 0:
        err(f"model.rope_theta = {m.rope_theta}: must be > 0 (e.g. 10000)")
    if m.ffn_hidden_size is not None and m.ffn_hidden_size < 1:
        err(f"model.ffn_hidden_size = {m.ffn_hidden_size}: must be at least 1 (or unset: 4 * hidden_size for gelu, "
            f"about 8/3 * hidden_size for swiglu)")
    if m.vocab_size is not None and m.vocab_size < 1:
        err(f"model.vocab_size = {m.vocab_size}: must be at least 1")
    if m.make_vocab_size_divisible_by < 0:
        err(f"model.make_vocab_size_divisible_by = {m.make_vocab_size_divisible_by}: must be >= 0 (0: no padding)")
    if t.peak_tflops is not None and finite("train.peak_tflops", t.peak_tflops) and t.peak_tflops <= 0:
        err(f"train.peak_tflops = {t.peak_tflops}: must be > 0 (or unset: from the device name)")
    if lg.interval < 1:
        err(f"log.interval = {lg.interval}: must be at least 1")
    if d.order not in ("stable", "megatron"):
        err(f"data.order = {d.order!r}: use stable (extending train.steps keeps the order) or megatron")
    if finite("parallel.timeout_s", cfg.parallel.timeout_s) and cfg.parallel.timeout_s <= 0:
        err(f"parallel.timeout_s = {cfg.parallel.timeout_s}: must be > 0 (seconds, e.g. 300)")
    if c.on_damage not in ("fallback", "stop"):
        err(f"checkpoint.on_damage = {c.on_damage!r}: use fallback (resume from the newest intact checkpoint) "
            f"or stop")


def check_vocab(cfg: Config, tokenizer: str, pieces: int) -> None:
    """``model.vocab_size``, when set, holds every id of ``tokenizer`` (``pieces`` of them); a smaller one failed
    at the first batch (or the first evaluation), after the data was built."""
    m = cfg.model
    if m.vocab_size is not None and m.vocab_size < pieces:
        raise ConfigError(f"model.vocab_size = {m.vocab_size} is smaller than the {pieces} pieces of the tokenizer "
                          f"{tokenizer}: set model.vocab_size = {pieces} (or more), or leave it unset to take the "
                          "tokenizer's")


def finalize(cfg: Config, world_size: int) -> Config:
    """Fill derived values in place (after ``check``): parallel.dp, model.max_seq_len, ffn size, init seed,
    vocabulary size (from the tokenizer if needed) and padded vocabulary size."""
    m, p = cfg.model, cfg.parallel
    p.dp = p.dp or world_size // (p.tp * p.pp)
    if p.pp_schedule == "auto":
        p.pp_schedule = "interleaved_1f1b" if p.vpp > 1 else "1f1b"
    if p.fsdp_reshard_after_forward is None:
        p.fsdp_reshard_after_forward = p.pp == 1
    if m.max_seq_len is None:
        m.max_seq_len = cfg.data.seq_len
    if m.ffn_hidden_size is None:
        m.ffn_hidden_size = 4 * m.hidden_size if m.mlp == "gelu" else 64 * math.ceil(8 * m.hidden_size / 3 / 64)
        m.ffn_hidden_size = p.tp * math.ceil(m.ffn_hidden_size / p.tp)
    if m.init_seed is None:
        m.init_seed = cfg.train.seed
    if m.vocab_size is None:
        from pretrain.data.tokenizer import load_tokenizer

        try:
            m.vocab_size = int(load_tokenizer(cfg.data.tokenizer).vocab_size)
        except (ValueError, OSError) as e:  # not a SentencePiece model, a folder, ...: say so, no traceback
            raise ConfigError(f"data.tokenizer = {cfg.data.tokenizer!r}: {e}") from None
    if m.padded_vocab_size is None:
        m.padded_vocab_size = padded_vocab(m.vocab_size, m.make_vocab_size_divisible_by, p.tp)
    if m.padded_vocab_size % p.tp or m.padded_vocab_size < m.vocab_size:
        raise ConfigError(f"padded vocabulary {m.padded_vocab_size} (model.padded_vocab_size, or the checkpoint's) "
                          f"does not fit tp = {p.tp} and vocab_size {m.vocab_size}: unset model.padded_vocab_size")
    return cfg


def model_config_from_dict(d: dict) -> ModelConfig:
    """A ``ModelConfig`` from a saved dict (unknown keys ignored); each value must have its field's type."""
    hints = typing.get_type_hints(ModelConfig)
    return ModelConfig(**{k: coerce(f"model.{k}", v, hints[k]) for k, v in d.items() if k in hints})

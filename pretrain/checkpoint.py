"""Checkpoints through ``torch.distributed.checkpoint`` (DCP), loadable at any tp/pp/dp layout.

Layout of ``checkpoint.dir``::

    latest                       name of the newest complete checkpoint ("step_00000100"), replaced atomically
                                 by rank 0 only after every rank finished writing it
    step_00000100/
        dcp/                     DCP shards (.distcp) + .metadata: {"model": ..., "optim": ...} keyed by parameter
                                 name (see pretrain/model.py), DTensor-sharded, resharded on load
        model_config.json        the [model] table incl. padded_vocab_size: enough to rebuild the model
        meta.json                step, consumed_samples, lr scheduler state, layout, the run's whole config
        rng/rank_00000.json      per-rank python / numpy / torch (/ cuda) RNG states (JSON: nothing to unpickle)
        manifest.json            size and SHA-256 of every file above (pretrain/checkpoint_manifest.py)

Optimizer state is saved flattened by parameter name (``state.<name>.exp_avg``...), so it reshards too. The
output head's copy of the tied embedding is saved under both names (``embed.weight`` and ``lm_head.weight``) so
that a pipeline's first and last stages both find it.

``load_model_for_inference(dir)`` rebuilds the whole model in one process (tp = pp = 1) from any checkpoint.

Safety: nothing read from a checkpoint runs code. DCP's pickled ``.metadata`` and its non-tensor entries go through
the restricted loaders of :mod:`pretrain.safe_load`; tensors through ``torch.load(weights_only=True)``; everything
else is JSON. Integrity: ``save`` refuses a model with non-finite weights (``latest`` never moves onto it) and
writes ``manifest.json`` before ``latest`` moves; ``find_resume`` verifies the checkpoint ``latest`` names and,
when it is damaged, names the damage and resumes from the newest intact older one (``checkpoint.on_damage =
"fallback"``, the default) or stops (``"stop"``). Loaded weights that are not finite are refused with a message.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import sys
import shutil
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from pretrain import checkpoint_manifest as manifest
from pretrain.config import MODEL_CHOICES, ConfigError, ModelConfig, model_config_from_dict
from pretrain.safe_load import (
    SafeFileSystemReader, SafeLoadPlanner, UnsafeCheckpointError, read_dcp_metadata, weights_only_reason,
)

LATEST = "latest"
_OPTIM_OPTS = StateDictOptions(flatten_optimizer_state_dict=True)


class CheckpointError(ConfigError):
    """A checkpoint that cannot be used (damaged, tampered with, non-finite): the message says which and why.
    A ConfigError, so ``pretrain train`` prints it without a traceback."""


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():  # one process without a process group is a supported DCP mode
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def _dcp_save(state, path: Path) -> None:
    with _quiet():
        dcp.save(state, checkpoint_id=str(path))


def _dcp_load(state, path: Path) -> None:
    """``dcp.load`` through the restricted reader and planner; any failure -> CheckpointError naming ``path``."""
    path = Path(path)
    planner = SafeLoadPlanner()
    try:
        read_dcp_metadata(path / ".metadata")  # a refused .metadata is named before DCP starts
        with _quiet():
            dcp.load(state, storage_reader=SafeFileSystemReader(str(path)), planner=planner)
    except UnsafeCheckpointError as e:
        raise CheckpointError(str(e)) from None
    except (Exception, CheckpointException) as e:  # DCP's CheckpointException is a BaseException
        text = str(e)
        if planner.refused:
            why = f"refused to unpickle {planner.refused} (nothing in it was run)"
        elif "Weights only load failed" in text:
            why = f"refused to unpickle a tensor record: {weights_only_reason(e)} (nothing in it was run)"
        else:
            lines = text.strip().splitlines()
            why = f"{type(e).__name__}: {lines[-1] if lines else ''}"
        raise CheckpointError(f"could not load the checkpoint in {path}: {why}; the file was damaged or tampered "
                              f"with") from None


def step_dir(root: str | Path, step: int) -> Path:
    return Path(root) / f"step_{step:08d}"


def resolve(path: str | Path) -> Path | None:
    """A checkpoint root (with ``latest``) or a step directory -> the step directory, None if there is none;
    FileNotFoundError if ``latest`` names an incomplete one (never silently start over). Does not verify
    checksums: see :func:`find_resume` and :func:`find_intact`."""
    path = Path(path)
    if (path / "dcp" / ".metadata").exists():
        return path
    latest = path / LATEST
    if latest.exists():
        d = path / latest.read_text().strip()
        if not (d / "dcp" / ".metadata").exists():
            raise FileNotFoundError(f"{latest} names {d.name}, which is not a complete checkpoint (no dcp/.metadata): "
                                    f"restore it, or point {LATEST} at another step_* directory")
        return d
    return None


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _tied_alias(part) -> tuple[str, str] | None:
    """(name held, other name) when this part holds the tied weight under one name only."""
    cfg = part.config
    if not cfg.tie_embeddings:
        return None
    if part.embed is not None and part.lm_head is not None:
        return None  # both names are in part.state_dict() already
    if part.embed is not None:
        return "embed.weight", "lm_head.weight"
    if part.lm_head is not None:
        return "lm_head.weight", "embed.weight"
    return None


def model_state(parts) -> dict:
    out = {}
    for part in parts:
        sd = get_model_state_dict(part)
        alias = _tied_alias(part)
        if alias:
            sd[alias[1]] = sd[alias[0]]
        elif part.config.tie_embeddings and "embed.weight" in sd and "lm_head.weight" not in sd:
            sd["lm_head.weight"] = sd["embed.weight"]
        out.update(sd)
    return out


def _optim_aliases(part, osd: dict) -> None:
    """Give the tied weight's optimizer entries both names."""
    names = ("embed.weight", "lm_head.weight")
    if not part.config.tie_embeddings:
        return
    for key in list(osd):
        for a, b in (names, names[::-1]):
            for prefix in ("state.", "param_groups."):
                if key.startswith(prefix + a + "."):
                    other = prefix + b + key[len(prefix + a):]
                    osd.setdefault(other, osd[key])


def optim_state(parts, optimizers) -> tuple[list[dict], dict]:
    """(per-part flattened optimizer state dicts, their union with the tied weight's entries under both names)."""
    own, merged = [], {}
    for part, opt in zip(parts, optimizers):
        osd = get_optimizer_state_dict(part, opt, options=_OPTIM_OPTS)
        own.append(osd)
        merged.update(osd)
        _optim_aliases(part, merged)
    return own, merged


def _bytes_b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.cpu().numpy().tobytes()).decode()


def _b64_bytes(text: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.uint8)


def rng_state_json() -> dict:
    """This process's python / numpy / torch (/ cuda) RNG states as plain JSON values."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": [version, list(internal), gauss],
             "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
             "torch": _bytes_b64(torch.get_rng_state())}
    if torch.cuda.is_available():
        state["cuda"] = _bytes_b64(torch.cuda.get_rng_state())
    return state


def set_rng_state_json(state: dict) -> None:
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(x) for x in internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((str(kind), np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(_b64_bytes(state["torch"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(_b64_bytes(state["cuda"]))


def _legacy_rng_state(path: Path) -> dict:
    """rng/rank_*.pt of checkpoints written before the JSON format, read with weights_only (numpy's array
    reconstruction allowed, nothing else)."""
    from torch.serialization import safe_globals

    core = np._core if hasattr(np, "_core") else np.core  # numpy 2 / 1
    allowed = [core.multiarray._reconstruct, np.ndarray, np.dtype, type(np.dtype(np.uint32))]
    try:
        with safe_globals(allowed):
            old = torch.load(path, weights_only=True)
        return {"python": [old["python"][0], list(old["python"][1]), old["python"][2]],
                "numpy": [old["numpy"][0], np.asarray(old["numpy"][1]).tolist(), *old["numpy"][2:]],
                "torch": _bytes_b64(old["torch"]), **({"cuda": _bytes_b64(old["cuda"])} if "cuda" in old else {})}
    except Exception as e:
        raise CheckpointError(f"{path}: refused to load this RNG state ({weights_only_reason(e)}); nothing in it "
                              f"was run. Delete the file to resume without restoring the RNG state") from None


def _barrier():
    if dist.is_initialized():
        dist.barrier()


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _world() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def _local(t):
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def nonfinite_names(state: dict, limit: int = 5) -> list[str]:
    """Names of the floating-point tensors of ``state`` (this rank's shards) holding NaN or inf."""
    bad = []
    for name, t in state.items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and not bool(torch.isfinite(_local(t)).all()):
            bad.append(name)
            if len(bad) >= limit:
                break
    return bad


def _any_rank(flag: bool) -> bool:
    if not dist.is_initialized():
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def save(root: str | Path, step: int, parts, optimizers, meta: dict, model_cfg: ModelConfig) -> Path:
    """Collective: every rank calls it. ``latest`` moves to this step only after all ranks wrote their part."""
    root, rank = Path(root), _rank()
    d = step_dir(root, step)
    state = model_state(parts)
    bad = nonfinite_names(state)
    if _any_rank(bool(bad)):  # every rank raises, none writes: latest stays where it was
        where = f": {', '.join(bad)}" if bad else " (on another rank)"
        raise CheckpointError(f"step {step}: the model has non-finite weights{where}; not saving a checkpoint, "
                              f"{LATEST} stays at the last good one. Lower train.lr or raise train.warmup_steps, "
                              f"then resume")
    if rank == 0:
        if d.exists():  # a partial write from a killed run, never pointed at by latest
            shutil.rmtree(d)
        (d / "rng").mkdir(parents=True)
    _barrier()
    _, merged_optim = optim_state(parts, optimizers)
    _dcp_save({"model": state, "optim": merged_optim}, d / "dcp")
    _write_atomic(d / "rng" / f"rank_{rank:05d}.json", json.dumps(rng_state_json()))
    if rank == 0:
        _write_atomic(d / "model_config.json", json.dumps(model_cfg.__dict__, indent=1))
        _write_atomic(d / "meta.json", json.dumps(meta, indent=1))
    _barrier()  # every rank's shards, rng and the metadata are on disk
    names = manifest.checkpoint_files(d)
    mine = manifest.digests(d, names[rank::_world()])  # each rank hashes its share of the files
    if dist.is_initialized():
        shares: list = [None] * _world()
        dist.all_gather_object(shares, mine)
    else:
        shares = [mine]
    if rank == 0:
        manifest.write_manifest(d, {k: v for share in shares for k, v in share.items()})
        _write_atomic(root / LATEST, d.name + "\n")
    _barrier()
    return d


def read_meta(d: Path) -> dict:
    return json.loads((Path(d) / "meta.json").read_text())


def read_model_config(d: Path) -> ModelConfig:
    """The checkpoint's ``model_config.json``, each value checked against its type and for sense (sizes at
    least 1, heads dividing the width): a tampered file fails here, naming itself, before any model is built."""
    path = Path(d) / "model_config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, dict):
            raise ValueError(f"holds a {type(raw).__name__}, not an object")
        cfg = model_config_from_dict(raw)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: not a usable model config ({e}); use another checkpoint") from None
    for key in ("hidden_size", "num_layers", "num_heads", "max_seq_len", "vocab_size", "padded_vocab_size",
                "ffn_hidden_size"):
        value = getattr(cfg, key)
        if value is not None and value < 1:
            raise CheckpointError(f"{path}: {key} = {value} (must be at least 1); use another checkpoint")
    for key, allowed in MODEL_CHOICES.items():
        if getattr(cfg, key) not in allowed:
            raise CheckpointError(f"{path}: {key} = {getattr(cfg, key)!r} (one of {', '.join(allowed)}); "
                                  "use another checkpoint")
    if cfg.hidden_size % cfg.num_heads:
        raise CheckpointError(f"{path}: hidden_size {cfg.hidden_size} is not a multiple of num_heads {cfg.num_heads}")
    return cfg


def saved_layer_count(d: Path) -> int:
    """How many transformer layers the checkpoint's weights hold (from its DCP metadata)."""
    metadata = read_dcp_metadata(Path(d) / "dcp" / ".metadata").state_dict_metadata
    return len({k.split(".")[2] for k in metadata if k.startswith("model.layers.")})


def check_shapes(model, d: Path) -> None:
    """The model built (on the meta device) from ``model_config.json`` has exactly the tensors and shapes the
    checkpoint's DCP metadata records, and no buffer larger than its weights (a RoPE table for a claimed
    10^12 positions): a config edited to claim another size fails here, before memory is allocated for it."""
    metadata = read_dcp_metadata(Path(d) / "dcp" / ".metadata").state_dict_metadata
    weights = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() for b in model.buffers())
    if buffers > weights:
        raise CheckpointError(f"{d}: model_config.json asks for {buffers:,} buffer elements (max_seq_len "
                              f"{model.config.max_seq_len}), more than the "
                              f"{weights:,} weights; the checkpoint was damaged or tampered with: use another one")
    for name, tensor in model.state_dict().items():
        saved = metadata.get(f"model.{name}")
        size = getattr(saved, "size", None)
        if size is None or tuple(size) != tuple(tensor.shape):
            raise CheckpointError(f"{d}: model_config.json describes {name} as {tuple(tensor.shape)}, the weights "
                                  f"hold {tuple(size) if size is not None else 'no such tensor'}; the checkpoint "
                                  "was damaged or tampered with: use another one")


def load(d: str | Path, parts, optimizers=None) -> dict:
    """Load model (and optimizer) state into this rank's parts, whatever layout wrote the checkpoint; restores
    this rank's RNG state when the checkpoint has one for it. Returns meta.json."""
    d = Path(d)
    msd = model_state(parts)
    state = {"model": msd}
    osds = None
    if optimizers is not None:
        osds, state["optim"] = optim_state(parts, optimizers)
    _dcp_load(state, d / "dcp")
    bad = nonfinite_names(msd)
    if _any_rank(bool(bad)):
        raise CheckpointError(f"{d} holds non-finite weights{': ' + ', '.join(bad) if bad else ' (on another rank)'}"
                              f"; refusing to resume from it: point {LATEST} at an older step_* directory")
    for part in parts:
        own = {k: v for k, v in msd.items() if k in part.state_dict()}
        set_model_state_dict(part, own)
    if optimizers is not None:
        for part, opt, osd in zip(parts, optimizers, osds):
            own = {k: state["optim"][k] for k in osd}
            set_optimizer_state_dict(part, opt, own, options=_OPTIM_OPTS)
    meta = read_meta(d)
    if meta.get("world_size") == _world():
        rng = d / "rng" / f"rank_{_rank():05d}.json"
        legacy = rng.with_suffix(".pt")
        if rng.exists():
            set_rng_state_json(json.loads(rng.read_text()))
        elif legacy.exists():
            set_rng_state_json(_legacy_rng_state(legacy))
    return meta


def load_model_for_inference(checkpoint_dir: str | Path, device: str | torch.device = "cpu"):
    """-> (model, model_config): the whole GPT (tp = pp = 1) in eval mode from a checkpoint root or step dir."""
    from pretrain.model import GPT

    d = find_intact(checkpoint_dir)
    cfg = read_model_config(d)
    try:
        layers = saved_layer_count(d)
        if cfg.num_layers != layers:  # before building: a claimed 10^9 layers would take hours even on meta
            raise CheckpointError(f"{d}: model_config.json says num_layers = {cfg.num_layers}, the weights hold "
                                  f"{layers} layers; the checkpoint was damaged or tampered with: use another one")
        with torch.device("meta"):
            model = GPT(cfg)
        check_shapes(model, d)
    except UnsafeCheckpointError as e:
        raise CheckpointError(str(e)) from None
    model.to_empty(device=device)
    if cfg.tie_embeddings:
        model.lm_head.weight = model.embed.weight
    model.init_weights()  # fills the RoPE table; weights are overwritten below
    sd = model.state_dict()
    _dcp_load({"model": sd}, d / "dcp")
    bad = nonfinite_names(sd)
    if bad:
        raise CheckpointError(f"{d} holds non-finite weights: {', '.join(bad)}")
    model.load_state_dict(sd)
    return model.eval(), cfg


# ---------------------------------------------------------------------------------------- picking a checkpoint


def _step_of(d: Path) -> int:
    try:
        return int(d.name.split("_", 1)[1])
    except (IndexError, ValueError):
        return -1


def damage(d: Path) -> list[str]:
    """What makes step directory ``d`` unusable (empty: intact, or an older checkpoint without a manifest that
    is at least complete). Under torch.distributed it is collective: each rank hashes its share of the files
    and every rank gets the union, so all ranks take the same decision (and none hashes everything)."""
    problems = _local_damage(Path(d), _rank(), _world())
    if not dist.is_initialized():
        return problems
    shares: list = [None] * _world()
    dist.all_gather_object(shares, problems)
    return list(dict.fromkeys(p for share in shares for p in share))  # union, in rank order, no repeats


def _local_damage(d: Path, part: int, parts: int) -> list[str]:
    if not d.is_dir():
        return ["it does not exist"]
    if not (d / "dcp" / ".metadata").exists():
        return ["it is incomplete (no dcp/.metadata)"]
    if not manifest.has_manifest(d):
        return []  # written before manifests existed: complete, but unverifiable
    return manifest.problems(d, part, parts)


def _describe(d: Path, problems: list[str]) -> str:
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return f"checkpoint {d} is damaged: {'; '.join(problems[:3])}{more}"


def _older_intact(root: Path, below: int) -> tuple[Path | None, list[str]]:
    """(newest intact step_* directory of ``root`` with a step below ``below``, descriptions of damaged ones)."""
    seen = []
    for d in sorted((p for p in root.glob("step_*") if p.is_dir() and 0 <= _step_of(p) < below),
                    key=_step_of, reverse=True):
        problems = damage(d)
        if not problems:
            return d, seen
        seen.append(_describe(d, problems))
    return None, seen


def _unverified_note(d: Path) -> None:
    if not manifest.has_manifest(d):
        print(f"warning: {d} has no {manifest.MANIFEST} (an older checkpoint): its files are not verified",
              file=sys.stderr)


def find_resume(checkpoint_cfg, announce: bool = True) -> Path | None:
    """The step directory a run with ``checkpoint_cfg`` (``dir``, ``on_damage``) resumes from: the one ``latest``
    names if it is intact, else (``on_damage = "fallback"``) the newest intact older one, with a message naming
    the damage; CheckpointError when ``on_damage = "stop"`` or nothing intact is left. None: nothing to resume."""
    root = Path(checkpoint_cfg.dir)
    on_damage = getattr(checkpoint_cfg, "on_damage", "fallback")
    if (root / "dcp").is_dir():  # checkpoint.dir is a step directory itself
        problems = damage(root)
        if problems:
            raise CheckpointError(_describe(root, problems))
        return root
    if not (root / LATEST).exists():
        return _without_latest(root, on_damage, announce)
    name = (root / LATEST).read_text().strip()
    d = root / name
    problems = damage(d)
    if not problems:
        if announce:
            _unverified_note(d)
        return d
    what = _describe(d, problems)
    older, also = _older_intact(root, _step_of(d) if _step_of(d) >= 0 else 1 << 62)
    hint = f"the newest intact one is {older}" if older else "no older checkpoint is intact"
    if on_damage == "stop" or older is None:
        raise CheckpointError(f"{what}; {hint}" + (" (checkpoint.on_damage = 'stop')" if older else "") +
                              (f"; also damaged: {'; '.join(also)}" if also else ""))
    if announce:
        for line in [what, *also]:
            print(f"warning: {line}", file=sys.stderr)
        print(f"warning: resuming from {older}, the newest intact checkpoint (set checkpoint.on_damage = 'stop' "
              f"to stop instead)", file=sys.stderr)
        _unverified_note(older)
    return older


def _without_latest(root: Path, on_damage: str, announce: bool) -> Path | None:
    """No ``latest``: a fresh start, unless a step directory is verified complete by its manifest (written just
    before ``latest`` moves), which means ``latest`` was lost: resume from the newest such one (or stop)."""
    done = [d for d in sorted(root.glob("step_*"), key=_step_of, reverse=True)
            if d.is_dir() and manifest.has_manifest(d) and not damage(d)]
    if not done:
        return None
    what = f"{root / LATEST} is missing, yet {done[0]} is a complete checkpoint"
    if on_damage == "stop":
        raise CheckpointError(f"{what}: restore it (echo {done[0].name} > {root / LATEST}), or empty {root} to "
                              f"start over (checkpoint.on_damage = 'stop')")
    if announce:
        print(f"warning: {what}; resuming from it (set checkpoint.on_damage = 'stop' to stop instead)",
              file=sys.stderr)
    return done[0]


def find_intact(path: str | Path) -> Path:
    """For inference and export: the step directory of ``path`` (a root or a step directory), verified;
    FileNotFoundError if there is none, CheckpointError naming the damage (and the newest intact one) if any."""
    path = Path(path)
    d = resolve(path) if (path / "dcp" / ".metadata").exists() else None
    if d is None:
        if not (path / LATEST).exists():
            raise FileNotFoundError(f"no checkpoint in {path} (expected {LATEST} or dcp/.metadata)")
        d = path / (path / LATEST).read_text().strip()
    problems = damage(d)
    if problems:
        older, _ = _older_intact(d.parent, _step_of(d) if _step_of(d) >= 0 else 1 << 62)
        hint = f"; the newest intact one is {older}: pass that directory" if older else ""
        raise CheckpointError(_describe(d, problems) + hint)
    _unverified_note(d)
    return d

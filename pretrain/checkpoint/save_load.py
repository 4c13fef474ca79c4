"""Saving and loading a checkpoint through ``torch.distributed.checkpoint`` (DCP) at any tp/pp/dp layout, and
``load_model_for_inference`` (the whole model in one process). The folder layout is described in
:mod:`pretrain.checkpoint`; imports ``manifest``, ``safe_load`` and ``find`` of this package, never the reverse."""
from __future__ import annotations

import base64
import contextlib
import errno
import json
import math
import os
import random
import re
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

from curate import json_files
from pretrain.checkpoint import config_change, manifest
from pretrain.checkpoint.find import LATEST, CheckpointError, find_intact, rank as _rank, step_dir, world as _world
from pretrain.checkpoint.manifest import write_atomic as _write_atomic
from pretrain.checkpoint.safe_load import (
    SafeFileSystemReader, SafeLoadPlanner, UnsafeCheckpointError, check_storage_paths, open_regular,
    read_dcp_metadata, record_bytes, weights_only_reason,
)
from pretrain.config import MODEL_CHOICES, Config, ModelConfig, _check_values, model_config_from_dict

_OPTIM_OPTS = StateDictOptions(flatten_optimizer_state_dict=True)


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():  # one process without a process group is a supported DCP mode
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


def raise_if_interrupted(e: BaseException) -> None:
    """Re-raise the Ctrl-C (KeyboardInterrupt, or SIGTERM's subclass of it) or SystemExit that DCP caught and
    wrapped in its CheckpointException: a save or load that was interrupted is not a broken checkpoint, and the
    command says "interrupted" (exit 130) as it does anywhere else."""
    if isinstance(e, (KeyboardInterrupt, SystemExit)):
        raise e
    for failure in (e.failures.values() if isinstance(e, CheckpointException) else ()):
        inner = failure[0] if isinstance(failure, tuple) and failure else failure
        if isinstance(inner, (KeyboardInterrupt, SystemExit)):
            raise inner from None


def _dcp_save(state, path: Path) -> None:
    try:
        with _quiet():
            dcp.save(state, checkpoint_id=str(path))
    except (Exception, CheckpointException) as e:  # DCP's CheckpointException is a BaseException
        raise_if_interrupted(e)
        raise write_failure(e, Path(path)) from e


NEARLY_FULL = 64 << 20  # bytes free below which a failed write is put down to a full disk


def write_failure(e: BaseException, path: Path) -> Exception:
    """What to raise for a checkpoint write that failed: an OSError for an error of the machine (disk full,
    read-only, permissions: ``pretrain`` says it in one line, and a rerun resumes from ``latest``), also when
    torch's zip writer only says "unexpected pos" but the disk holding ``path`` is (nearly) full; else a
    CheckpointError naming the folder. Either way ``latest`` still names the previous checkpoint."""
    from curate.os_errors import MACHINE_ERRNOS, errno_of

    code = errno_of(e)
    if code not in MACHINE_ERRNOS:
        try:
            existing = next(p for p in (path, *path.parents) if p.exists())
            free = shutil.disk_usage(existing).free
        except (OSError, StopIteration):
            free = None
        if free is not None and free < NEARLY_FULL:
            code = errno.ENOSPC
    named = path.parent.parent / LATEST if path.name == "dcp" else path.parent / LATEST
    latest = f"{named} still names the previous checkpoint" if named.exists() else "no checkpoint was complete before"
    if code in MACHINE_ERRNOS:
        return OSError(code, f"{os.strerror(code)} writing the checkpoint ({latest})", str(path))
    lines = str(e).strip().splitlines()
    return CheckpointError(f"could not write the checkpoint {path}: {type(e).__name__}: "
                           f"{lines[-1] if lines else ''}; {latest}")


def _dcp_load(state, path: Path) -> None:
    """``dcp.load`` through the restricted reader and planner; any failure -> CheckpointError naming ``path``
    in one sentence (a Ctrl-C is re-raised as such)."""
    path = Path(path)
    where = f"could not load the checkpoint in {path.parent if path.name == 'dcp' else path}"
    try:  # a refused .metadata is named before DCP starts, and so is storage outside dcp/ (a FIFO, /etc/passwd)
        check_storage_paths(read_dcp_metadata(path / ".metadata"), path)  # or beyond a file's end (truncated)
    except UnsafeCheckpointError as e:
        raise CheckpointError(f"{where}: {e}") from None
    planner = SafeLoadPlanner()
    try:
        with _quiet():
            dcp.load(state, storage_reader=SafeFileSystemReader(str(path)), planner=planner)
    except (Exception, CheckpointException) as e:  # DCP's CheckpointException is a BaseException
        raise_if_interrupted(e)
        raise CheckpointError(f"{where}: {_load_failure(e, planner)}") from None


def _load_failure(e: BaseException, planner: SafeLoadPlanner) -> str:
    """Why a ``dcp.load`` failed, in one clause (DCP wraps each rank's error in its CheckpointException, whose
    text repeats it with a traceback: only the error itself is said)."""
    if planner.refused:
        return f"refused to unpickle {planner.refused} (nothing in it was run)"
    failures = e.failures.values() if isinstance(e, CheckpointException) else ()
    inner = next((f[0] for f in failures if isinstance(f, tuple) and f and isinstance(f[0], BaseException)), e)
    if isinstance(inner, UnsafeCheckpointError):
        return str(inner)  # says itself what was refused and why
    if "Unsupported global" in str(inner):
        return f"refused to unpickle a tensor record: {weights_only_reason(inner)} (nothing in it was run)"
    if "Weights only load failed" in str(inner):
        return f"a tensor record is unreadable ({weights_only_reason(inner)}); the file was damaged or tampered with"
    lines = str(inner).strip().splitlines()
    return f"{type(inner).__name__}: {lines[-1] if lines else ''}; the file was damaged or tampered with"


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


def _words(value, count: int, limit: int) -> bool:
    return isinstance(value, list) and len(value) == count and all(type(x) is int and 0 <= x < limit for x in value)


def _number(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def rng_state_problem(state) -> str | None:
    """What makes ``state`` not an RNG state as :func:`rng_state_json` writes it (None: usable): every value of
    its type and range (2**80 in python's state, -5 in numpy's were an OverflowError, a traceback; a gauss of
    "x" was accepted)."""
    if not isinstance(state, dict):
        return f"holds a {type(state).__name__}, not an object"
    py, npy = state.get("python"), state.get("numpy")
    if not (isinstance(py, list) and len(py) == 3 and type(py[0]) is int and _words(py[1], 625, 1 << 32)
            and py[1][-1] <= 624 and (py[2] is None or _number(py[2]))):
        return "'python' is not [version, 625 words of 32 bits, gauss]"
    if not (isinstance(npy, list) and len(npy) == 5 and npy[0] == "MT19937" and _words(npy[1], 624, 1 << 32)
            and type(npy[2]) is int and 0 <= npy[2] <= 624 and npy[3] in (0, 1) and _number(npy[4])):
        return "'numpy' is not ['MT19937', 624 words of 32 bits, position, has_gauss, gauss]"
    if any(not isinstance(state.get(k, ""), str) for k in ("torch", "cuda")) or "torch" not in state:
        return "'torch' (or 'cuda') is not base64 text"
    return None


def set_rng_state_json(state: dict) -> None:
    why = rng_state_problem(state)
    if why:
        raise ValueError(why)
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
        with safe_globals(allowed), open_regular(path) as f:  # a FIFO would block the open for ever
            old = torch.load(f, weights_only=True)
        return {"python": [old["python"][0], list(old["python"][1]), old["python"][2]],
                "numpy": [old["numpy"][0], np.asarray(old["numpy"][1]).tolist(), *old["numpy"][2:]],
                "torch": _bytes_b64(old["torch"]), **({"cuda": _bytes_b64(old["cuda"])} if "cuda" in old else {})}
    except Exception as e:
        raise CheckpointError(f"{path}: refused to load this RNG state ({weights_only_reason(e)}); nothing in it "
                              f"was run. Delete the file to resume without restoring the RNG state") from None


def _barrier(group=None):
    if dist.is_initialized():
        dist.barrier(group=group)





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


def save(root: str | Path, step: int, parts, optimizers, meta: dict, model_cfg: ModelConfig,
         async_save: bool = False) -> Path:
    """Collective: every rank calls it. ``latest`` moves to this step only after all ranks wrote their part and
    the manifest is written. ``async_save``: the state is copied to host memory here and written in the
    background (``pretrain.checkpoint.async_save``); training goes on, and ``latest`` moves when the files are
    complete. A previous background save is waited for first (one at a time)."""
    from pretrain.checkpoint import async_save as background

    background.wait()  # the previous one must be complete before this one starts (and its errors surface here)
    d, state = _begin(root, step, parts, optimizers, meta, model_cfg)
    if async_save:
        background.start(state, d, lambda group: _finish(root, d, group))
        return d
    _dcp_save(state, d / "dcp")
    _finish(root, d)
    return d


def _begin(root, step: int, parts, optimizers, meta: dict, model_cfg: ModelConfig) -> tuple[Path, dict]:
    """Everything a save does before the tensors are written: the non-finite check (collective), an empty step
    directory, this rank's RNG state, the model config and meta.json. -> (step directory, state to write)."""
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
        if d.is_dir() and not d.is_symlink():  # a partial write from a killed run, never pointed at by latest
            shutil.rmtree(d)
        elif os.path.lexists(d):  # a link (to another run's step: never what it points to) or a stray file
            d.unlink()
        (d / "rng").mkdir(parents=True)
    _barrier()
    _, merged_optim = optim_state(parts, optimizers)
    _write_atomic(d / "rng" / f"rank_{rank:05d}.json", json.dumps(rng_state_json()))
    if rank == 0:  # meta.json's step is the folder's (a step folder whose meta.json says another is refused)
        _write_atomic(d / "model_config.json", json.dumps(model_cfg.__dict__, indent=1))
        _write_atomic(d / "meta.json", json.dumps({**meta, "step": step}, indent=1))
    return d, {"model": state, "optim": merged_optim}


def _finish(root, d: Path, group=None) -> None:
    """After every rank wrote its tensors: each rank hashes its share of the files, rank 0 writes the manifest,
    then moves ``latest`` (collective over ``group``, the default one if None)."""
    rank, world = _rank(), _world()
    _barrier(group)  # every rank's shards, rng and the metadata are on disk
    names = manifest.checkpoint_files(d)
    mine = manifest.digests(d, names[rank::world])  # each rank hashes its share of the files
    if dist.is_initialized():
        shares: list = [None] * world
        dist.all_gather_object(shares, mine, group=group)
    else:
        shares = [mine]
    if rank == 0:
        manifest.write_manifest(d, {k: v for share in shares for k, v in share.items()})
        _write_atomic(Path(root) / LATEST, d.name + "\n")
    _barrier(group)


def read_meta(d: Path) -> dict:
    """The checkpoint's ``meta.json`` (step, samples consumed, scheduler, the run's config), each field the
    readers use checked for its type: a damaged or tampered file is a ``CheckpointError`` naming it."""
    path = Path(d) / "meta.json"
    try:
        meta = json_files.read_json(path)
    except (OSError, ValueError) as e:
        raise CheckpointError(f"{path}: unreadable ({e}); use another checkpoint") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{path}: holds a {type(meta).__name__}, not an object; use another checkpoint")
    for key, kind in (("step", int), ("consumed_samples", int), ("world_size", int), ("scheduler", dict),
                      ("config", dict)):
        value = meta.get(key)
        if value is not None and not (_is_count(value) if kind is int else isinstance(value, kind)):
            raise CheckpointError(f"{path}: {key} = {str(value)[:80]!r} is not a {'count' if kind is int else 'table'};"
                                  " use another checkpoint")
    sched_step = (meta.get("scheduler") or {}).get("step", 0)
    if not _is_count(sched_step):
        raise CheckpointError(f"{path}: scheduler.step = {str(sched_step)[:80]!r} is not a count; use another checkpoint")
    for key, value in (meta.get("config") or {}).items():
        if not isinstance(value, dict):
            raise CheckpointError(f"{path}: config.{key} is not a table; use another checkpoint")
    sha = meta.get("tokenizer_sha256")  # absent in checkpoints written before it was recorded: unknown
    if sha is not None and not (isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{64}", sha)):
        raise CheckpointError(f"{path}: tokenizer_sha256 = {str(sha)[:80]!r} is not a sha256; use another checkpoint")
    return meta


def check_tokenizer(d: Path, meta: dict, path: str, hint: str, sha: str | None = None) -> None:
    """The tokenizer ``path`` (of sha256 ``sha``, hashed here when not given) is the one checkpoint ``d`` was
    trained with: the same sha256 as ``tokenizer_sha256`` of its meta.json, ``meta`` (vocabulary size alone let
    another tokenizer of the same size through); a checkpoint written before that was recorded is not checked,
    nor a ``path`` that is not a file (its reader names that). ``hint``: what to do instead."""
    from curate.shards import sha256_file

    want = meta.get("tokenizer_sha256")
    if want is None or (sha is None and not os.path.isfile(path)):
        return
    sha = sha or sha256_file(path)
    if sha != want:
        from pretrain.data.tokenizer import load_tokenizer

        config = meta.get("config") or {}
        try:
            pieces = f"{load_tokenizer(path).vocab_size} pieces, "
        except (OSError, ValueError):
            pieces = ""
        raise CheckpointError(f"tokenizer {path} ({pieces}sha256 {sha[:12]}...) is not the one {d} was trained with "
                              f"(data.tokenizer {(config.get('data') or {}).get('tokenizer')}: model.vocab_size "
                              f"{(config.get('model') or {}).get('vocab_size')}, sha256 {want[:12]}...; a file "
                              f"changed since is another tokenizer): {hint}")


MAX_COUNT = 1 << 53  # steps and samples past this are no run's (and overflow the int64 sample arithmetic)


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < MAX_COUNT


def resume_point(meta: dict, d: Path, largest_batch: int) -> tuple[int, int, dict]:
    """(step, samples consumed, scheduler state) a run resumes from, from a checkpoint's ``meta.json`` as
    ``read_meta`` returns it (each field there of its type): each present and in reason. ``largest_batch``: the most samples a step of the run could
    take (the larger of this config's ``train.global_batch`` and the one the checkpoint's run recorded), so a
    count past ``step x largest_batch`` (or under one sample a step) is a damaged or tampered file, not a run
    (the data index would be built for that many samples)."""
    path = Path(d) / "meta.json"
    missing = [k for k in ("step", "consumed_samples", "scheduler") if k not in meta]
    if missing:
        raise CheckpointError(f"{path}: no {missing[0]!r}, which a run resumes from; use another checkpoint")
    if "step" not in meta["scheduler"]:  # read_meta checked the fields that are there
        raise CheckpointError(f"{path}: no 'scheduler.step', which a run resumes from; use another checkpoint")
    step, consumed = meta["step"], meta["consumed_samples"]
    recorded = ((meta.get("config") or {}).get("train") or {}).get("global_batch")
    if _is_count(recorded):
        largest_batch = max(largest_batch, recorded)
    if consumed < step:  # every step takes a global batch of at least one sample
        raise CheckpointError(f"{path}: consumed_samples = {consumed:,} at step {step:,} is fewer than one sample a "
                              "step: the file is damaged or was tampered with; use another checkpoint")
    if consumed > step * largest_batch:
        raise CheckpointError(f"{path}: consumed_samples = {consumed:,} at step {step:,} is more than {largest_batch:,} "
                              "samples a step (the largest global batch of this run and the one that wrote it): "
                              "the file is damaged or was tampered with; use another checkpoint")
    return step, consumed, meta["scheduler"]


def read_model_config(d: Path) -> ModelConfig:
    """The checkpoint's ``model_config.json``, each value checked against its type and for sense (sizes at
    least 1, heads dividing the width): a tampered file fails here, naming itself, before any model is built."""
    path = Path(d) / "model_config.json"
    try:
        raw = json_files.read_json(path)
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
    errors: list[str] = []
    _check_values(Config(model=cfg), errors.append)  # the rules a training config's values get (norm_eps > 0...)
    errors = [e for e in errors if e.startswith("model.")]
    if errors:
        raise CheckpointError(f"{path}: {errors[0].removeprefix('model.')}; use another checkpoint")
    return cfg


# the model keys whose edit the saved tensors cannot show (same shapes, another function)
_RECORDED_KEYS = ("hidden_size", "num_layers", "num_heads", "norm", "norm_eps", "position", "rope_theta", "mlp",
                  "bias", "tie_embeddings", "max_seq_len", "vocab_size")


def _check_against_meta(d: Path, path: Path, cfg: ModelConfig) -> None:
    """``model_config.json`` against the config the run that saved it recorded in ``meta.json``: an edit of
    ``num_heads`` or ``rope_theta`` keeps every tensor's shape, and generate, eval and export-hf computed
    another function without a word. (A checkpoint whose meta.json holds no config is not checked here.)"""
    try:
        recorded = (read_meta(d).get("config") or {}).get("model") or {}
    except CheckpointError:
        return  # meta.json's own damage is named where it is read
    if not isinstance(recorded, dict):
        return
    for key in _RECORDED_KEYS:
        want = recorded.get(key)
        if want is not None and want != getattr(cfg, key):
            raise CheckpointError(f"{path}: {key} = {getattr(cfg, key)!r}, but the run that saved it trained with "
                                  f"{want!r} (meta.json): the file was edited; use another checkpoint")


def saved_layer_count(d: Path) -> int:
    """How many transformer layers the checkpoint's weights hold (from its DCP metadata)."""
    metadata = read_dcp_metadata(Path(d) / "dcp" / ".metadata").state_dict_metadata
    return len({k.split(".")[2] for k in metadata if k.startswith("model.layers.")})


def check_shapes(model, d: Path) -> None:
    """The model built (on the meta device) from ``model_config.json`` has exactly the tensors and shapes the
    checkpoint's DCP metadata records, no buffer larger than its weights (a RoPE table for a claimed 10^12
    positions), and no tensor larger than the records it is stored in (a metadata edited to claim hidden size
    30000 over files of a small model): a config edited to claim another model fails here, before memory is
    allocated for it."""
    metadata = read_dcp_metadata(Path(d) / "dcp" / ".metadata")
    from curate.host_memory import available_bytes

    weights = sum(p.numel() for p in model.parameters())
    buffers = sum(b.numel() for b in model.buffers())
    room = available_bytes()
    # (a buffer is not stored, so only memory bounds it: a small model of a long context holds more RoPE table
    # than weights, and was refused as tampered)
    if buffers > weights and room is not None and 4 * buffers > room:
        raise CheckpointError(f"{d}: model_config.json asks for {buffers:,} buffer elements (max_seq_len "
                              f"{model.config.max_seq_len}), {4 * buffers / 2**30:,.1f} GiB, more than the "
                              f"{room / 2**30:,.1f} GiB of memory available; the checkpoint was damaged or tampered "
                              f"with: use another one")
    saved = {k[len("model."):]: v for k, v in metadata.state_dict_metadata.items() if k.startswith("model.")}
    state = model.state_dict()
    if set(saved) != set(state):
        raise CheckpointError(_names_differ(d, model.config, set(saved), set(state)))
    stored = record_bytes(metadata)
    for name, tensor in state.items():
        size = getattr(saved[name], "size", None)
        if size is None or tuple(size) != tuple(tensor.shape):
            raise CheckpointError(f"{d}: model_config.json describes {name} as {tuple(tensor.shape)}, the weights "
                                  f"hold {tuple(size) if size is not None else 'no such tensor'}; the checkpoint "
                                  "was damaged or tampered with: use another one")
        claimed = tensor.numel() * saved[name].properties.dtype.itemsize
        if claimed > stored.get(f"model.{name}", 0):
            raise CheckpointError(f"{d}: refused to allocate {claimed:,} bytes for {name} of shape {tuple(size)}: "
                                  f"dcp/.metadata stores it in {stored.get(f'model.{name}', 0):,} bytes; the "
                                  "checkpoint was damaged or tampered with: use another one")
    _check_against_meta(d, Path(d) / "model_config.json", model.config)


def saved_model_names(d: Path) -> set[str]:
    """Names of the model tensors checkpoint ``d`` holds (from its DCP metadata)."""
    metadata = read_dcp_metadata(Path(d) / "dcp" / ".metadata").state_dict_metadata
    return {k[len("model."):] for k in metadata if k.startswith("model.")}


def _tensor_names(cfg: ModelConfig) -> set[str]:
    """Names of the tensors of the whole model ``cfg`` describes (built on the meta device: nothing allocated)."""
    from pretrain.model import GPT

    with torch.device("meta"):
        return set(GPT(cfg).state_dict())


def check_names(d: Path, cfg: ModelConfig) -> None:
    """The whole model of ``cfg`` has exactly the tensors checkpoint ``d`` holds: a tensor of the checkpoint
    the model has no use for (the biases of a model_config.json edited to bias = false, the position table
    of one edited to rope) was silently left out of the load."""
    saved, built = saved_model_names(d), _tensor_names(cfg)
    if saved != built:
        raise CheckpointError(_names_differ(d, cfg, saved, built))


_NAME_CHOICES = {"bias": (True, False), **MODEL_CHOICES}  # the model_config.json keys that decide which tensors exist


def _names_differ(d: Path, cfg: ModelConfig, saved: set, built: set) -> str:
    """The message for a model whose tensor names are not the checkpoint's: the model_config.json keys under
    which the names would match (fewest changed), else the tensors that differ."""
    import dataclasses
    import itertools

    fits = []
    for values in itertools.product(*_NAME_CHOICES.values()):
        alt = dict(zip(_NAME_CHOICES, values))
        try:
            names = _tensor_names(dataclasses.replace(cfg, **alt))
        except Exception:  # a combination the model cannot be built with is not the one that was saved
            continue
        if names == saved:
            fits.append({k: v for k, v in alt.items() if getattr(cfg, k) != v})
    if fits:
        keys = min(fits, key=len)
        said = ", ".join(f"{k} = {json.dumps(getattr(cfg, k))}" for k in keys)
        then = ", ".join(f"{k} = {json.dumps(v)}" for k, v in keys.items())
        return (f"{d}: model_config.json says {said}, but the saved tensors are those of {then}; the file was "
                f"edited or damaged: use another checkpoint")
    extra, lacking = sorted(saved - built), sorted(built - saved)
    what = "; ".join(([f"the weights hold {', '.join(extra[:3])} that the model lacks"] if extra else []) +
                     ([f"the model needs {', '.join(lacking[:3])} that the weights lack"] if lacking else []))
    return f"{d}: model_config.json does not describe the saved tensors: {what}; use another checkpoint"


def load(d: str | Path, parts, optimizers=None) -> dict:
    """Load model (and optimizer) state into this rank's parts, whatever layout wrote the checkpoint; restores
    this rank's RNG state when the checkpoint has one for it. Returns meta.json."""
    d = Path(d)
    msd = model_state(parts)
    config_change.check_fits(d, read_model_config(d), parts[0].config, msd)  # a config change is named as such
    check_names(d, parts[0].config)  # and tensors it would leave out
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
            try:
                set_rng_state_json(json_files.read_json(rng))
            except (OSError, ValueError, KeyError, TypeError, IndexError, RuntimeError, ArithmeticError) as e:
                raise CheckpointError(f"{rng}: not a usable RNG state ({type(e).__name__}: {e}); "
                                      "use another checkpoint") from None
        elif os.path.lexists(legacy):
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

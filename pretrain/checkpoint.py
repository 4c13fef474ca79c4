"""Checkpoints through ``torch.distributed.checkpoint`` (DCP), loadable at any tp/pp/dp layout.

Layout of ``checkpoint.dir``::

    latest                       name of the newest complete checkpoint ("step_00000100"), replaced atomically
                                 by rank 0 only after every rank finished writing it
    step_00000100/
        dcp/                     DCP shards (.distcp) + .metadata: {"model": ..., "optim": ...} keyed by parameter
                                 name (see pretrain/model.py), DTensor-sharded, resharded on load
        model_config.json        the [model] table incl. padded_vocab_size: enough to rebuild the model
        meta.json                step, consumed_samples, lr scheduler state, layout, the run's whole config
        rng/rank_00000.pt        per-rank python / numpy / torch (/ cuda) RNG states

Optimizer state is saved flattened by parameter name (``state.<name>.exp_avg``...), so it reshards too. The
output head's copy of the tied embedding is saved under both names (``embed.weight`` and ``lm_head.weight``) so
that a pipeline's first and last stages both find it.

``load_model_for_inference(dir)`` rebuilds the whole model in one process (tp = pp = 1) from any checkpoint.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import warnings
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from pretrain.config import ModelConfig, model_config_from_dict

LATEST = "latest"
_OPTIM_OPTS = StateDictOptions(flatten_optimizer_state_dict=True)


def _dcp(fn, state, path: Path) -> None:
    with warnings.catch_warnings():  # one process without a process group is a supported DCP mode
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        fn(state, checkpoint_id=str(path))


def step_dir(root: str | Path, step: int) -> Path:
    return Path(root) / f"step_{step:08d}"


def resolve(path: str | Path) -> Path | None:
    """A checkpoint root (with ``latest``) or a step directory -> the step directory, None if there is none;
    FileNotFoundError if ``latest`` names an incomplete one (never silently start over)."""
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


def _rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _barrier():
    if dist.is_initialized():
        dist.barrier()


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def save(root: str | Path, step: int, parts, optimizers, meta: dict, model_cfg: ModelConfig) -> Path:
    """Collective: every rank calls it. ``latest`` moves to this step only after all ranks wrote their part."""
    root, rank = Path(root), _rank()
    d = step_dir(root, step)
    if rank == 0:
        if d.exists():  # a partial write from a killed run, never pointed at by latest
            shutil.rmtree(d)
        (d / "rng").mkdir(parents=True)
    _barrier()
    _, merged_optim = optim_state(parts, optimizers)
    _dcp(dcp.save, {"model": model_state(parts), "optim": merged_optim}, d / "dcp")
    torch.save(_rng_state(), d / "rng" / f"rank_{rank:05d}.pt")
    if rank == 0:
        _write_atomic(d / "model_config.json", json.dumps(model_cfg.__dict__, indent=1))
        _write_atomic(d / "meta.json", json.dumps(meta, indent=1))
    _barrier()  # every rank's shards, rng and the metadata are on disk
    if rank == 0:
        _write_atomic(root / LATEST, d.name + "\n")
    _barrier()
    return d


def read_meta(d: Path) -> dict:
    return json.loads((Path(d) / "meta.json").read_text())


def read_model_config(d: Path) -> ModelConfig:
    return model_config_from_dict(json.loads((Path(d) / "model_config.json").read_text()))


def load(d: str | Path, parts, optimizers=None) -> dict:
    """Load model (and optimizer) state into this rank's parts, whatever layout wrote the checkpoint; restores
    this rank's RNG state when the checkpoint has one for it. Returns meta.json."""
    d = Path(d)
    msd = model_state(parts)
    state = {"model": msd}
    osds = None
    if optimizers is not None:
        osds, state["optim"] = optim_state(parts, optimizers)
    _dcp(dcp.load, state, d / "dcp")
    for part in parts:
        own = {k: v for k, v in msd.items() if k in part.state_dict()}
        set_model_state_dict(part, own)
    if optimizers is not None:
        for part, opt, osd in zip(parts, optimizers, osds):
            own = {k: state["optim"][k] for k in osd}
            set_optimizer_state_dict(part, opt, own, options=_OPTIM_OPTS)
    rng = d / "rng" / f"rank_{_rank():05d}.pt"
    meta = read_meta(d)
    world = dist.get_world_size() if dist.is_initialized() else 1
    if rng.exists() and meta.get("world_size") == world:
        _set_rng_state(torch.load(rng, weights_only=False))
    return meta


def load_model_for_inference(checkpoint_dir: str | Path, device: str | torch.device = "cpu"):
    """-> (model, model_config): the whole GPT (tp = pp = 1) in eval mode from a checkpoint root or step dir."""
    from pretrain.model import GPT

    d = resolve(checkpoint_dir)
    if d is None:
        raise FileNotFoundError(f"no checkpoint in {checkpoint_dir} (expected {LATEST} or dcp/.metadata)")
    cfg = read_model_config(d)
    with torch.device("meta"):
        model = GPT(cfg)
    model.to_empty(device=device)
    if cfg.tie_embeddings:
        model.lm_head.weight = model.embed.weight
    model.init_weights()  # fills the RoPE table; weights are overwritten below
    sd = model.state_dict()
    _dcp(dcp.load, {"model": sd}, d / "dcp")
    model.load_state_dict(sd)
    return model.eval(), cfg

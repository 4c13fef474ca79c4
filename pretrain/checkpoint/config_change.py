"""A checkpoint that is intact but does not fit the model the config now builds: say which config key changed.

Resuming compares the shape of every tensor the model holds with the shape the checkpoint's DCP metadata records
(global shapes: any tp/pp/dp layout reshards). A difference is a config change, not damage: the message names
the keys whose values differ between the checkpoint's ``model_config.json`` and the model now built (with the
key a user sets for a derived one: ``data.seq_len`` for ``model.max_seq_len``, ``parallel.tp`` and
``model.make_vocab_size_divisible_by`` for the padded vocabulary), and the tensors that differ. Imports
:mod:`pretrain.checkpoint.find` and ``safe_load`` only.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from pretrain.checkpoint.find import CheckpointError
from pretrain.checkpoint.safe_load import UnsafeCheckpointError, read_dcp_metadata

# model keys a user does not set directly: what sets them
_SET_BY = {
    "max_seq_len": "data.seq_len sets it unless model.max_seq_len is set",
    "padded_vocab_size": "model.vocab_size rounded up to a multiple of model.make_vocab_size_divisible_by x "
                         "parallel.tp",
    "ffn_hidden_size": "derived from model.hidden_size and model.mlp unless set, rounded to a multiple of tp",
}
_IGNORED = ("init_seed", "init_std")  # no shape depends on them


def shape_differences(d: Path, model_state: dict) -> list[tuple[str, tuple, tuple]]:
    """[(tensor name, shape in the checkpoint, shape in the model)] for the model's tensors whose global shape
    differs from the checkpoint's (tensors the checkpoint lacks are left to the loader)."""
    try:
        metadata = read_dcp_metadata(Path(d) / "dcp" / ".metadata").state_dict_metadata
    except UnsafeCheckpointError as e:
        raise CheckpointError(str(e)) from None
    out = []
    for name, tensor in model_state.items():
        size = getattr(metadata.get(f"model.{name}"), "size", None)
        if size is not None and tuple(size) != tuple(tensor.shape):
            out.append((name, tuple(size), tuple(tensor.shape)))
    return out


def describe(d: Path, saved_cfg, current_cfg, diffs: list[tuple[str, tuple, tuple]]) -> str:
    """The message for an intact checkpoint whose tensors do not fit: the config keys that changed, the tensors."""
    changed = []
    for f in dataclasses.fields(saved_cfg):
        if f.name in _IGNORED:
            continue
        then, now = getattr(saved_cfg, f.name), getattr(current_cfg, f.name, None)
        if then != now:
            note = f" ({_SET_BY[f.name]})" if f.name in _SET_BY else ""
            changed.append(f"model.{f.name} is {then!r} in the checkpoint and {now!r} now{note}")
    tensors = "; ".join(f"{name} is {list(a)} there, {list(b)} here" for name, a, b in diffs[:3])
    more = f" (and {len(diffs) - 3} more tensors)" if len(diffs) > 3 else ""
    what = "; ".join(changed) if changed else "the model's tensor shapes differ"
    fix = ("resume with the checkpoint's values (e.g. --set model.max_seq_len=N keeps its position table; "
           "data.seq_len may then be at most N)" if any("max_seq_len" in c for c in changed)
           else "resume with the checkpoint's values")
    return (f"cannot resume from {d}: the checkpoint is intact, but the config changed since it was written: "
            f"{what}. {tensors}{more}. To continue this run, {fix}; to start a new one, use another "
            f"checkpoint.dir")


def check_fits(d: Path, saved_cfg, current_cfg, model_state: dict) -> None:
    """CheckpointError naming the config change when the model's tensors do not have the checkpoint's shapes."""
    diffs = shape_differences(d, model_state)
    if diffs:
        raise CheckpointError(describe(d, saved_cfg, current_cfg, diffs))

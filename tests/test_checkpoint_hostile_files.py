"""Hostile checkpoints: a model_config.json edited to other choices (bias, norm, position), a .metadata
that is a FIFO or claims a huge model, out-of-range model values, a manifest whose list was cut, checkpoint.dir
set to a step folder, step folders that are links or copies of another step, RNG states and metadata of the
wrong types, a DCP failure said twice, and a Ctrl-C inside DCP reported as damage. Each is refused with one line
(or, for Ctrl-C, is an interruption), never loaded silently, hung on or a traceback."""
from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import types
from pathlib import Path

import pytest
import torch

from pretrain import checkpoint as ckpt
from pretrain.checkpoint import async_save, find, manifest, save_load
from pretrain.checkpoint.find import CheckpointError
from pretrain.checkpoint.safe_load import UnsafeCheckpointError, read_dcp_metadata
from pretrain.cli import main
from tests.test_poisoned_checkpoint import TRAIN, _reseal

S1, S2 = "step_00000001", "step_00000002"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A 2-step run of a tiny GPT with checkpoints at steps 1 and 2."""
    root = tmp_path_factory.mktemp("r7") / "ckpt"
    assert main([*TRAIN, "--set", f"checkpoint.dir='{root}'", "--set", "train.steps=2",
                 "--set", "checkpoint.interval=1"]) == 0
    return root


@pytest.fixture
def root(run, tmp_path) -> Path:
    shutil.copytree(run, tmp_path / "ckpt")
    return tmp_path / "ckpt"


def _edit_json(d: Path, name: str, edit, reseal: bool = True) -> None:
    value = json.loads((d / name).read_text())
    edit(value)
    (d / name).write_text(json.dumps(value))
    if reseal:
        _reseal(d)


def _edit_metadata(d: Path, edit) -> None:
    md = pickle.loads((d / "dcp" / ".metadata").read_bytes())
    edit(md)
    (d / "dcp" / ".metadata").write_bytes(pickle.dumps(md))
    _reseal(d)


# ---- 1. model choices edited in model_config.json ------------------------------------------------------------

@pytest.mark.parametrize("key, value", [("bias", False), ("norm", "rmsnorm"), ("position", "rope")])
def test_an_edited_model_choice_is_refused_naming_the_key(key, value, root, capsys):
    d = root / S2
    _edit_json(d, "model_config.json", lambda m: m.update({key: value}))
    with pytest.raises(CheckpointError, match=f"model_config.json says {key} = ") as e:
        ckpt.load_model_for_inference(root)
    assert "\n" not in str(e.value) and "saved tensors are those of" in str(e.value)
    capsys.readouterr()
    assert main(["export-hf", str(root), str(root.parent / "hf")]) == 2  # one line, nothing written
    err = capsys.readouterr().err
    assert f"says {key} = " in err and "Traceback" not in err and not (root.parent / "hf").exists()
    cfg = ckpt.read_model_config(d)  # resuming (the training config agreeing with the edited file) refuses too
    with pytest.raises(CheckpointError, match=f"says {key} = "):
        save_load.check_names(d, cfg)


@pytest.mark.parametrize("key, value", [("num_heads", 2), ("norm_eps", 0.5)])
def test_an_edit_that_keeps_every_shape_is_refused_against_meta_json(key, value, root, capsys):
    """num_heads 4 -> 2 keeps every tensor's shape: generate, eval and export-hf computed another function."""
    d = root / S2
    _edit_json(d, "model_config.json", lambda m: m.update({key: value}))
    with pytest.raises(CheckpointError, match=f"{key} = {value!r}, but the run that saved it trained with"):
        ckpt.load_model_for_inference(root)
    capsys.readouterr()
    assert main(["export-hf", str(root), str(root.parent / "hf")]) == 2
    assert "meta.json" in capsys.readouterr().err and not (root.parent / "hf").exists()


# ---- 2. files that are not regular files ---------------------------------------------------------------------

class _Hung(Exception):
    pass


def _alarm(signum, frame):
    raise _Hung("the load hung")


def test_a_metadata_fifo_is_refused_not_hung(root):
    d = root / S2
    (d / manifest.MANIFEST).unlink()  # an older checkpoint: nothing verifies its files
    (d / "dcp" / ".metadata").unlink()
    os.mkfifo(d / "dcp" / ".metadata")
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(30)
    try:
        with pytest.raises(UnsafeCheckpointError, match="not a regular file"):
            read_dcp_metadata(d / "dcp" / ".metadata")
        with pytest.raises(CheckpointError, match="dcp/.metadata is not a regular file"):
            ckpt.load_model_for_inference(d)
        assert find.find_resume(types.SimpleNamespace(dir=str(root), on_damage="fallback"),
                                announce=False) == root / S1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# ---- 3. a huge model claimed over small files ----------------------------------------------------------------

def test_a_huge_claimed_model_is_refused_before_memory_is_allocated(root, monkeypatch):
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata

    from pretrain.config import model_config_from_dict
    from pretrain.model import GPT

    d = root / S2
    hidden = 2048
    _edit_json(d, "model_config.json", lambda m: m.update(hidden_size=hidden, num_heads=2, ffn_hidden_size=4 * hidden))
    with torch.device("meta"):
        claimed = GPT(model_config_from_dict(json.loads((d / "model_config.json").read_text()))).state_dict()

    def claim(md):
        for name, t in claimed.items():
            entry = md.state_dict_metadata[f"model.{name}"]
            entry.size = torch.Size(t.shape)
            entry.chunks = [ChunkStorageMetadata(offsets=torch.Size([0] * t.dim()), sizes=torch.Size(t.shape))]
    _edit_metadata(d, claim)
    allocated = []
    monkeypatch.setattr(GPT, "to_empty", lambda self, **kw: allocated.append(1) or self)
    with pytest.raises(CheckpointError, match=r"refused to allocate .* bytes for embed.weight .* stores it in"):
        ckpt.load_model_for_inference(root)
    assert not allocated


# ---- 4. values of model_config.json checked as a training config's ------------------------------------------

@pytest.mark.parametrize("key, value", [("norm_eps", -1.0), ("norm_eps", 0.0), ("norm_eps", float("nan")),
                                        ("init_std", -1.0), ("rope_theta", -5.0)])
def test_a_model_value_out_of_range_is_refused(key, value, root):
    d = root / S2
    _edit_json(d, "model_config.json", lambda m: m.update({key: value}))
    with pytest.raises(CheckpointError, match=f"model_config.json: {key} = "):
        ckpt.read_model_config(d)


# ---- 5. a manifest whose list was cut --------------------------------------------------------------------------

@pytest.mark.parametrize("cut, unlisted", [(lambda files: files.clear(), "dcp/.metadata"),
                                           (lambda files: files.pop("dcp/__0_0.distcp"), "dcp/__0_0.distcp"),
                                           (lambda files: files.pop("model_config.json"), "model_config.json")])
def test_a_file_missing_from_the_manifest_is_damage(cut, unlisted, root):
    d = root / S2
    _edit_json(d, manifest.MANIFEST, lambda m: cut(m["files"]), reseal=False)
    problems = ckpt.damage(d)
    assert f"{unlisted} is not in manifest.json (its list was cut short, or the file was added)" in problems
    with pytest.raises(CheckpointError, match=f"{unlisted} is not in manifest.json"):
        ckpt.load_model_for_inference(root)
    assert find.find_resume(types.SimpleNamespace(dir=str(root), on_damage="fallback"), announce=False) == root / S1


def test_a_file_the_load_does_not_read_may_be_unlisted(root):
    (root / S2 / "notes.txt").write_text("kept beside the checkpoint")
    assert ckpt.damage(root / S2) == []


# ---- 6. checkpoint.dir set to a step folder --------------------------------------------------------------------

def test_checkpoint_dir_set_to_a_step_folder_is_refused(root):
    with pytest.raises(CheckpointError, match=r"is one checkpoint \(step_00000002\); set it to its parent"):
        find.find_resume(types.SimpleNamespace(dir=str(root / S2), on_damage="fallback"))


# ---- 7. step folders that are links, or another step's copy ----------------------------------------------------

def test_a_step_folder_that_is_a_link_is_skipped_and_replaced_at_save(root, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(root, other)
    shutil.rmtree(root / S2)
    os.symlink(other / S1, root / S2)  # another run's step 1, named step 2 here
    assert find.find_resume(types.SimpleNamespace(dir=str(root), on_damage="fallback")) == root / S1
    err = capsys.readouterr().err
    assert "is a symbolic link to" in err and f"resuming from {root / S1}" in err
    with pytest.raises(CheckpointError, match="symbolic link"):
        find.find_resume(types.SimpleNamespace(dir=str(root), on_damage="stop"))
    model, cfg = ckpt.load_model_for_inference(root / S1)
    opt = torch.optim.AdamW(model.parameters())
    d = ckpt.save(root, 2, [model], [opt], {"step": 2}, cfg)  # the link is replaced, what it points to kept
    assert d.is_dir() and not d.is_symlink() and ckpt.damage(d) == []
    assert (other / S1 / "dcp" / ".metadata").is_file() and ckpt.damage(other / S1) == []


def test_a_step_folder_whose_meta_names_another_step_is_damage(root):
    _edit_json(root / S2, "meta.json", lambda m: m.update(step=1))
    assert ckpt.damage(root / S2) == ["its meta.json says step 1, not 2"]


def test_a_link_passed_by_the_user_is_followed(root, tmp_path):
    link = tmp_path / "mine"
    os.symlink(root / S2, link)
    assert ckpt.find_intact(link) == root / S2


# ---- 8. values of the wrong type or range --------------------------------------------------------------------

def _python(i, v):
    return lambda r: r["python"][1].__setitem__(i, v)


@pytest.mark.parametrize("edit", [_python(0, 2 ** 80), _python(0, -1), lambda r: r["numpy"][1].__setitem__(0, -5),
                                  lambda r: r["python"].__setitem__(2, "x"), lambda r: r["numpy"].__setitem__(2, 10**6),
                                  lambda r: r.update(torch=5), lambda r: r["numpy"].__setitem__(0, "PCG64")])
def test_an_rng_state_of_wrong_values_is_refused(edit, root):
    d = root / S2
    _edit_json(d, "rng/rank_00000.json", edit)
    model, _ = ckpt.load_model_for_inference(root)
    with pytest.raises(CheckpointError, match="rng/rank_00000.json: not a usable RNG state"):
        ckpt.load(d, [model])


def test_metadata_names_that_are_not_strings_are_refused(root, capsys, tmp_path_factory):
    from tests.test_export_hf import quarry_tokenizer

    d = root / S2
    _edit_metadata(d, lambda md: md.state_dict_metadata.__setitem__(12345, md.state_dict_metadata["model.embed.weight"]))
    with pytest.raises(CheckpointError, match="an entry is named '12345', not a string"):
        ckpt.load_model_for_inference(root)
    tok = quarry_tokenizer(tmp_path_factory)
    capsys.readouterr()
    assert main(["generate", "--checkpoint", str(root), "--prompt", "x", "--tokenizer", str(tok)]) == 2
    err = capsys.readouterr().err
    assert "not a string" in err and "Traceback" not in err and "AttributeError" not in err


def test_a_metadata_entry_of_wrong_types_is_refused(root):
    _edit_metadata(root / S2, lambda md: setattr(md.state_dict_metadata["model.embed.weight"], "size", ["x"]))
    with pytest.raises(CheckpointError, match="'model.embed.weight' is not a tensor description"):
        ckpt.load_model_for_inference(root)


# ---- 9. one sentence for a failed DCP load --------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["short", "garbled"])
def test_a_failed_load_is_said_once(damage, root):
    d = root / S2
    f = d / "dcp" / "__0_0.distcp"
    data = f.read_bytes()
    f.write_bytes(b"\0" * 100 if damage == "short" else b"\0" * len(data))
    _reseal(d)
    with pytest.raises(CheckpointError) as e:
        ckpt.load_model_for_inference(root)
    text = str(e.value)
    assert text.count("could not load") == 1 and text.count("damaged or tampered with") == 1, text
    assert "\n" not in text and "CheckpointError" not in text and "Traceback" not in text


# ---- 10. Ctrl-C inside DCP ------------------------------------------------------------------------------------

def _wrapped(exc: BaseException):
    """What DCP raises when one of its steps is interrupted: its CheckpointException around the error."""
    from torch.distributed.checkpoint.api import CheckpointException, _wrap_exception

    try:
        raise exc
    except BaseException as e:
        return CheckpointException("interrupted", {0: _wrap_exception(e)})


def _raise_wrapped(exc):
    def fn(*args, **kwargs):
        raise _wrapped(exc)
    return fn


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)])
def test_an_interrupt_inside_dcp_is_an_interrupt(exc, root, monkeypatch):
    monkeypatch.setattr(save_load.dcp, "save", _raise_wrapped(exc))
    monkeypatch.setattr(save_load.dcp, "load", _raise_wrapped(exc))
    with pytest.raises(type(exc)):
        save_load._dcp_save({"x": torch.zeros(1)}, root / "step_00000009" / "dcp")
    with pytest.raises(type(exc)):
        ckpt.load_model_for_inference(root)


def test_an_interrupt_of_a_background_save_is_an_interrupt(monkeypatch, tmp_path):
    monkeypatch.setattr(async_save.dcp, "async_save", _raise_wrapped(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        async_save.start({"x": torch.zeros(1)}, tmp_path / "step_00000001", lambda group: None)
    import concurrent.futures

    fut = concurrent.futures.Future()
    fut.set_exception(_wrapped(KeyboardInterrupt()))
    monkeypatch.setattr(async_save, "_PENDING", (tmp_path / "step_00000001", fut))
    with pytest.raises(KeyboardInterrupt):
        async_save.wait()


def test_ctrl_c_while_training_saves_exits_130(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(save_load.dcp, "save", _raise_wrapped(KeyboardInterrupt()))
    assert main([*TRAIN, "--set", f"checkpoint.dir='{tmp_path / 'ckpt'}'", "--set", "train.steps=1"]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "damaged" not in err and "could not write" not in err, err


def test_a_small_model_of_a_long_context_loads(tmp_path):
    """A RoPE table of more elements than the weights (hidden 32, max_seq_len 16384) is no sign of tampering: such
    a checkpoint, trained and resumed, was refused by generate, eval and export-hf."""
    root = tmp_path / "ck"
    assert main([*TRAIN, "--set", f"checkpoint.dir='{root}'", "--set", "train.steps=1", "--set", "checkpoint.interval=1",
                 "--set", "model.position='rope'", "--set", "model.max_seq_len=16384"]) == 0
    model, cfg = ckpt.load_model_for_inference(root)
    assert cfg.max_seq_len == 16384
    assert sum(b.numel() for b in model.buffers()) > sum(p.numel() for p in model.parameters())

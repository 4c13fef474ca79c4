"""A hostile checkpoint: every pickled file of a real checkpoint is replaced by a payload that writes a marker file
(and the manifest is rewritten to match, as an attacker would). `pretrain train` (resume), `pretrain generate` and
`pretrain export-hf` refuse it with a message and the marker is never written; the stock loaders do run the
payload, so the test would catch a loader that does."""
from __future__ import annotations

import io
import pickle
import shutil
from pathlib import Path

import pytest
import torch

from pretrain import checkpoint as ckpt
from pretrain.checkpoint import manifest
from pretrain.cli import main
from tests.test_export_hf import quarry_tokenizer

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ["train", "--config", str(ROOT / "pretrain/configs/tiny.toml"), "--set", "data.kind=synthetic",
         "--set", "model.vocab_size=256", "--set", "model.hidden_size=32", "--set", "data.seq_len=16",
         "--set", "train.global_batch=8", "--set", "log.dir=''", "--set", "checkpoint.interval=0"]


class Payload:
    """Unpickling this runs ``open(marker, "w").write(...)``."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').write('payload ran')",)


def _train(ckpt_dir: Path, steps: int) -> int:
    return main([*TRAIN, "--set", f"checkpoint.dir='{ckpt_dir}'", "--set", f"train.steps={steps}"])


@pytest.fixture(scope="module")
def clean_checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("clean") / "ckpt"
    assert _train(root, 2) == 0
    assert not list(root.rglob("*.pt")), "RNG state is JSON now: no pickle outside DCP"
    return root


def _reseal(d: Path) -> None:
    """What an attacker does after editing: a manifest that matches the edited files."""
    manifest.write_manifest(d, manifest.digests(d, manifest.checkpoint_files(d)))


def poison_metadata(d: Path, marker: Path) -> None:
    (d / "dcp" / ".metadata").write_bytes(pickle.dumps(Payload(marker)))


def _rewrite_records(d: Path, marker: Path, only_bytes: bool) -> None:
    """Records of the .distcp shards become torch.save'd payloads (all, or only the optimizer's non-tensor
    entries); the metadata (still made of DCP's own classes) points at the new records."""
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata

    with open(d / "dcp" / ".metadata", "rb") as f:
        md = pickle.load(f)  # our own clean file: safe to read with the stock unpickler here
    payload = io.BytesIO()
    torch.save(Payload(marker), payload)
    old = {p: (d / "dcp" / p).read_bytes() for p in {i.relative_path for i in md.storage_data.values()}}
    new: dict[str, bytearray] = {p: bytearray() for p in old}
    for index, info in md.storage_data.items():
        is_bytes = isinstance(md.state_dict_metadata[index.fqn], BytesStorageMetadata)
        record = payload.getvalue() if is_bytes or not only_bytes else \
            old[info.relative_path][info.offset:info.offset + info.length]
        info.offset, info.length = len(new[info.relative_path]), len(record)
        new[info.relative_path] += record
    for path, data in new.items():
        (d / "dcp" / path).write_bytes(bytes(data))
    (d / "dcp" / ".metadata").write_bytes(pickle.dumps(md))


def poison_entries(d: Path, marker: Path) -> None:
    _rewrite_records(d, marker, only_bytes=False)


def poison_optimizer_entries(d: Path, marker: Path) -> None:
    """Tensors intact; the optimizer's non-tensor entries (lr, betas, ...), which DCP reads with
    torch.load(weights_only=False), carry the payload."""
    _rewrite_records(d, marker, only_bytes=True)


def poison_rng(d: Path, marker: Path) -> None:
    """A checkpoint in the older format, whose RNG state was a torch.save'd pickle."""
    (d / "rng" / "rank_00000.json").unlink()
    torch.save(Payload(marker), d / "rng" / "rank_00000.pt")


POISONS = {"metadata": poison_metadata, "entries": poison_entries, "optimizer_entries": poison_optimizer_entries,
           "rng": poison_rng}


@pytest.mark.parametrize("kind", list(POISONS))
def test_poisoned_checkpoint_never_runs_code(kind, clean_checkpoint, tmp_path, tmp_path_factory, capsys):
    root = tmp_path / "ckpt"
    shutil.copytree(clean_checkpoint, root)
    d = ckpt.resolve(root)
    marker = tmp_path / "MARKER"
    POISONS[kind](d, marker)
    _reseal(d)
    assert ckpt.damage(d) == []  # the checksums pass: only the loaders stand between the payload and the user

    capsys.readouterr()
    assert _train(root, 3) == 2  # resume
    err = capsys.readouterr().err
    assert "Traceback" not in err and ("refused" in err or "refusing" in err), err
    assert str(d) in err or d.name in err
    assert not marker.exists()

    if kind not in ("rng", "optimizer_entries"):  # inference reads neither the RNG state nor the optimizer
        assert main(["export-hf", str(root), str(tmp_path / "hf")]) == 2
        err = capsys.readouterr().err
        assert "refused" in err and "Traceback" not in err, err
        assert not marker.exists()
        tok = quarry_tokenizer(tmp_path_factory)
        assert main(["generate", "--checkpoint", str(root), "--prompt", "x", "--tokenizer", str(tok)]) == 2
        err = capsys.readouterr().err
        assert "refused" in err and "Traceback" not in err, err
        assert not marker.exists()

    # the payload is live: the stock loaders run it
    if kind == "metadata":
        with open(d / "dcp" / ".metadata", "rb") as f:
            pickle.load(f)
    elif kind in ("entries", "optimizer_entries"):  # what DCP's DefaultLoadPlanner.load_bytes does with one
        from torch.distributed.checkpoint.metadata import BytesStorageMetadata

        with open(d / "dcp" / ".metadata", "rb") as f:
            md = pickle.load(f)
        info = next(v for k, v in md.storage_data.items()
                    if isinstance(md.state_dict_metadata[k.fqn], BytesStorageMetadata))
        raw = (d / "dcp" / info.relative_path).read_bytes()[info.offset:info.offset + info.length]
        torch.load(io.BytesIO(raw), weights_only=False)
    else:
        torch.load(d / "rng" / "rank_00000.pt", weights_only=False)
    assert marker.exists()


def test_clean_checkpoint_still_loads(clean_checkpoint):
    model, cfg = ckpt.load_model_for_inference(clean_checkpoint)
    assert cfg.hidden_size == 32 and all(torch.isfinite(p).all() for p in model.parameters())


def test_no_loader_in_pretrain_can_run_code():
    """A guard for later changes: in pretrain/, every torch.load call passes weights_only=True, nothing calls
    pickle.load(s) or np.load(allow_pickle=True), and DCP is only loaded through the restricted reader."""
    import ast

    def kw(call, name):
        return next((k.value for k in call.keywords if k.arg == name), None)

    offenders = []
    for path in sorted((ROOT / "pretrain").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
            name = f"{owner}.{node.func.attr}"
            where = f"{path.relative_to(ROOT)}:{node.lineno} {name}"
            weights_only = kw(node, "weights_only")
            if name == "torch.load" and not (isinstance(weights_only, ast.Constant) and weights_only.value is True):
                offenders.append(where)
            if name in ("pickle.load", "pickle.loads"):
                offenders.append(where)
            allow = kw(node, "allow_pickle")
            if name == "np.load" and isinstance(allow, ast.Constant) and allow.value is True:
                offenders.append(where)
            if name == "dcp.load" and kw(node, "storage_reader") is None:
                offenders.append(where)
    assert not offenders, offenders


@pytest.mark.parametrize("change, message", [
    ({"num_layers": 10**9}, "num_layers = 1000000000, the weights hold"),  # hours to build, even on meta
    ({"num_layers": "2"}, "expected an integer"),
    ({"hidden_size": -32}, "hidden_size = -32"),
    ({"num_heads": 3}, "not a multiple of num_heads"),
    ({"padded_vocab_size": 512}, "describes embed.weight"),
    ({"max_seq_len": 10**12, "position": "rope"}, "buffer elements"),  # a RoPE table for 10^12 positions
    ({"norm": "__import__('os')"}, "one of layernorm, rmsnorm"),
    (None, "not a usable model config"),
])
def test_a_tampered_model_config_is_refused_before_a_model_is_built(change, message, clean_checkpoint, tmp_path,
                                                                   tmp_path_factory, capsys):
    import json

    root = tmp_path / "ckpt"
    shutil.copytree(clean_checkpoint, root)
    d = ckpt.resolve(root)
    cfg = json.loads((d / "model_config.json").read_text())
    (d / "model_config.json").write_text(json.dumps([cfg] if change is None else {**cfg, **change}))
    _reseal(d)
    capsys.readouterr()
    tok = quarry_tokenizer(tmp_path_factory)
    for argv in (["generate", "--checkpoint", str(root), "--prompt", "x", "--tokenizer", str(tok)],
                 ["export-hf", str(root), str(tmp_path / "hf")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and "model_config.json" in err and "Traceback" not in err, err
    assert not (tmp_path / "hf").exists()


DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it (not a ValueError)


@pytest.mark.parametrize("name", ["meta.json", "model_config.json", "rng/rank_00000.json", "manifest.json"])
def test_a_checkpoint_file_of_deeply_nested_json_is_refused_with_a_message(name, clean_checkpoint, tmp_path,
                                                                           tmp_path_factory, capsys):
    root = tmp_path / "ckpt"
    shutil.copytree(clean_checkpoint, root)
    d = ckpt.resolve(root)
    assert (d / name).is_file()
    (d / name).write_text(DEEP)
    if name != "manifest.json":
        _reseal(d)
    capsys.readouterr()
    assert _train(root, 3) == 2  # resume
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err, err
    assert name.split("/")[-1] in err or "damaged" in err, err
    if name != "rng/rank_00000.json":  # evaluation does not read the RNG state
        task = tmp_path / "prose.jsonl"
        task.write_text('{"text": "A sentence to score."}\n')
        tok = quarry_tokenizer(tmp_path_factory)
        assert main(["eval", "--checkpoint", str(root), "--task", f"bpb:{task}", "--tokenizer", str(tok)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "RecursionError" not in err and name.split("/")[-1] in err, err


_GONE = object()


@pytest.mark.parametrize("change", [{"step": "400"}, {"consumed_samples": -1}, {"config": {"data": "x"}},
                                    {"scheduler": [1]}, {"scheduler": _GONE}, {"scheduler": {}},
                                    {"scheduler": {"step": "x"}}, {"step": 10**30}, {"consumed_samples": 10**20},
                                    {"consumed_samples": 10**6}, {"step": 10**6}])
def test_a_meta_json_of_wrong_types_is_refused_with_a_message(change, clean_checkpoint, tmp_path, capsys):
    """Wrong types, counts past any run (10^20 overflowed the sample arithmetic), a missing or empty scheduler
    (KeyError), more samples consumed than steps x the global batch (the data index would be built for
    them: IndexError, or memory for 10^12 samples) and fewer than one a step (a run at step 10^6 "resumed"
    and did nothing) are each one message naming meta.json and the field."""
    import json

    root = tmp_path / "ckpt"
    shutil.copytree(clean_checkpoint, root)
    d = ckpt.resolve(root)
    meta = json.loads((d / "meta.json").read_text())
    (d / "meta.json").write_text(json.dumps({k: v for k, v in {**meta, **change}.items() if v is not _GONE}))
    _reseal(d)
    capsys.readouterr()
    assert _train(root, 3) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "meta.json" in err and next(iter(change)) in err, err

"""Pointers inside a checkpoint are not trusted: ``latest`` (a FIFO, a link to /dev/zero, non-UTF-8 bytes, a path to
another run), ``manifest.json`` entries (no size, a string size, a bad digest, a name outside the folder) and the
storage paths of ``dcp/.metadata`` (a FIFO, /etc/passwd, ``../``) are refused with a message naming the file,
and the normal fallback to the newest intact checkpoint applies where it does for a damaged one."""
from __future__ import annotations

import json
import os
import pickle
import types
from pathlib import Path

import pytest
import torch
import torch.distributed.checkpoint as dcp

from pretrain.checkpoint import find, manifest, save_load
from pretrain.checkpoint.find import CheckpointError
from pretrain.checkpoint.safe_load import UnsafeCheckpointError, check_storage_paths, read_dcp_metadata

S1, S2 = "step_00000001", "step_00000002"


def _step(root: Path, name: str, value: float = 1.0) -> Path:
    """A small but real checkpoint folder: DCP shards of a tensor dict, meta.json, manifest.json."""
    d = root / name
    with save_load._quiet():
        dcp.save({"model": {"w": torch.full((4, 3), value)}}, checkpoint_id=str(d / "dcp"))
    (d / "meta.json").write_text("{}")
    manifest.write_manifest(d, manifest.digests(d, manifest.checkpoint_files(d)))
    return d


@pytest.fixture
def root(tmp_path) -> Path:
    r = tmp_path / "ckpt"
    _step(r, S1, 1.0)
    _step(r, S2, 2.0)
    (r / "latest").write_text(S2 + "\n")
    return r


def _cfg(r: Path, on_damage: str = "fallback"):
    return types.SimpleNamespace(dir=str(r), on_damage=on_damage)


# ---- latest -------------------------------------------------------------------------------------------------

def test_good_latest(root):
    assert find.read_latest(root) == S2
    assert find.find_resume(_cfg(root), announce=False) == root / S2
    assert find.find_intact(root) == root / S2
    assert find.resolve(root) == root / S2


def _fifo(root):
    (root / "latest").unlink()
    os.mkfifo(root / "latest")


def _devzero(root):
    (root / "latest").unlink()
    os.symlink("/dev/zero", root / "latest")


def _nonutf8(root):
    (root / "latest").write_bytes(b"step_0000000\xff\n")


def _other_run(root):
    other = root.parent / "other_run" / "ckpt"
    _step(other, "step_00000006")
    (root / "latest").write_text("../other_run/ckpt/step_00000006\n")


def _absolute(root):
    (root / "latest").write_text(str(root / S1) + "\n")


def _huge(root):
    (root / "latest").write_bytes(b"step_" + b"0" * 10_000)


def _link_outside(root):
    outside = root.parent / "elsewhere"
    outside.write_text(S2 + "\n")
    (root / "latest").unlink()
    os.symlink(outside, root / "latest")


def _directory(root):
    (root / "latest").unlink()
    (root / "latest").mkdir()


BAD_LATEST = [_fifo, _devzero, _nonutf8, _other_run, _absolute, _huge, _link_outside, _directory]


@pytest.mark.parametrize("spoil", BAD_LATEST, ids=lambda f: f.__name__)
def test_bad_latest_is_named_and_falls_back(spoil, root, capsys):
    spoil(root)
    with pytest.raises(CheckpointError, match="latest"):
        find.read_latest(root)
    # a run resumes from the newest intact step_* of its own folder, with a message
    assert find.find_resume(_cfg(root)) == root / S2
    err = capsys.readouterr().err
    assert str(root / "latest") in err and f"resuming from {root / S2}" in err
    # on_damage = "stop" stops, naming the file
    with pytest.raises(CheckpointError, match="latest"):
        find.find_resume(_cfg(root, "stop"), announce=False)
    # inference / export: named, with the intact one to pass instead
    with pytest.raises(CheckpointError, match=f"latest.*newest intact checkpoint is {root / S2}"):
        find.find_intact(root)
    with pytest.raises(CheckpointError, match="latest"):
        find.resolve(root)


def test_bad_latest_with_nothing_intact_stops(root):
    _nonutf8(root)
    for s in (S1, S2):
        (root / s / "dcp" / "__0_0.distcp").write_bytes(b"x")
    with pytest.raises(CheckpointError, match="not UTF-8.*no checkpoint in it is intact"):
        find.find_resume(_cfg(root), announce=False)


def test_link_inside_the_folder_is_followed(root):
    (root / "pointer").write_text(S1 + "\n")
    (root / "latest").unlink()
    os.symlink("pointer", root / "latest")
    assert find.read_latest(root) == S1


def test_dangling_latest_link_is_named(root):
    (root / "latest").unlink()
    os.symlink(root / "nothing", root / "latest")
    with pytest.raises(CheckpointError, match="latest"):
        find.read_latest(root)
    assert find.find_resume(_cfg(root), announce=False) == root / S2


# ---- manifest entries ---------------------------------------------------------------------------------------

def _edit_entry(d: Path, name: str, edit) -> None:
    p = d / manifest.MANIFEST
    m = json.loads(p.read_text())
    edit(m["files"], name)
    p.write_text(json.dumps(m))


@pytest.mark.parametrize("edit,why", [
    (lambda f, n: f[n].pop("size"), "size is None"),
    (lambda f, n: f[n].update(size="12"), "size is '12'"),
    (lambda f, n: f[n].update(size=-1), "size is -1"),
    (lambda f, n: f[n].update(size=True), "size is True"),
    (lambda f, n: f[n].update(size=1.5), "size is 1.5"),
    (lambda f, n: f[n].pop("sha256"), "sha256 is not"),
    (lambda f, n: f[n].update(sha256=12), "sha256 is not"),
    (lambda f, n: f[n].update(sha256="zz"), "sha256 is not"),
    (lambda f, n: f.update({n: [1, 2]}), "not an object"),
    (lambda f, n: f.update({"../../etc/passwd": f[n]}), "outside"),
    (lambda f, n: f.update({"/etc/passwd": f[n]}), "outside"),
], ids=["no-size", "str-size", "neg-size", "bool-size", "float-size", "no-sha", "int-sha", "bad-sha", "list",
        "dotdot", "absolute"])
def test_unreadable_manifest_entry_is_a_problem_and_falls_back(edit, why, root, capsys):
    _edit_entry(root / S2, "meta.json", edit)
    problems = manifest.problems(root / S2)
    assert any("unreadable entry" in p and why in p for p in problems), problems
    assert find.find_resume(_cfg(root)) == root / S1
    assert "unreadable entry" in capsys.readouterr().err
    with pytest.raises(CheckpointError, match="unreadable entry"):
        find.find_intact(root)


def test_intact_manifest_has_no_problems(root):
    assert manifest.problems(root / S2) == []
    assert manifest.entry_problem("meta.json", {"size": 0, "sha256": "a" * 64}) is None


# ---- dcp/.metadata storage paths ----------------------------------------------------------------------------

def _point_storage(d: Path, target: str, length: int | None = None, offset: int = 0) -> None:
    from torch.distributed.checkpoint.filesystem import _StorageInfo

    p = d / "dcp" / ".metadata"
    md = read_dcp_metadata(p)
    key = next(iter(md.storage_data))
    old = md.storage_data[key]
    md.storage_data[key] = _StorageInfo(relative_path=target, offset=offset,
                                        length=old.length if length is None else length)
    with open(p, "wb") as f:
        pickle.dump(md, f)


def _load(d: Path) -> dict:
    state = {"model": {"w": torch.zeros(4, 3)}}
    save_load._dcp_load(state, d / "dcp")
    return state


def test_intact_storage_loads(root):
    assert torch.equal(_load(root / S2)["model"]["w"], torch.full((4, 3), 2.0))


@pytest.mark.parametrize("target,match", [
    ("/etc/passwd", "outside"),
    ("../../../../../../etc/passwd", "outside"),
    ("FIFO", "outside"),
    ("/dev/zero", "outside"),
    ("", "not a file name"),
    ("no_such.distcp", "cannot be read"),
])
def test_storage_outside_the_checkpoint_is_refused(target, match, root, tmp_path):
    if target == "FIFO":
        fifo = tmp_path / "thefifo"
        os.mkfifo(fifo)
        target = str(fifo)
    _point_storage(root / S2, target)
    with pytest.raises(CheckpointError, match=match):
        _load(root / S2)


def test_storage_fifo_or_link_inside_dcp_is_refused(root, tmp_path):
    d = root / S2
    os.mkfifo(d / "dcp" / "pipe.distcp")
    _point_storage(d, "pipe.distcp")
    with pytest.raises(CheckpointError, match="not a regular file"):
        _load(d)
    os.symlink("/etc/passwd", d / "dcp" / "link.distcp")
    _point_storage(d, "link.distcp")
    with pytest.raises(CheckpointError, match="link leading outside"):
        _load(d)


def test_storage_range_beyond_the_file_is_refused(root):
    d = root / S2
    _point_storage(d, "__0_0.distcp", length=3 << 30)
    with pytest.raises(CheckpointError, match="claims bytes"):
        _load(d)


def test_check_storage_paths_directly(root):
    d = root / S2 / "dcp"
    md = read_dcp_metadata(d / ".metadata")
    check_storage_paths(md, d)  # intact: no error
    md.storage_data = ["not", "a", "dict"]
    with pytest.raises(UnsafeCheckpointError, match="not a mapping"):
        check_storage_paths(md, d)


def test_hostile_metadata_is_still_never_unpickled(root, tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    (root / S2 / "dcp" / ".metadata").write_bytes(pickle.dumps(Boom()))
    with pytest.raises(CheckpointError, match="refused to unpickle"):
        _load(root / S2)
    assert not (tmp_path / "ran").exists()

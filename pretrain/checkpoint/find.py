"""Picking a checkpoint: ``latest`` and the step directories of ``checkpoint.dir``, each verified against its
manifest (a damaged one is named; ``find_resume`` falls back to the newest intact older one or stops).
Imports :mod:`pretrain.checkpoint.manifest` only."""
from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import torch.distributed as dist

from pretrain.checkpoint import manifest
from pretrain.config import ConfigError

LATEST = "latest"
LATEST_MAX_BYTES = 4096  # "step_00000100\n" is 14 bytes; anything much larger is not a pointer
_STEP_NAME = re.compile(r"step_[0-9]+")


class CheckpointError(ConfigError):
    """A checkpoint that cannot be used (damaged, tampered with, non-finite): the message says which and why.
    A ConfigError, so ``pretrain train`` prints it without a traceback."""


def step_dir(root: str | Path, step: int) -> Path:
    return Path(root) / f"step_{step:08d}"


def has_latest(root: str | Path) -> bool:
    """Whether ``root/latest`` is there at all (a link counts, even a dangling one: it is then named as bad)."""
    return os.path.lexists(Path(root) / LATEST)


def read_latest(root: str | Path) -> str:
    """The ``step_*`` name ``root/latest`` holds, read safely: it must be a regular file (a link only to a regular
    file inside ``root``), at most :data:`LATEST_MAX_BYTES`, UTF-8, naming a ``step_*`` folder directly in
    ``root``. Anything else (a FIFO, a device, a link elsewhere, garbage, ``../other_run/...``) raises
    CheckpointError naming the file; FileNotFoundError if it is missing."""
    root = Path(root)
    latest = root / LATEST
    fix = f"write the name of a step_* directory of {root} into it"
    try:
        st = os.lstat(latest)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise CheckpointError(f"{latest} cannot be read ({e.strerror}); {fix}") from None
    target = latest
    if stat.S_ISLNK(st.st_mode):
        real = Path(os.path.realpath(latest))
        base = Path(os.path.realpath(root))
        if base not in real.parents:
            raise CheckpointError(f"{latest} is a symbolic link to {os.readlink(latest)}, outside {root}; {fix}")
        target = real
        try:
            st = os.stat(real)
        except OSError as e:
            raise CheckpointError(f"{latest} is a symbolic link that cannot be followed ({e.strerror}); {fix}") \
                from None
    if not stat.S_ISREG(st.st_mode):
        raise CheckpointError(f"{latest} is not a regular file (a FIFO, device, socket or directory); {fix}")
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise CheckpointError(f"{latest} cannot be read ({e.strerror}); {fix}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between lstat and open
            raise CheckpointError(f"{latest} is not a regular file; {fix}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(LATEST_MAX_BYTES + 1)
    except OSError as e:
        raise CheckpointError(f"{latest} cannot be read ({e.strerror}); {fix}") from None
    finally:
        os.close(fd)
    if len(data) > LATEST_MAX_BYTES:
        raise CheckpointError(f"{latest} is larger than {LATEST_MAX_BYTES:,} bytes, not a checkpoint name; {fix}")
    try:
        name = data.decode("utf-8", errors="strict").strip()
    except UnicodeDecodeError:
        raise CheckpointError(f"{latest} is not UTF-8 text, not a checkpoint name; {fix}") from None
    if not _STEP_NAME.fullmatch(name):
        shown = name if len(name) <= 80 else name[:77] + "..."
        raise CheckpointError(f"{latest} holds {shown!r}, not the name of a step_* directory directly in {root}; "
                              f"{fix}")
    return name


def resolve(path: str | Path) -> Path | None:
    """A checkpoint root (with ``latest``) or a step directory -> the step directory, None if there is none;
    FileNotFoundError if ``latest`` names an incomplete one (never silently start over). Does not verify
    checksums: see :func:`find_resume` and :func:`find_intact`."""
    path = Path(path)
    if (path / "dcp" / ".metadata").exists():
        return path
    latest = path / LATEST
    if has_latest(path):
        d = path / read_latest(path)
        if not (d / "dcp" / ".metadata").exists():
            raise FileNotFoundError(f"{latest} names {d.name}, which is not a complete checkpoint (no dcp/.metadata): "
                                    f"restore it, or point {LATEST} at another step_* directory")
        return d
    return None


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def world() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def _step_of(d: Path) -> int:
    try:
        return int(d.name.split("_", 1)[1])
    except (IndexError, ValueError):
        return -1


def damage(d: Path) -> list[str]:
    """What makes step directory ``d`` unusable (empty: intact, or an older checkpoint without a manifest that
    is at least complete). Under torch.distributed it is collective: each rank hashes its share of the files
    and every rank gets the union, so all ranks take the same decision (and none hashes everything)."""
    problems = _local_damage(Path(d), rank(), world())
    if not dist.is_initialized():
        return problems
    shares: list = [None] * world()
    dist.all_gather_object(shares, problems)
    return list(dict.fromkeys(p for share in shares for p in share))  # union, in rank order, no repeats


def _local_damage(d: Path, part: int, parts: int) -> list[str]:
    if d.is_symlink() and _STEP_NAME.fullmatch(d.name):
        return [f"it is a symbolic link to {os.readlink(d)}, not a step folder of this run"]
    if not d.is_dir():
        return ["it does not exist"]
    if not os.path.lexists(d / "dcp" / ".metadata"):
        return ["it is incomplete (no dcp/.metadata)"]
    if not (d / "dcp" / ".metadata").is_file():
        return ["dcp/.metadata is not a regular file (a FIFO, device, socket, directory or dangling link)"]
    wrong_step = _meta_step_problem(d)
    if wrong_step:
        return [wrong_step]
    if not manifest.has_manifest(d):
        return []  # written before manifests existed: complete, but unverifiable
    return manifest.problems(d, part, parts)


def _meta_step_problem(d: Path) -> str | None:
    """A ``step_N`` folder whose meta.json records another step (a copy or rename of another run's step): it
    would resume at that step while saving under this name. Unreadable files are left to the reader."""
    from curate import json_files

    if not _STEP_NAME.fullmatch(d.name):
        return None  # a folder the user named (passed to generate or export-hf): no step in its name
    try:
        step = json_files.read_json(d / "meta.json").get("step")
    except (OSError, ValueError, AttributeError):
        return None
    if type(step) is int and step != _step_of(d):
        return f"its meta.json says step {step}, not {_step_of(d)}"
    return None


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
    if os.path.lexists(root / "dcp"):  # resuming "from" it would save step_* folders inside it, and redo them
        raise CheckpointError(f"checkpoint.dir {root} is one checkpoint ({root.name}); set it to its parent "
                              f"{root.parent} (the folder holding {LATEST} and the step_* folders) to resume from it")
    if not has_latest(root):
        return _without_latest(root, on_damage, announce)
    try:
        name = read_latest(root)
    except CheckpointError as e:  # like a damaged checkpoint: the newest intact one, or stop
        return _bad_latest(root, str(e), on_damage, announce)
    d = root / name
    problems = damage(d)
    if not problems:
        if announce:
            _unverified_note(d)
        return d
    what = _describe(d, problems)
    older, also = _older_intact(root, _step_of(d) if _step_of(d) >= 0 else 1 << 62)
    hint = f"the newest intact one is {older}" if older else "no older checkpoint is intact"
    return _fall_back(what, older, also, hint, on_damage, announce)


def _bad_latest(root: Path, what: str, on_damage: str, announce: bool) -> Path:
    """``latest`` itself is unusable (see :func:`read_latest`): treated like a damaged checkpoint."""
    older, also = _older_intact(root, 1 << 62)
    hint = f"the newest intact checkpoint is {older}" if older else "no checkpoint in it is intact"
    return _fall_back(what, older, also, hint, on_damage, announce)


def _fall_back(what: str, older, also: list, hint: str, on_damage: str, announce: bool) -> Path:
    """``older`` (the newest intact checkpoint) in place of a damaged one, said on stderr; raises where
    ``on_damage`` is "stop" or nothing is intact."""
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
    if path.is_symlink():  # a link the user passed is followed (a linked step folder found in a root is not)
        path = Path(os.path.realpath(path))
    d = resolve(path) if (path / "dcp" / ".metadata").exists() else None
    if d is None:
        if not has_latest(path):
            raise FileNotFoundError(f"no checkpoint in {path} (expected {LATEST} or dcp/.metadata)")
        try:
            d = path / read_latest(path)
        except CheckpointError as e:
            older, _ = _older_intact(path, 1 << 62)
            hint = f"; the newest intact checkpoint is {older}: pass that directory" if older else ""
            raise CheckpointError(f"{e}{hint}") from None
    problems = damage(d)
    if problems:
        older, _ = _older_intact(d.parent, _step_of(d) if _step_of(d) >= 0 else 1 << 62)
        hint = f"; the newest intact one is {older}: pass that directory" if older else ""
        raise CheckpointError(_describe(d, problems) + hint)
    _unverified_note(d)
    return d

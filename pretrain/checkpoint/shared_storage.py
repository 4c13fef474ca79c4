"""At the start of a multi-process run: does every rank see the same checkpoint.dir, log.dir, data.cache_dir and
data files as rank 0? (Across nodes they must be on shared storage at the same path; on per-node disks a run
would otherwise fail at its first checkpoint with a FileNotFoundError about a temporary file, or train on
different data.)

Rank 0 writes a random token into each directory and measures the data files (the blend spec, each dataset's
.bin/.idx, the tokenizer); the token and the sizes travel to every rank over the process group (not through the
storage under test); every rank reads the token file and measures the files itself. The ranks gather what each
found, so all stop together, at once, with one message naming the paths, the ranks and hosts that do not see
them, and the rule. Rank 0 removes the token files.
"""
from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

import torch.distributed as dist

from pretrain.checkpoint.find import CheckpointError
from pretrain.checkpoint.manifest import write_atomic

TOKEN_PREFIX = ".quarry-shared-check-"
RULE = ("checkpoint.dir, log.dir, data.cache_dir, the blend's datasets and the tokenizer must be on storage every "
        "node sees at the same path (NFS, Lustre, a mounted bucket; a relative path is taken from each launcher's "
        "working directory, so give absolute ones or start every launcher in the same shared directory)")


class SharedStorageError(CheckpointError):
    """A rank does not see what rank 0 wrote or measured (a ConfigError: printed without a traceback)."""


def shared_dirs(cfg) -> list[tuple[str, str]]:
    return [(key, path) for key, path in (("checkpoint.dir", cfg.checkpoint.dir), ("log.dir", cfg.log.dir),
                                          ("data.cache_dir", cfg.data.cache_dir)) if path]


def data_files(cfg) -> list[str]:
    """The files the data comes from, as far as they exist here: the blend spec, each dataset's .bin/.idx, the
    tokenizer."""
    d = cfg.data
    if d.kind != "blend":
        return []
    paths = [p for p in (d.blend, d.tokenizer) if p]
    try:
        from pretrain.data.blend_spec import load_blend_spec

        for ds in load_blend_spec(d.blend).datasets:
            paths += [ds.prefix + ".bin", ds.prefix + ".idx"]
    except Exception:  # an unreadable spec is reported by the data checks, not here
        pass
    return [p for p in paths if Path(p).is_file()]


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _look(token: str, dirs: list[tuple[str, str]], sizes: dict[str, int], where0: dict[str, str]) -> list[str]:
    """What this rank does not see as rank 0 does."""
    out = []
    for key, path in dirs:
        f = Path(path) / f"{TOKEN_PREFIX}{token}"
        try:
            ok = f.read_text() == token
        except OSError:
            ok = False
        if not ok:
            out.append(f"{key} = {path}: the file rank 0 wrote in {where0.get(path, path)} is not visible in "
                       f"{Path(path).resolve()} here")
    for path, size in sizes.items():
        mine = _size(path)
        if mine != size:
            seen = "missing" if mine is None else f"{mine:,} bytes"
            out.append(f"data file {path}: {size:,} bytes on rank 0, {seen} here")
    return out


def check_shared_storage(cfg) -> None:
    """Collective (every rank calls it after the process group starts; nothing for one process): raise
    SharedStorageError on every rank when any rank does not see rank 0's directories and data files."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return
    rank, dirs = dist.get_rank(), shared_dirs(cfg)
    payload: list = [None]
    if rank == 0:
        token, unwritable = secrets.token_hex(8), None
        for key, path in dirs:
            try:
                Path(path).mkdir(parents=True, exist_ok=True)
                write_atomic(Path(path) / f"{TOKEN_PREFIX}{token}", token)
            except OSError as e:  # every rank must hear of it, or they would wait for rank 0 until the timeout
                unwritable = f"rank 0 on {socket.gethostname()} cannot write in {key} = {path}: {e}"
                break
        payload = [(token, {p: _size(p) for p in data_files(cfg)}, socket.gethostname(),
                    {path: str(Path(path).resolve()) for _, path in dirs}, unwritable)]
    dist.broadcast_object_list(payload, src=0)
    token, sizes, host0, where0, unwritable = payload[0]
    if unwritable:
        raise SharedStorageError(f"{unwritable}: make it writable (or choose another path)\n{RULE}")
    mine = (rank, socket.gethostname(), _look(token, dirs, sizes, where0))
    found: list = [None] * dist.get_world_size()
    dist.all_gather_object(found, mine)
    if rank == 0:
        for _, path in dirs:
            (Path(path) / f"{TOKEN_PREFIX}{token}").unlink(missing_ok=True)
    bad = [(r, host, problems) for r, host, problems in found if problems]
    if bad:
        lines = [f"rank {r} on {host}: {'; '.join(problems)}" for r, host, problems in bad[:4]]
        more = f"\n  (and {len(bad) - 4} more ranks)" if len(bad) > 4 else ""
        raise SharedStorageError(f"not every rank sees the storage rank 0 (on {host0}) uses:\n  " +
                                 "\n  ".join(lines) + more + f"\n{RULE}")

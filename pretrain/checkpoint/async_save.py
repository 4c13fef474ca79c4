"""Checkpoints written in the background (``checkpoint.async_save = true``), as torchtitan does it.

``torch.distributed.checkpoint.async_save`` copies this rank's shards into host memory (the only part training
waits for) and writes them from a thread. When the writing is done, the same background work hashes the files
and rank 0 writes the manifest and moves ``latest`` (``save_load._finish``): a checkpoint is named by ``latest``
only when every rank's files are complete, so a crash while one is written leaves ``latest`` at the previous one.

The background collectives (DCP's planning, the barriers and the gathering of checksums) run on a gloo process
group of their own, created once per run by every rank at its first background save, so they never interleave
with training's collectives on the default group. One background save at a time: the next save, and the end of
training (:func:`wait`), wait for it, and an error of the background work is raised there.
"""
from __future__ import annotations

import concurrent.futures
import sys
import time
import warnings
from pathlib import Path

import torch.distributed as dist
import torch.distributed.checkpoint as dcp

_GROUP = None  # the background saves' process group (gloo), created at the first one
_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None
_PENDING: tuple[Path, concurrent.futures.Future] | None = None  # (step directory, its finishing work)


def _group():
    global _GROUP
    if _GROUP is None and dist.is_initialized():
        from pretrain.parallel.mesh import group_timeout

        _GROUP = dist.new_group(backend="gloo", timeout=group_timeout())  # collective: every rank calls it at the same save
    return _GROUP


def start(state: dict, d: Path, finish) -> None:
    """Copy ``state`` to host memory now, write it to ``d/dcp`` in the background, then call ``finish(group)``
    (checksums, manifest, ``latest``) there. Every rank calls it at the same step."""
    global _EXECUTOR, _PENDING
    from pretrain.checkpoint.save_load import raise_if_interrupted

    group = _group()
    if not dist.is_initialized():  # one process: DCP warns from its own thread, where no catch_warnings reaches
        warnings.filterwarnings("ignore", message="torch.distributed is disabled", category=UserWarning)
    try:
        written = dcp.async_save(state, checkpoint_id=str(d / "dcp"), process_group=group,
                                 no_dist=not dist.is_initialized())  # one process: no collectives
    except BaseException as e:  # a Ctrl-C while the state is copied comes wrapped in DCP's CheckpointException
        raise_if_interrupted(e)
        raise
    if _EXECUTOR is None:
        _EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="quarry-ckpt")

    def complete():
        written.result()
        finish(group)

    _PENDING = (d, _EXECUTOR.submit(complete))


def pending() -> Path | None:
    """The step directory being written in the background, if any."""
    return _PENDING[0] if _PENDING else None


def wait(announce: bool = False) -> Path | None:
    """Wait for the background save, if any; -> its step directory (now named by ``latest``), or None. The
    background work's error is raised here (``latest`` then still names the previous checkpoint)."""
    global _PENDING
    if _PENDING is None:
        return None
    d, fut = _PENDING
    _PENDING = None
    t0 = time.perf_counter()
    try:
        fut.result()
    except BaseException as e:
        from pretrain.checkpoint.save_load import raise_if_interrupted, write_failure

        raise_if_interrupted(e)  # Ctrl-C while waiting (or wrapped by DCP) is an interruption, not a failure
        failure = write_failure(e, d)
        if isinstance(failure, OSError):  # disk full and the like: said in one line by pretrain's dispatcher
            raise failure from e
        raise RuntimeError(f"the background save of checkpoint {d} failed ({type(e).__name__}: {e}); "
                           f"{d.parent / 'latest'} still names the previous checkpoint") from e
    if announce:
        print(f"checkpoint {d} complete (waited {time.perf_counter() - t0:.2f} s for the background save)",
              file=sys.stderr, flush=True)
    return d


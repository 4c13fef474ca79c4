"""Process layout: a DeviceMesh ("pp", "dp", "tp") in Megatron's order (tensor innermost, then data, then
pipeline), i.e. rank = tp_rank + tp * (dp_rank + dp * pp_rank)."""
from __future__ import annotations

import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from curate.config import ConfigError


class PeersLostError(RuntimeError):
    """The other ranks of the run could not be reached in time (a process or node died, or never started)."""


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0][:300] if lines else ""


@dataclass(frozen=True)
class Layout:
    tp: int = 1
    pp: int = 1
    dp: int = 1

    @property
    def world_size(self) -> int:
        return self.tp * self.pp * self.dp

    def coords(self, rank: int) -> tuple[int, int, int]:
        """rank -> (pp_rank, dp_rank, tp_rank)."""
        return rank // (self.tp * self.dp), (rank // self.tp) % self.dp, rank % self.tp

    def rank(self, pp_rank: int, dp_rank: int, tp_rank: int) -> int:
        return tp_rank + self.tp * (dp_rank + self.dp * pp_rank)

    def groups(self, dim: str) -> list[list[int]]:
        """All groups of ranks that differ only along ``dim`` ("tp", "dp" or "pp")."""
        out = []
        if dim == "tp":
            for p in range(self.pp):
                for d in range(self.dp):
                    out.append([self.rank(p, d, t) for t in range(self.tp)])
        elif dim == "dp":
            for p in range(self.pp):
                for t in range(self.tp):
                    out.append([self.rank(p, d, t) for d in range(self.dp)])
        elif dim == "pp":
            for d in range(self.dp):
                for t in range(self.tp):
                    out.append([self.rank(p, d, t) for p in range(self.pp)])
        else:
            raise ValueError(dim)
        return out


TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


class LaunchEnvError(ConfigError):
    """torchrun's environment variables (``TORCHRUN_VARS``) that no launcher could have set: a value that is not a
    number, a rank outside its world, a WORLD_SIZE without a RANK (left in the shell by an earlier torchrun or
    Slurm session). A ``ConfigError``: the command stops at start with one line, before any process group."""


def _not_torchrun(var: str, said: str) -> LaunchEnvError:
    world = os.environ.get("WORLD_SIZE", "").strip()
    nproc = f" --nproc-per-node {world}" if world.isdigit() and int(world) > 1 else ""
    return LaunchEnvError(
        f"environment variable {said}: torchrun sets {', '.join(TORCHRUN_VARS)} for each process it starts, and "
        f"this is not what it sets (a value left in the shell by an earlier torchrun or Slurm session?). To run "
        f"in one process, unset it (unset {var}); to run several, launch with torchrun{nproc} -m pretrain ...")


def check_launch_env(need_store: bool = False) -> tuple[int, int, int]:
    """torchrun's environment checked, every variable named when it is wrong -> (rank, local_rank, world_size);
    (0, 0, 1) for a plain process (none of them set). ``need_store``: about to join the process group, which
    also needs MASTER_ADDR and MASTER_PORT when the world has more than one process. Raises ``LaunchEnvError``."""
    env = {k: os.environ.get(k) for k in TORCHRUN_VARS}
    nums = {}
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        v = env[var]
        if v is None:
            continue
        if not v.strip().isdigit() or not v.strip().isascii():  # int() also takes "+1", "1_0", "\u0661"
            raise _not_torchrun(var, f"{var}={v!r} is not a whole number >= 0")
        nums[var] = int(v)
    world, rank = nums.get("WORLD_SIZE", 1), nums.get("RANK")
    local, local_world = nums.get("LOCAL_RANK", 0), nums.get("LOCAL_WORLD_SIZE")
    if world < 1:
        raise _not_torchrun("WORLD_SIZE", f"WORLD_SIZE={env['WORLD_SIZE']!r} is not a number of processes (>= 1)")
    if world > 1 and rank is None:
        raise _not_torchrun("WORLD_SIZE", f"WORLD_SIZE={env['WORLD_SIZE']!r} is set but RANK is not")
    rank = rank or 0
    if rank >= world:
        raise _not_torchrun("RANK", f"RANK={env['RANK']!r} is not below WORLD_SIZE={world}"
                            + ("" if env["WORLD_SIZE"] is not None else " (WORLD_SIZE is not set: 1)"))
    if local_world is not None and not 1 <= local_world <= world:
        raise _not_torchrun("LOCAL_WORLD_SIZE", f"LOCAL_WORLD_SIZE={env['LOCAL_WORLD_SIZE']!r} is not 1 .. "
                                                f"WORLD_SIZE={world}")
    if local >= (local_world if local_world is not None else world):
        raise _not_torchrun("LOCAL_RANK", f"LOCAL_RANK={env['LOCAL_RANK']!r} is not below "
                                          + (f"LOCAL_WORLD_SIZE={local_world}" if local_world is not None
                                             else f"WORLD_SIZE={world}"))
    if "MASTER_PORT" in nums and not 0 < nums["MASTER_PORT"] < 65536:
        raise _not_torchrun("MASTER_PORT", f"MASTER_PORT={env['MASTER_PORT']!r} is not a port (1 .. 65535)")
    if need_store and world > 1:
        for var in ("MASTER_ADDR", "MASTER_PORT"):
            if not (env[var] or "").strip():
                raise _not_torchrun("WORLD_SIZE", f"WORLD_SIZE={world} and RANK={rank} are set but {var} is not "
                                                  f"(where the processes meet)")
    return rank, local, world


def env_world() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from torchrun's environment; (0, 0, 1) for a plain process. The variables are
    checked (``check_launch_env``): a wrong one is a ``LaunchEnvError`` naming it."""
    return check_launch_env()


def cuda_problem(setting: str, local_rank: int = 0) -> str | None:
    """Why the device ``cuda`` cannot be used by this process (``setting``: how the user asked for it, e.g.
    ``"--device cuda"`` or ``"train.device = 'cuda'"``), or None."""
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        if local_rank < n:
            return None
        return (f"{setting}: this is local rank {local_rank} but {n} CUDA device(s) are visible: start at most {n} "
                f"processes per node, or check CUDA_VISIBLE_DEVICES")
    why = ("this torch build has no CUDA support (a CPU-only wheel)" if not torch.backends.cuda.is_built()
           else "no CUDA device is visible (no GPU, its driver not loaded, or CUDA_VISIBLE_DEVICES empty)")
    return f"{setting} but CUDA is not available: {why}"


@dataclass
class ParallelEnv:
    """What a process needs to know about the layout: its coordinates and the mesh (None for one process)."""
    layout: Layout
    rank: int
    device: torch.device
    mesh: DeviceMesh | None
    embed_group: dist.ProcessGroup | None = None  # {first, last} pipeline stage for tied-embedding gradients

    @property
    def pp_rank(self) -> int:
        return self.layout.coords(self.rank)[0]

    @property
    def dp_rank(self) -> int:
        return self.layout.coords(self.rank)[1]

    @property
    def tp_rank(self) -> int:
        return self.layout.coords(self.rank)[2]

    def submesh(self, name: str) -> DeviceMesh:
        return self.mesh[name]


def start_process_group(device: torch.device, timeout_s: float | None = None) -> None:
    """Join torchrun's world (NCCL on CUDA, gloo on CPU); nothing for a plain process or when already joined.
    ``timeout_s`` (parallel.timeout_s) bounds the wait for the other ranks here and in every later collective:
    a rank whose peers died stops with an error instead of waiting for ever."""
    global _TIMEOUT
    if check_launch_env(need_store=True)[2] > 1 and not dist.is_initialized():
        timeout = datetime.timedelta(seconds=timeout_s) if timeout_s else None
        _TIMEOUT = timeout
        try:
            dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo", timeout=timeout,
                                    device_id=device if device.type == "cuda" else None)
        except (RuntimeError, TimeoutError, ValueError) as e:  # DistStoreError and gloo's errors are RuntimeErrors
            rank, _, world = env_world()
            where = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
            raise PeersLostError(
                f"rank {rank}: could not join the {world} processes of this run through the store at {where} "
                f"within parallel.timeout_s = {timeout_s} s ({type(e).__name__}: {_first_line(e)}); a node or "
                f"process did not start, or died: check every launcher") from None


_TIMEOUT: datetime.timedelta | None = None  # parallel.timeout_s of the process group this process started


def group_timeout() -> datetime.timedelta | None:
    """The run's collective timeout (parallel.timeout_s), for process groups made later (None: torch's default)."""
    return _TIMEOUT


def _apply_timeout() -> None:
    """Subgroups (the mesh's tp/dp/pp groups, the tied-embedding groups) get torch's default timeout of 30
    minutes; give every group this rank belongs to the run's parallel.timeout_s instead."""
    if _TIMEOUT is None:
        return
    c10d = dist.distributed_c10d
    for group in list(c10d._world.pg_map):
        if group is not None and not c10d._rank_not_in_group(group):
            c10d._set_pg_timeout(_TIMEOUT, group)


def init_parallel(layout: Layout, device: torch.device) -> ParallelEnv:
    rank, _, world = env_world()
    if world == 1:
        return ParallelEnv(layout, 0, device, None)
    start_process_group(device)
    mesh = init_device_mesh(device.type, (layout.pp, layout.dp, layout.tp), mesh_dim_names=("pp", "dp", "tp"))
    if layout.dp > 1 and layout.tp > 1:
        # a flattened dp x tp dimension lets DTensor reduce over both at once (e.g. the gradient norm)
        mesh["dp", "tp"]._flatten("dp_tp")
    env = ParallelEnv(layout, rank, device, mesh)
    if layout.pp > 1:
        # every process creates every group, in the same order (new_group is collective over the world)
        for d in range(layout.dp):
            for t in range(layout.tp):
                ranks = [layout.rank(0, d, t), layout.rank(layout.pp - 1, d, t)]
                group = dist.new_group(ranks)
                if rank in ranks:
                    env.embed_group = group
    _apply_timeout()
    return env

"""Process layout: a DeviceMesh ("pp", "dp", "tp") in Megatron's order (tensor innermost, then data, then
pipeline), i.e. rank = tp_rank + tp * (dp_rank + dp * pp_rank)."""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh


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


def env_world() -> tuple[int, int, int]:
    """(rank, local_rank, world_size) from torchrun's environment; (0, 0, 1) for a plain process."""
    return (int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0)),
            int(os.environ.get("WORLD_SIZE", 1)))


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


def start_process_group(device: torch.device) -> None:
    """Join torchrun's world (NCCL on CUDA, gloo on CPU); nothing for a plain process or when already joined."""
    if env_world()[2] > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo", device_id=device
                                if device.type == "cuda" else None)


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
    return env

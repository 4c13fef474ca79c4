"""Bytes of tensor memory allocated while a piece of code runs, on any device (CPU included, where torch keeps no
allocator statistics): a ``TorchDispatchMode`` records every tensor that an operator returns in new storage (not
a view of, or an in-place result on, one of its inputs) and follows its storage (through a weak reference)
until it is freed.

    with LiveBytes() as mem:
        loss = model(x)            # mem.current: activations autograd holds for backward
    mem.peak                       # the most bytes alive at once

It sees the operators dispatched to aten (the model's, autograd's, FSDP's, DTensor's outputs), not allocations
made inside a C++ kernel and freed before it returns (workspaces). Used by the memory tests and benchmarks.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


def _local(t):
    inner = getattr(t, "_local_tensor", None)
    return inner if isinstance(inner, torch.Tensor) else t


class LiveBytes(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.peak = 0
        self._bytes = 0
        self._live: dict[int, tuple] = {}  # storage data_ptr -> (weak reference to the storage, bytes)

    def _prune(self) -> None:
        for key in [k for k, (ref, _) in self._live.items() if torch.UntypedStorage._expired(ref)]:
            ref, n = self._live.pop(key)
            torch.UntypedStorage._free_weak_ref(ref)
            self._bytes -= n

    @property
    def current(self) -> int:
        """Bytes of the storages allocated under the mode and still alive."""
        self._prune()
        return self._bytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self._prune()
        inputs = set()
        for a in tree_leaves((args, kwargs)):
            if isinstance(a, torch.Tensor):
                st = _storage(a)
                if st is not None:
                    inputs.add(st.data_ptr())
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            st = _storage(t)
            if st is None:
                continue
            key = st.data_ptr()
            if key == 0 or key in inputs or key in self._live:
                continue
            self._live[key] = (st._weak_ref(), st.nbytes())
            self._bytes += st.nbytes()
        self.peak = max(self.peak, self._bytes)
        return out

    def reset_peak(self) -> None:
        self.peak = self.current


def _storage(t: torch.Tensor):
    t = _local(t)
    if t.device.type == "meta" or t.is_sparse:
        return None
    try:
        return t.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None

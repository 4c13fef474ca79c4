"""The numba options of the extraction's compiled helpers that take arrays and are called in a hot loop.

Called once per tag, attribute, text run or "<", such a helper would have numba count references on each of
its array arguments at each call, with atomic operations that cost more than the helper's work (a fifth of
the DOM scan's time, a third of the stripping's on real pages). ``NO_REFCOUNTS`` compiles it without them
(numba's ``_nrt`` option), where this numba has the option. Such a helper must not allocate or return an
array.
"""
from __future__ import annotations

try:
    from numba.core.options import DefaultOptions

    _HAS_NRT_OPTION = hasattr(DefaultOptions, "_nrt")
except ImportError:
    _HAS_NRT_OPTION = False

NO_REFCOUNTS = {"cache": True, "_nrt": False} if _HAS_NRT_OPTION else {"cache": True}

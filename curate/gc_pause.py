"""Python's cyclic garbage collector paused around a hot loop that makes no reference cycles."""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    """No cyclic garbage collection inside (it is turned back on after, if it was on). For loops that make
    many short-lived lists and tuples but no reference cycles (learning spaCy's tokens of a batch, extracting
    a batch of pages): their allocations would otherwise start collections, some of them over every object
    of the process."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()

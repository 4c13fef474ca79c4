"""The host's available memory (``MemAvailable`` of ``/proc/meminfo``), for checks that refuse work that cannot
fit before any of it is allocated; ``None`` where the system does not say."""
from __future__ import annotations


def available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None

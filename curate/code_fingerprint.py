"""A fingerprint of the curate code that makes a run's output: the SHA-256 of every file of the ``curate``
package (its Python modules and the models it ships), by relative path.

``run.json`` records the fingerprint of the code that started a folder. A rerun with other code (an upgrade,
a local edit) resumes the folder, keeping the tasks already finished as that code made them: the reading
rules and the stages' decisions change between versions, so such a folder can hold output of two versions,
and the rerun says so (``curate.runner``).
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = {".pyc", ".pyo"}


@functools.lru_cache(maxsize=1)
def code_sha256() -> str:
    """SHA-256 over the package's files, sorted by relative path (each path and its bytes)."""
    h = hashlib.sha256()
    for path in sorted(p for p in PACKAGE.rglob("*")
                       if p.is_file() and not _SKIP_DIRS & set(p.relative_to(PACKAGE).parts)
                       and p.suffix not in _SKIP_SUFFIXES):
        rel = path.relative_to(PACKAGE).as_posix().encode()
        data = path.read_bytes()
        h.update(len(rel).to_bytes(8, "little") + rel + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()

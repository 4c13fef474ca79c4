"""JSON read from disk or from a line of a file, bounded: what Quarry reads is often a file a user (or a
hostile one) handed it: a checkpoint's ``meta.json``, a curation ``manifest.json``, an eval task's lines.

``json.loads`` recurses once per ``[`` / ``{``: a few thousand of them raise ``RecursionError``, which is not a
``ValueError`` and so escaped every ``except ValueError`` that handles bad JSON (a traceback instead of a
message). And ``Path.read_text`` on a file that never ends (``/dev/zero``, a FIFO) or a huge one reads until
memory runs out. Here both are a ``JSONFileError`` (a ``ValueError``) naming the file, so the callers' own
handling of bad JSON covers them.
"""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

MAX_JSON_BYTES = 2 << 30  # records are kilobytes, but a run of millions of inputs or shards writes a run.json /
                          # manifest of hundreds of MB: the bound is for files no run writes (parsing 2 GiB of
                          # JSON takes about 10x that in memory)


class JSONFileError(ValueError):
    """A JSON file or line that cannot be read: not JSON, nested too deep, too large, not a regular file."""


def loads(text: str | bytes, source: str = "JSON") -> object:
    """``json.loads(text)``; bad or too deeply nested JSON is a ``JSONFileError`` naming ``source``. An integer
    of more digits than Python converts (4,300: a ``ValueError`` from ``json.loads``) is valid JSON: it is kept
    as its digits, a string."""
    try:
        try:
            return json.loads(text)
        except ValueError as e:
            if isinstance(e, json.JSONDecodeError) or "integer string conversion" not in str(e):
                raise
        return json.loads(text, parse_int=_int_or_digits)
    except RecursionError:
        raise JSONFileError(f"{source}: not JSON (nested too deep to read)") from None
    except ValueError as e:  # (UnicodeDecodeError and JSONDecodeError are ValueErrors)
        raise JSONFileError(f"{source}: not JSON ({e})") from None


def _int_or_digits(digits: str):
    try:
        return int(digits)
    except ValueError:
        return digits


def read_bytes(path: str | Path, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` (a ``JSONFileError`` otherwise: a device, a FIFO
    or a folder is never read). ``FileNotFoundError`` passes through for callers that expect it."""
    path = Path(path)
    if not stat.S_ISREG(path.stat().st_mode):  # before open: opening a FIFO blocks until a writer comes
        raise JSONFileError(f"{path}: not a regular file")
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise JSONFileError(f"{path}: not a regular file")
        if st.st_size > max_bytes:
            raise JSONFileError(f"{path}: {st.st_size:,} bytes, more than the {max_bytes:,} read")
        data = f.read(max_bytes + 1)  # the file may have grown since fstat
    if len(data) > max_bytes:
        raise JSONFileError(f"{path}: more than the {max_bytes:,} bytes read")
    return data


def read_json(path: str | Path, max_bytes: int = MAX_JSON_BYTES) -> object:
    """The JSON value in file ``path`` (UTF-8), bounded as ``read_bytes`` and ``loads`` say."""
    return loads(read_bytes(path, max_bytes), str(path))

"""HTML files: one page per file (``.html``, ``.htm``, ``.html.gz``); the id is the file name."""
from __future__ import annotations

import gzip
import zlib

from curate.readers.streams import sniff
from curate.readers.text import check_text, decode, row
from curate.schema import HTML


def read(path: str, name: str, max_doc_bytes: int):
    kind = sniff(path)  # by the bytes, not the name
    try:
        if kind == "zstd":
            import zstandard

            with open(path, "rb") as raw, zstandard.ZstdDecompressor().stream_reader(raw) as f:
                body = f.read(max_doc_bytes + 1)
        else:
            with (gzip.open if kind == "gzip" else open)(path, "rb") as f:
                body = f.read(max_doc_bytes + 1)
    except EOFError as e:
        yield ("drop", row(name, f"{type(e).__name__}: {e}", path, "", HTML), "truncated_gzip")
        return
    except Exception as e:  # noqa: BLE001 - zlib/zstd errors: a damaged page is set aside, never a crash
        reason = {"gzip": "corrupt_gzip", "zstd": "corrupt_zstd"}.get(kind, "malformed_record")
        yield ("drop", row(name, f"{type(e).__name__}: {e}", path, "", HTML), reason)
        return
    if len(body) > max_doc_bytes:
        yield ("drop", row(name, "", path, "", HTML), "too_large")
        return
    text, ok = decode(body, b"", html=True)
    r = row(name, text, path, "", HTML)
    yield check_text(r, len(body), max_doc_bytes) if ok else ("drop", r, "invalid_utf8")

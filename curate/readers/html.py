"""HTML files: one page per file (``.html``, ``.htm``, also gzip, zstd, bz2 or xz compressed, known by their
bytes); the id is the file name."""
from __future__ import annotations

import bz2
import gzip
import lzma

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
            opener = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}.get(kind, open)
            with opener(path, "rb") as f:
                body = f.read(max_doc_bytes + 1)
    except EOFError as e:
        reason = "truncated_" + kind if kind != "plain" else "malformed_record"
        yield ("drop", row(name, f"{type(e).__name__}: {e}", path, "", HTML), reason)
        return
    except Exception as e:  # noqa: BLE001 - zlib/zstd/bz2/xz errors: a damaged page is set aside, never a crash
        reason = "corrupt_" + kind if kind != "plain" else "malformed_record"
        yield ("drop", row(name, f"{type(e).__name__}: {e}", path, "", HTML), reason)
        return
    if len(body) > max_doc_bytes:
        yield ("drop", row(name, "", path, "", HTML), "too_large")
        return
    text, ok = decode(body, b"", html=True)
    r = row(name, text, path, "", HTML)
    yield check_text(r, len(body), max_doc_bytes) if ok else ("drop", r, "invalid_utf8")

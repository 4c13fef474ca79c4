"""Scoring an HTML extractor on real pages with known must / must-not snippets.

The pages are trafilatura 1.1.0's real-world test cache (87 news, blog, shop and wiki pages, kept as one
WARC whose ``WARC-Target-URI`` is the URL the test suite keys each cached file by); the expectations are the
``'snippet' in result`` / ``'snippet' not in result`` assertions of that release's
``tests/realworld_tests.py::test_extract`` for plain-text output (commented-out assertions excluded).

- **recall**    = share of must-appear snippets found in the output (main content kept),
- **precision** = share of must-not-appear snippets absent from the output (boilerplate removed),

both micro-averaged over all snippets of all pages. A page an engine returns nothing for scores every
must-snippet as missing and every must-not snippet as absent.

``load_pages`` decodes each payload the way a crawler reader does: the HTTP header charset if the bytes are
valid in it, else the ``<meta charset>``, else charset detection; ``iso-8859-1`` / ``ascii`` are read as
``windows-1252`` (the WHATWG rule browsers follow). Two of the 87 pages claim UTF-8 in the header but are
ISO-8859-1 bytes with a matching ``<meta>``.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_HTTP_CHARSET = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]+)", re.I)
_WHATWG_ALIASES = {"iso-8859-1": "windows-1252", "latin1": "windows-1252", "latin-1": "windows-1252",
                   "ascii": "windows-1252", "us-ascii": "windows-1252", "iso8859-1": "windows-1252"}


@dataclass
class Page:
    url: str
    html: str
    encoding: str
    must: list[str] = field(default_factory=list)
    must_not: list[str] = field(default_factory=list)


@dataclass
class Score:
    engine: str
    recall: float
    precision: float
    must_found: int
    must_total: int
    must_not_absent: int
    must_not_total: int
    empty_pages: int
    seconds: float
    failures: list[tuple[str, str, str]]  # (url, "missing" | "leaked", snippet)

    def row(self) -> str:
        return (f"{self.engine:<28} precision {self.precision:.3f} ({self.must_not_absent}/{self.must_not_total})  "
                f"recall {self.recall:.3f} ({self.must_found}/{self.must_total})  empty {self.empty_pages}  "
                f"{self.seconds:.2f} s")


def _norm_charset(name: str | None) -> str | None:
    if not name:
        return None
    name = name.strip().lower()
    name = _WHATWG_ALIASES.get(name, name)
    try:
        import codecs
        return codecs.lookup(name).name
    except LookupError:
        return None


def decode_html(payload: bytes, content_type: str | None = None) -> tuple[str, str]:
    """Bytes of an HTML page -> (str, encoding used)."""
    candidates = []
    if content_type:
        m = _HTTP_CHARSET.search(content_type)
        if m:
            candidates.append(_norm_charset(m.group(1)))
    m = _META_CHARSET.search(payload[:4096])
    if m:
        candidates.append(_norm_charset(m.group(1).decode("ascii", "replace")))
    candidates.append("utf-8")
    for enc in candidates:
        if not enc:
            continue
        try:
            return payload.decode(enc), enc
        except (UnicodeDecodeError, LookupError):
            continue
    from charset_normalizer import from_bytes

    best = from_bytes(payload).best()
    enc = _norm_charset(best.encoding) if best is not None else None
    enc = enc or "windows-1252"
    return payload.decode(enc, errors="replace"), enc


def load_pages(warc_path: str | Path, expected_path: str | Path) -> list[Page]:
    """The WARC's response records that have expectations, in the expectation file's order."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    expected = json.loads(Path(expected_path).read_text(encoding="utf-8"))["pages"]
    by_url: dict[str, Page] = {}
    with open(warc_path, "rb") as f:
        for rec in ArchiveIterator(f, parse_http=True, record_types=WarcRecordType.response):
            url = rec.headers.get("WARC-Target-URI")
            if url not in expected:
                continue
            html, enc = decode_html(rec.reader.read(), rec.http_headers.get("Content-Type") if rec.http_headers else None)
            by_url[url] = Page(url, html, enc, list(expected[url]["must"]), list(expected[url]["must_not"]))
    missing = [u for u in expected if u not in by_url]
    if missing:
        raise ValueError(f"{len(missing)} expected pages not in {warc_path}: {missing[:3]}")
    return [by_url[u] for u in expected]


def score(engine_name: str, extract: Callable[[str, str], str | None], pages: Iterable[Page]) -> Score:
    """Run ``extract(html, url) -> text`` on every page and score it."""
    found = total = absent = total_not = empty = 0
    failures: list[tuple[str, str, str]] = []
    t0 = time.perf_counter()
    outputs = []
    for p in pages:
        outputs.append((p, extract(p.html, p.url) or ""))
    seconds = time.perf_counter() - t0
    for p, text in outputs:
        if not text.strip():
            empty += 1
        for s in p.must:
            total += 1
            if s in text:
                found += 1
            else:
                failures.append((p.url, "missing", s))
        for s in p.must_not:
            total_not += 1
            if s not in text:
                absent += 1
            else:
                failures.append((p.url, "leaked", s))
    return Score(engine_name, found / max(total, 1), absent / max(total_not, 1), found, total, absent, total_not,
                 empty, seconds, failures)

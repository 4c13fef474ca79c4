"""Scoring an HTML extractor on real pages with known must / must-not snippets.

The pages are trafilatura 1.1.0's real-world test cache (87 news, blog, shop and wiki pages, kept as one
WARC whose ``WARC-Target-URI`` is the URL the test suite keys each cached file by, so a page's expectations
are found by its URL); the expectations are the ``'snippet' in result`` / ``'snippet' not in result``
assertions of that release's ``tests/realworld_tests.py::test_extract`` for plain-text output (83 pages,
198 must-appear and 193 must-not-appear snippets; commented-out assertions excluded).

- **recall**    = share of must-appear snippets found in the output (main content kept),
- **precision** = share of must-not-appear snippets absent from the output (boilerplate removed),

both micro-averaged over all snippets of all pages. A page an engine returns nothing for scores every
must-snippet as missing and every must-not snippet as absent.

Pages are read with the project's own WARC reader (``curate.readers``), so they are decoded exactly as a
curation run decodes them (two of the pages are ISO-8859-1 under an HTTP header that claims UTF-8).

Caveat when reading the figures: these pages and snippets are trafilatura's own regression tests, so
trafilatura is scored on pages its rules were tuned to pass.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from curate import json_files


@dataclass
class Page:
    url: str
    html: str
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
        return (f"{self.engine:<34} precision {self.precision:.3f} ({self.must_not_absent}/{self.must_not_total})  "
                f"recall {self.recall:.3f} ({self.must_found}/{self.must_total})  empty pages {self.empty_pages}")


def load_pages(warc_path: str | Path, expected_path: str | Path) -> list[Page]:
    """The WARC's HTML documents that have expectations, in the expectation file's order."""
    from curate.readers import read_file

    expected = json_files.read_json(expected_path)["pages"]
    by_url: dict[str, Page] = {}
    for item in read_file(str(warc_path), "warc"):
        if item[0] != "doc":
            continue
        row = item[1]
        if row["url"] in expected:
            exp = expected[row["url"]]
            by_url[row["url"]] = Page(row["url"], row["text"], list(exp["must"]), list(exp["must_not"]))
    missing = [u for u in expected if u not in by_url]
    if missing:
        raise ValueError(f"{len(missing)} expected pages not in {warc_path}: {missing[:3]}")
    return [by_url[u] for u in expected]


def score(engine_name: str, extract: Callable[[str, str], str | None], pages: Iterable[Page]) -> Score:
    """Run ``extract(html, url) -> text`` on every page and score it."""
    found = total = absent = total_not = empty = 0
    failures: list[tuple[str, str, str]] = []
    t0 = time.perf_counter()
    outputs = [(p, extract(p.html, p.url) or "") for p in pages]
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


def reference_engines() -> dict[str, Callable[[str, str], str]]:
    """The engines compared: trafilatura (defaults), plain resiliparse main-content extraction (no pre-pass,
    no cleanup), Quarry's rules engine (``engine = "resiliparse"``) and its default learned engine."""
    from curate.extract.blocks import extract_blocks
    from curate.extract.engines import extract_trafilatura
    from curate.extract.rules import extract_resiliparse

    def plain_resiliparse(html: str, url: str) -> str:
        from resiliparse.extract.html2text import extract_plain_text

        return extract_plain_text(html, main_content=True)

    return {
        "trafilatura 2.3.1 extract()": lambda html, url: extract_trafilatura(html, url),
        "resiliparse main_content=True": plain_resiliparse,
        "quarry extract (resiliparse+cleanup)": lambda html, url: extract_resiliparse(html, url),
        "quarry extract (blocks, default)": lambda html, url: extract_blocks(html, url),
    }

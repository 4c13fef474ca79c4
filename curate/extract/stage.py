"""``extract``: HTML -> main text.

Rows whose ``content_type`` is ``text/html`` get their ``text`` replaced by the page's main text and
``content_type`` set to ``text/plain``; every other row passes through untouched.

The stage reads each page as the UTF-8 bytes of the Arrow text column (no Python string is made of the
HTML). Every page first loses its scripts, styles, comments, SVG and templates (``strip``); the size limit
``max_html_bytes`` applies to what is left, so real pages of several MB (mostly inline JavaScript and JSON)
extract. Bytes that are not UTF-8 are decoded with replacement characters. Then the engine that
``engine = ...`` names (``engines``: ``blocks``, the learned default; ``resiliparse``, rules;
``trafilatura``) gives the main text. ``model = "path"`` picks another model file for ``blocks`` (default:
``curate/extract/models/extract_blocks.json``, trained by ``curate extractor train``); a missing or
damaged file fails at config time.

Rows set aside (reason codes):

- ``html_too_large``: the HTML, scripts and styles cut out, is larger than ``max_html_bytes`` (UTF-8
  bytes); never parsed.
- ``extract_timeout``: extraction took more than ``timeout_s`` seconds of CPU time (``deadline``).

  For both, the stage's ``counters`` in stats.json sum the sizes of the pages set aside:
  ``<reason>_html_bytes`` (UTF-8 bytes as fetched) and ``<reason>_stripped_bytes`` (scripts, styles and
  comments cut out); divided by the reason's count in ``dropped``, the mean page size.
- ``extract_error``: the extractor raised (one bad page never stops the shard).

  Before any parser sees a page, shapes that cost parsers super-linear time (elements nested more than 256
  deep, more than 16 formatting elements active, more than 256 attributes on one element, or on the
  ``<html>`` / ``<body>`` tags together, which the tree builder merges) are bounded by
  ``shape.bound_shape`` (the text stays; counters ``shape_tags_left_out``, ``shape_attributes_cut``). The
  time limit is a ``BaseException``: no ``except Exception`` on the way (a parser's, an engine's) swallows
  it, and a page whose time ran out is never parsed again.
- ``no_main_text``: fewer than ``min_chars`` characters of main text.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.extract.blocks import warm_blocks
from curate.extract.deadline import CpuDeadline, ExtractTimeout
from curate.extract.engines import ENGINES, engine_function
from curate.extract.shape import bound_shape, warm_shape
from curate.extract.strip import strip_html, strip_utf8
from curate.gc_pause import gc_paused
from curate.schema import CONTENT_TYPE, HTML, PLAIN, TEXT, URL
from curate.stage_watch import at_doc
from curate.stages.base import MapStage, StageResult, split

REASONS = {
    "html_too_large": "HTML larger than max_html_bytes once scripts, styles and comments are cut out; not parsed",
    "extract_timeout": "extraction took more than timeout_s seconds of CPU time",
    "extract_error": "the extractor raised an exception on this page",
    "no_main_text": "less than min_chars characters of main text",
}


MIN_TIMEOUT_S = 0.01  # the shortest per-document limit: the kernel's CPU accounting is in ticks of about this


@dataclass
class Params:
    engine: str = "blocks"             # "blocks" (default, learned), "resiliparse" (rules) or "trafilatura"
    timeout_s: float = 5.0             # CPU seconds per document, at least 0.01; 0 disables the timer
    max_html_bytes: int = 2_000_000    # UTF-8 bytes of HTML once scripts, styles and comments are cut out
    model: str = ""                    # blocks: model file; "" = the shipped curate/extract/models/extract_blocks.json
    min_chars: int = 50                # fewer characters of main text: no_main_text
    cleanup: bool = True               # resiliparse: line-level boilerplate removal after extraction
    # user comment threads under an article: true keeps them, false leaves them out; None (unset): each engine's
    # own default (blocks: out, as its gold sets and FineWeb's extraction; resiliparse, trafilatura: kept)
    comments: bool | None = None

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"engine = {self.engine!r}; allowed: {', '.join(ENGINES)}")
        # nan fails too; the CPU timer cannot take much more than a day's, and rounds to microseconds: a
        # value under one was a timer of 0, which disarms it (no limit at all)
        if not (self.timeout_s == 0 or MIN_TIMEOUT_S <= self.timeout_s <= 86400):
            raise ValueError(f"timeout_s = {self.timeout_s}; CPU seconds per document, 0 (no timer) or between "
                             f"{MIN_TIMEOUT_S} and 86400")
        if self.max_html_bytes <= 0:
            raise ValueError(f"max_html_bytes = {self.max_html_bytes}; must be > 0")
        if self.min_chars < 0:
            raise ValueError(f"min_chars = {self.min_chars}; must be >= 0")
        if self.engine == "blocks":
            from curate.extract.model import cached

            cached(self.model)  # a missing or damaged model fails here, at config time, with what to do



class Extract(MapStage):
    Params = Params

    def warm(self) -> None:
        """Load the model and compile the kernels now: the watched child processes of the chain inherit them."""
        if self.params.engine == "blocks":
            warm_blocks(self.params.model)
        warm_shape()

    def apply(self, table: pa.Table, context=None) -> StageResult:
        p = self.params
        n = table.num_rows
        if n == 0:
            return split(table, self.name, [])
        is_html = pc.fill_null(pc.equal(table.column(CONTENT_TYPE), HTML), False).to_pylist()
        if not any(is_html):
            return split(table, self.name, [None] * n)
        pages, valid = _utf8_rows(table.column(TEXT))
        urls = table.column(URL).to_pylist() if URL in table.column_names else [""] * n
        reasons: list[str | None] = [None] * n
        outs: list[str | None] = [None] * n
        counters: dict[str, int] = {}
        fn = engine_function(p)
        if p.engine == "blocks":
            warm_blocks(p.model)
        warm_shape()
        with CpuDeadline(p.timeout_s) as deadline, gc_paused():  # the loop leaves no cycles
            for i in range(n):
                if not is_html[i]:
                    continue
                at_doc(i)  # the chain's per-document limit, beyond this stage's own timeout_s
                raw = pages[i]
                try:
                    html = deadline.call(_strip, raw, valid[i])
                except ExtractTimeout:
                    reasons[i] = "extract_timeout"
                    _count_size(counters, "extract_timeout", raw, None)
                    continue
                if len(html) > p.max_html_bytes:
                    reasons[i] = "html_too_large"
                    _count_size(counters, "html_too_large", raw, html)
                    continue
                html, left_out, cut = bound_shape(html)  # linear; what the parsers would take super-linear time on
                if left_out or cut:
                    counters["shape_tags_left_out"] = counters.get("shape_tags_left_out", 0) + left_out
                    counters["shape_attributes_cut"] = counters.get("shape_attributes_cut", 0) + cut
                try:
                    out = deadline.call(fn, html, urls[i] or "")
                except ExtractTimeout:
                    reasons[i] = "extract_timeout"
                    _count_size(counters, "extract_timeout", raw, html)
                    continue
                except Exception:
                    reasons[i] = "extract_error"
                    continue
                out = (out or "").strip()
                if len(out) < max(p.min_chars, 1):
                    reasons[i] = "no_main_text"
                    continue
                outs[i] = out
        # the extracted rows get their text and text/plain; every other row keeps its own
        text_field = table.schema.field(TEXT)
        ctype_field = table.schema.field(CONTENT_TYPE)
        texts = pc.coalesce(pa.array(outs, text_field.type), table.column(TEXT))
        done = pa.array([o is not None for o in outs])
        ctypes = pc.if_else(done, pa.scalar(PLAIN, ctype_field.type), table.column(CONTENT_TYPE))
        table = table.set_column(table.column_names.index(TEXT), text_field, texts)
        table = table.set_column(table.column_names.index(CONTENT_TYPE), ctype_field, ctypes)
        result = split(table, self.name, reasons)
        result.counters = counters
        return result


_EMPTY = np.frombuffer(b"", dtype=np.uint8)  # read-only, as every page's view (one compiled kernel for both)


def _utf8_rows(column: pa.ChunkedArray) -> tuple[list, list[bool]]:
    """Per row of a text column: its UTF-8 bytes as a uint8 array (a view of Arrow's buffer, no copy; empty
    for a null) and whether they are valid UTF-8 (Arrow validates each chunk)."""
    pages: list = []
    valid: list[bool] = []
    for chunk in column.chunks:
        m = len(chunk)
        if m == 0:
            continue
        if pa.types.is_large_string(chunk.type):
            off_type = np.int64
        elif pa.types.is_string(chunk.type):
            off_type = np.int32
        else:  # another layout (string views, ...): through Python strings
            for s in chunk.to_pylist():
                pages.append(_EMPTY if s is None else np.frombuffer(s.encode("utf-8", "replace"), dtype=np.uint8))
                valid.append(True)
            continue
        try:
            chunk.validate(full=True)
            ok = True
        except pa.ArrowInvalid:
            ok = False
        _, off_buf, data_buf = chunk.buffers()
        offsets = np.frombuffer(off_buf, dtype=off_type)[chunk.offset: chunk.offset + m + 1]
        data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else _EMPTY
        data.flags.writeable = False  # as np.frombuffer(bytes): numba compiles the kernels once
        null = chunk.is_null().to_numpy(zero_copy_only=False) if chunk.null_count else None
        for k in range(m):
            pages.append(_EMPTY if null is not None and null[k] else data[offsets[k]:offsets[k + 1]])
        valid += [ok] * m
    return pages, valid


def _strip(raw: np.ndarray, valid: bool) -> bytes:
    """The page's UTF-8 bytes without scripts, styles and comments (``strip.strip_utf8``; the ``str``
    regular expression where that one is unsure; bytes that are not UTF-8 are decoded with replacement
    characters first)."""
    out = strip_utf8(raw, valid)
    if out is None:
        out = strip_html(raw.tobytes().decode("utf-8", "replace")).encode("utf-8")
    return out


def _count_size(counters: dict, reason: str, raw, stripped: bytes | None) -> None:
    """A page a limit set aside: its size goes into the stage's counters in stats.json, summed over the pages
    of that reason (``<reason>_html_bytes``: the page as fetched, UTF-8 bytes; ``<reason>_stripped_bytes``:
    without scripts, styles and comments, what ``max_html_bytes`` is compared to; absent when stripping
    itself ran out of time). Divided by ``dropped[reason]``: the mean size."""
    key = reason + "_html_bytes"
    counters[key] = counters.get(key, 0) + len(raw)
    if stripped is not None:
        key = reason + "_stripped_bytes"
        counters[key] = counters.get(key, 0) + len(stripped)

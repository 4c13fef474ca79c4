"""``extract``: HTML -> main text.

Rows whose ``content_type`` is ``text/html`` get their ``text`` replaced by the page's main text and
``content_type`` set to ``text/plain``; every other row passes through untouched.

The stage reads each page as the UTF-8 bytes of the Arrow text column (no Python string is made of the
HTML). Every page first loses its scripts, styles, comments, SVG and templates (``extract_features.strip_utf8``,
one compiled scan over the bytes that gives the same bytes as the regular expression ``strip_html``, which
takes over where a non-ASCII character could decide); the size limit ``max_html_bytes`` applies to what is
left, so real pages of several MB (mostly inline JavaScript and JSON) extract. Bytes that are not UTF-8
are decoded with replacement characters. Engines (``engine = ...``):

- ``blocks`` (default): the page is cut into blocks (paragraphs, headings, list items, table cells, ...) on
  lexbor's DOM (``extract_features``); a small learned classifier (``extract_model``: per-block features,
  then context layers over the neighbouring blocks and the DOM containers, trained by
  ``python -m curate.stages.extract_train`` on WCXB's development split with 5-fold cross-validation)
  keeps the main-content blocks, one per line, in page order. Language-neutral features (lengths, link
  density, punctuation of Latin, CJK, Arabic and Devanagari scripts, tags, class/id words), so pages in
  any script extract. The model ships as JSON in ``curate/stages/models/``; ``model = "path"`` picks another
  one; a missing or damaged file fails at config time. Figures (``benchmarks/extract_quality.py``, all
  1,497 WCXB development pages, word F1): 5-fold CV 0.860 (in-sample 0.900), trafilatura 2.3.1 0.818,
  plain resiliparse 0.776; per type CV / trafilatura: article 0.937 / 0.929, collection 0.676 / 0.581,
  documentation 0.921 / 0.918, forum 0.809 / 0.696, listing 0.703 / 0.577, product 0.674 / 0.624,
  service 0.850 / 0.768. Speed (``--speed-only``, 150 pages, side by side, a quiet 2-core machine, three
  runs of 5 rounds): 134-159 docs/s per core, 15.1x / 12.8x / 13.3x trafilatura (single rounds 10.1-18.0x;
  resiliparse alone: 15-18x). The DOM walk is one compiled scan of lexbor's serialized body
  (``extract_dom``), with ``extract_features.walk`` as its definition and fallback.
- ``resiliparse``: the rules engine: resiliparse ``extract_plain_text(main_content=True, post_meta=False)``
  on a DOM that a short pre-pass adjusted (embedded tweets and text-heavy blocks with "share"/"social"
  class names kept; author boxes and comment forms skipped; comment threads kept even when resiliparse
  would restrict extraction to an article container that does not hold them), falling back to the whole
  page when the main-content rules leave under 200 characters, then the line-level cleanup of
  ``curate/stages/boilerplate.py``. ``cleanup = false`` skips that cleanup.
- ``trafilatura``: ``trafilatura.extract(html, url=...)`` with its defaults (comments and tables included,
  fallback extractors on), the reference the other engines are measured against.

Rows set aside (reason codes):

- ``html_too_large``: the HTML, scripts and styles cut out, is larger than ``max_html_bytes`` (UTF-8
  bytes); never parsed.
- ``extract_timeout``: extraction took more than ``timeout_s`` seconds of CPU time.

  For both, the stage's ``counters`` in stats.json sum the sizes of the pages set aside:
  ``<reason>_html_bytes`` (UTF-8 bytes as fetched) and ``<reason>_stripped_bytes`` (scripts, styles and
  comments cut out); divided by the reason's count in ``dropped``, the mean page size.
- ``extract_error``: the extractor raised (one bad page never stops the shard).
- ``no_main_text``: fewer than ``min_chars`` characters of main text.

**What the time limit enforces** (all engines; for ``blocks``: lexbor's parser is C, and a page whose
``<div>``/``<span>`` tags nest more than 200 deep, where lexbor's tree building turns quadratic, goes to the
rules engine's linear path instead; the block walk reads anything deeper than 200 elements as plain text).
 The limit is CPU time, not wall time: a ``SIGPROF`` interval timer (``ITIMER_PROF``: the
process's CPU seconds) armed around each document, so a page gets the same verdict on a busy machine as on
an idle one and a rerun sets aside the same pages (a wall-clock limit set pages aside when other jobs
shared the cores). It works on POSIX, in the main thread of the process: the local executor's workers and ``workers = 1`` both run stages in
their main thread). Python code is interrupted as soon as the timer fires: that covers trafilatura
(pure Python over lxml) and the pre-pass and line cleanup of the resiliparse engine. A signal cannot
interrupt a running C call, and resiliparse's parser and extractor are C (they release the GIL), so for
that part the handler runs the moment the C call returns: the document is still set aside as
``extract_timeout`` but the time was spent. What bounds the C part is ``max_html_bytes`` together with a
depth guard: lexbor's parse and resiliparse's whole-page extraction are linear in the input, but its
main-content rules cost O(elements x depth), so a page with an element more than 100 levels deep (real
pages: 10-40) gets the linear whole-page extraction. Measured here: a 2 MB page nested 100-150 deep
throughout takes 0.4-0.5 s of C time; 150,000 nested <div>s go through in well under a second instead
of minutes. Off the main thread (or without ``setitimer``) only the size cap and the depth guard apply.
"""
from __future__ import annotations

import re
import signal
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.schema import CONTENT_TYPE, HTML, PLAIN, TEXT, URL
from curate.stages.base import MapStage, StageResult, split
from curate.stages.extract_features import strip_html

REASONS = {
    "html_too_large": "HTML larger than max_html_bytes once scripts, styles and comments are cut out; not parsed",
    "extract_timeout": "extraction took more than timeout_s seconds of CPU time",
    "extract_error": "the extractor raised an exception on this page",
    "no_main_text": "less than min_chars characters of main text",
}

ENGINES = ("blocks", "resiliparse", "trafilatura")


@dataclass
class Params:
    engine: str = "blocks"             # "blocks" (default, learned), "resiliparse" (rules) or "trafilatura"
    timeout_s: float = 5.0             # CPU seconds per document; 0 disables the timer
    max_html_bytes: int = 2_000_000    # UTF-8 bytes of HTML once scripts, styles and comments are cut out
    model: str = ""                    # blocks: model file; "" = the shipped curate/stages/models/extract_blocks.json
    min_chars: int = 50                # fewer characters of main text: no_main_text
    cleanup: bool = True               # resiliparse: line-level boilerplate removal after extraction
    comments: bool = True              # keep user comment threads (trafilatura's default too)

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"engine = {self.engine!r}; allowed: {', '.join(ENGINES)}")
        if self.timeout_s < 0:
            raise ValueError(f"timeout_s = {self.timeout_s}; must be >= 0")
        if self.max_html_bytes <= 0:
            raise ValueError(f"max_html_bytes = {self.max_html_bytes}; must be > 0")
        if self.min_chars < 0:
            raise ValueError(f"min_chars = {self.min_chars}; must be >= 0")
        if self.engine == "blocks":
            from curate.stages.extract_model import cached

            cached(self.model)  # a missing or damaged model fails here, at config time, with what to do


# ------------------------------------------------------------------------------------------ engines

# The pre-pass. Every selector query is a walk over the whole DOM, so the pre-pass makes one query for all
# its candidates, and plain string tests on their class and id attributes then decide:
#
# - Embedded posts quoted in an article (tweets, Instagram or Mastodon posts): resiliparse drops them for
#   their "twitter"/"social" class names; they are part of the article. Kept.
# - Class names resiliparse reads as share bars / social widgets (its own class regex, _SOCIAL_CLASS, below).
#   A share bar holds a few links; such an element around a run of paragraphs is a layout wrapper of the
#   article itself. Kept.
# - resiliparse 2.0 restricts main-content extraction to the one element with a class in _ROOT_CLASSES
#   (or role="main") when exactly one has; comment threads outside that element are then lost. When there
#   are such threads, that element loses its root class, and extraction runs on the whole body with
#   resiliparse's main-content rules (as on pages without such an element).
_EMBED_KEYS = ("tweet", "twitter", "instagram", "mastodon")
_SOCIAL_CLASS = re.compile(r"(?:^|\s|__|--|mobile-|desktop-|l-|m-|c-)(?:social(?:media)?|share(?:daddy)?|sharing)"
                           r"(?:[_-]?(?:post|links?|section|icons?|btn|buttons?|target))?(?:$|[\s_-])", re.I)
_PARAGRAPH_RUN = "p ~ p ~ p"  # three sibling paragraphs somewhere inside
_ROOT_CLASSES = {"article-body", "articleBody", "contentBody", "article-text", "main-content", "postcontent",
                 "post-content", "single-post"}
_ROOT_SELECTOR = ", ".join(["." + c for c in sorted(_ROOT_CLASSES)] + ['[role="main"]'])
_COMMENT_CLASSES = {"comments", "comment-list", "commentlist", "comments-area", "comment-section", "comments-container"}
_COMMENT_IDS = {"comments", "comments-section", "disqus_thread"}
_COMMENTS_SELECTOR = ", ".join(["." + c for c in sorted(_COMMENT_CLASSES)] + ["#" + i for i in sorted(_COMMENT_IDS)])
_PREPASS_SELECTOR = "blockquote[class], [class*=shar], [class*=social]"
# Author boxes (photo, name and a short bio beside the post) and comment forms (prompts, field labels,
# privacy notes) are never content: skipped by the extractor itself (its skip query is one walk anyway).
_SKIP_SELECTORS = ["[class*=author-box]", "[id*=author-box]", "[class*=authorbox]", "[class*=author_box]",
                   "[class*=author-bio]", "[id*=author-bio]", "[class*=author-desc]", "[id*=author-desc]",
                   "[class*=about-author]", "[id*=about-author]", "[class*=author-info]", "[id*=author-info]",
                   "#respond", ".comment-respond", "[class*=comment-form]", "[id*=comment-form]"]
# Below this many characters of main content, fall back to the whole page (then the line cleanup).
_FALLBACK_BELOW_CHARS = 200
# resiliparse's main-content rules cost O(elements x DOM depth) (each element's depth and link density are
# computed by walking up / over its subtree), in C where no signal can stop them: 16,000 nested <div>s
# (80 kB of HTML) take 5 s, 150,000 take minutes. Real pages are 10-40 elements deep. A page with an
# element more than _MAX_DEPTH deep gets the linear whole-page extraction instead (then the line cleanup).
# The check is one selector query: an element with _MAX_DEPTH element ancestors.
_MAX_DEPTH = 100
_DEEP_SELECTOR = "* > " * _MAX_DEPTH + "*"


def _items(node_list):
    # item(i), not iteration: iterating an ElementNodeList is quadratic in resiliparse 2.0.1.
    return [node_list.item(i) for i in range(len(node_list))]


def _prepass(body, find_threads: bool):
    """Adjust the DOM in place; return (article roots, comment threads) when ``find_threads``."""
    selector = _PREPASS_SELECTOR + ", " + _ROOT_SELECTOR + ", " + _COMMENTS_SELECTOR if find_threads else _PREPASS_SELECTOR
    roots, threads = [], []
    for node in _items(body.query_selector_all(selector)):
        cls = node.getattr("class") or ""
        if node.tag == "blockquote" and any(k in cls for k in _EMBED_KEYS):
            node.setattr("class", "embedded-post")
            continue
        if find_threads:
            tokens = set(cls.split())
            if tokens & _ROOT_CLASSES or node.getattr("role") == "main":
                roots.append(node)
            if tokens & _COMMENT_CLASSES or node.getattr("id") in _COMMENT_IDS:
                threads.append(node)
        if ("shar" in cls or "social" in cls) and _SOCIAL_CLASS.search(cls) \
                and node.query_selector(_PARAGRAPH_RUN) is not None:
            node.setattr("class", "content-wrapper")
    return roots, threads


def extract_resiliparse(html: str, url: str = "", cleanup: bool = True, comments: bool = True) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    body = tree.body
    if body is None:
        return ""
    if body.query_selector(_DEEP_SELECTOR) is not None:
        text = extract_plain_text(tree, main_content=False, alt_texts=False, skip_elements=_SKIP_SELECTORS)
        if cleanup:
            from curate.stages.boilerplate import clean

            text = clean(text)
        return text
    find_threads = comments and ("comment" in html or "disqus" in html)
    roots, threads = _prepass(body, find_threads)
    if len(roots) == 1 and any(not roots[0].contains(t) and not t.contains(roots[0]) for t in threads):
        root = roots[0]
        root.setattr("class", " ".join(c for c in (root.getattr("class") or "").split() if c not in _ROOT_CLASSES))
        if root.getattr("role") == "main":
            root.delattr("role")
    text = extract_plain_text(tree, main_content=True, alt_texts=False, comments=comments, post_meta=False,
                              skip_elements=_SKIP_SELECTORS)
    if len(text) < _FALLBACK_BELOW_CHARS:
        # The main-content rules removed (nearly) everything: some layouts put the article inside an
        # element they read as chrome. Take the whole page and let the line cleanup remove the chrome.
        full = extract_plain_text(tree, main_content=False, alt_texts=False, skip_elements=_SKIP_SELECTORS)
        if len(full) > len(text):
            text = full
    if cleanup:
        from curate.stages.boilerplate import clean

        text = clean(text)
    return text


_WORDS = re.compile(r"\w+")
_FALLBACK_MIN = 0.1


def assemble(texts: list[str], tags: list[str], prob, threshold: float) -> str:
    """The page's text from its blocks: those with ``prob >= threshold``, one per line, in page order.
    A block repeated right after itself is written once, and so is a block of three words or more (not a
    table cell) whose text was already written: pages often hold their content twice (mobile and desktop
    layouts, a post quoted in a reply, a teaser above the full text). On WCXB's development split this
    rule lifts the cross-validated F1 by 0.006 (forums by 0.03).

    When no block reaches the threshold but the best one scores at least ``_FALLBACK_MIN``, the blocks
    scoring at least half the best are kept (pages whose best block scores lower are left empty: on
    WCXB they are mostly pages without main text)."""
    import numpy as np

    prob = np.asarray(prob, dtype=np.float32)
    if prob.size:
        best = float(prob.max())
        if _FALLBACK_MIN <= best < threshold:
            threshold = best / 2
    out: list[str] = []
    seen: set[str] = set()
    for t, keep, tag in zip(texts, (prob >= threshold).tolist(), tags):
        if not keep or (out and out[-1] == t):
            continue
        if t in seen and tag not in ("td", "th") and len(_WORDS.findall(t)) >= 3:
            continue
        seen.add(t)
        out.append(t)
    return "\n".join(out)


def extract_trafilatura(html: str, url: str = "", comments: bool = True) -> str:
    import trafilatura

    return trafilatura.extract(html, url=url or None, include_comments=comments) or ""


def extract_blocks(html: str, url: str = "", model: str = "", stripped: bool = False) -> str:
    """The learned engine: blocks of the page (``extract_features``), each kept when the block classifier
    (``extract_model``) gives it at least the model's threshold. ``stripped``: ``html`` already went
    through ``extract_features.strip_html``."""
    from curate.stages import extract_features as F

    if not stripped:
        html = F.strip_html(html)
    data = F.utf8(html)
    if data is not None:
        return extract_blocks_utf8(data, url, model)
    # lone surrogates (selectolax drops them when it encodes the text itself)
    if F.too_deep(html, F.MAX_DEPTH):
        return extract_resiliparse(html, url)
    return _assemble_blocks(F.features(html, stripped=True), html, url, model)


def extract_blocks_utf8(data: bytes, url: str = "", model: str = "") -> str:
    """``extract_blocks`` of a page given as the UTF-8 bytes of its stripped HTML (what the stage hands it:
    the bytes of the Arrow column, stripped by ``extract_features.strip_utf8``)."""
    from curate.stages import extract_features as F

    if F.too_deep_utf8(data, F.MAX_DEPTH):
        # the parser would take O(elements x depth): the rules engine's linear whole-page path instead
        return extract_resiliparse(data.decode("utf-8"), url)
    return _assemble_blocks(F.features(None, stripped=True, data=data), data, url, model)


def _assemble_blocks(b, html, url: str, model: str) -> str:
    from curate.stages.extract_model import cached

    if b is None:
        # no visible block (the whole page hidden, as in some script-rendered pages that stream their
        # content into a hidden element): the rules engine, which reads hidden elements too
        return extract_resiliparse(html if isinstance(html, str) else html.decode("utf-8"), url)
    m = cached(model)
    return assemble(b.texts, b.tags, m.predict(b.features, b.groups), m.threshold)


_WARM: set[str] = set()
_WARM_PAGE = ("<html><head><title>Warm up</title></head><body><nav><a href='/'>Home</a></nav><div class='content'>"
              "<h1>Warm up</h1><p>One paragraph of text, long enough to be a block.</p></div></body></html>")


def warm_blocks(model: str = "") -> None:
    """Load the model and compile the blocks engine's numba kernels (or load them from numba's cache), once
    per process, before any per-document time limit is armed: a first compile takes about 35 s on a 2-core
    machine (the compiled DOM walk half of it; about 1 s once numba's cache holds them), which would
    otherwise set the first page aside as ``extract_timeout``."""
    if model not in _WARM:
        from curate.stages.extract_features import strip_utf8

        extract_blocks_utf8(strip_utf8(_WARM_PAGE.encode()), model=model)
        _WARM.add(model)


def engine_function(params: Params) -> Callable[[bytes, str], str]:
    """The engine as the stage calls it: on the UTF-8 bytes of the stripped page."""
    if params.engine == "blocks":
        return lambda data, url: extract_blocks_utf8(data, url, model=params.model)
    if params.engine == "trafilatura":
        return lambda data, url: extract_trafilatura(data.decode("utf-8"), url, comments=params.comments)
    return lambda data, url: extract_resiliparse(data.decode("utf-8"), url, cleanup=params.cleanup,
                                                 comments=params.comments)


# ----------------------------------------------------------------------------------------- timeout

class ExtractTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise ExtractTimeout()


class _Deadline:
    """Arms a CPU-time interval timer (``ITIMER_PROF``, signal ``SIGPROF``) per call when that is possible
    (POSIX, main thread)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.enabled = (seconds > 0 and hasattr(signal, "setitimer")
                        and threading.current_thread() is threading.main_thread())
        self._old = None

    def __enter__(self):
        if self.enabled:
            self._old = signal.signal(signal.SIGPROF, _on_alarm)
        return self

    def __exit__(self, *exc):
        if self.enabled:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, self._old)
        return False

    def call(self, fn, *args):
        if not self.enabled:
            return fn(*args)
        try:
            signal.setitimer(signal.ITIMER_PROF, self.seconds)
            return fn(*args)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)


# ------------------------------------------------------------------------------------------- stage

class Extract(MapStage):
    Params = Params

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
        with _Deadline(p.timeout_s) as deadline:
            for i in range(n):
                if not is_html[i]:
                    continue
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
    """The page's UTF-8 bytes without scripts, styles and comments (``extract_features.strip_utf8``; the
    ``str`` regular expression where that one is unsure; bytes that are not UTF-8 are decoded with
    replacement characters first)."""
    from curate.stages.extract_features import strip_utf8

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

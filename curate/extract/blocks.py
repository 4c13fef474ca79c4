"""The ``blocks`` engine (the default): the page cut into blocks on lexbor's DOM (``features``), each block
kept when the learned classifier (``model``) gives it at least the model's threshold, one per line, in
page order. Pages nested too deep for lexbor, or with no visible block, go to the rules engine (``rules``)."""
from __future__ import annotations

import re

import numpy as np

from curate.extract.depth import too_deep, too_deep_utf8
from curate.extract.dom_walk import MAX_DEPTH
from curate.extract.features import features
from curate.extract.model import cached
from curate.extract.rules import extract_resiliparse
from curate.extract.strip import strip_html, strip_utf8, utf8

_WORDS = re.compile(r"\w+")
_FALLBACK_MIN = 0.1


def assemble(texts: list[str], tags: list[str], prob, threshold: float) -> str:
    """The page's text from its blocks: those with ``prob >= threshold``, one per line, in page order.
    A block repeated right after itself is written once, and so is a block of three words or more (not a
    table cell) whose text was already written: pages often hold their content twice (mobile and desktop
    layouts, a post quoted in a reply, a teaser above the full text).

    When no block reaches the threshold but the best one scores at least ``_FALLBACK_MIN``, the blocks
    scoring at least half the best are kept (pages whose best block scores lower are left empty: on
    WCXB they are mostly pages without main text)."""
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


def extract_blocks(html: str, url: str = "", model: str = "", stripped: bool = False) -> str:
    """The learned engine on a page given as ``str``: blocks of the page (``features``), each kept when the
    block classifier (``model``) gives it at least the model's threshold. ``stripped``: ``html`` already went
    through ``strip.strip_html``."""
    if not stripped:
        html = strip_html(html)
    data = utf8(html)
    if data is not None:
        return extract_blocks_utf8(data, url, model)
    # lone surrogates (selectolax drops them when it encodes the text itself)
    if too_deep(html, MAX_DEPTH):
        return extract_resiliparse(html, url)
    return _assemble_blocks(features(html, stripped=True), html, url, model)


def extract_blocks_utf8(data: bytes, url: str = "", model: str = "") -> str:
    """``extract_blocks`` of a page given as the UTF-8 bytes of its stripped HTML (what the stage hands it:
    the bytes of the Arrow column, stripped by ``strip.strip_utf8``)."""
    if too_deep_utf8(data, MAX_DEPTH):
        # the parser would take O(elements x depth): the rules engine's linear whole-page path instead
        return extract_resiliparse(data.decode("utf-8"), url)
    return _assemble_blocks(features(None, stripped=True, data=data), data, url, model)


def _assemble_blocks(b, html, url: str, model: str) -> str:
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
    per process, before any per-document time limit is armed: a first compile takes tens of seconds (the
    compiled DOM scan about half of it; about a second once numba's cache holds them), which would otherwise
    set the first page aside as ``extract_timeout``."""
    if model not in _WARM:
        extract_blocks_utf8(strip_utf8(_WARM_PAGE.encode()), model=model)
        _WARM.add(model)


"""The ``blocks`` engine (the default): the page cut into blocks on lexbor's DOM (``features``), each block
kept when the learned classifier (``model``) gives it at least the model's threshold, one per line, in
page order (a data table's row on one line: ``tables``), after readability-style rules on the classifier's
output (``page_chrome``: blocks inside nav, footer, aside and a header outside article and main;
``page_forms``: a form after the page's text;
``main_container``: unsure blocks near the page's article; ``link_lists``: link lists on a prose page;
``region.main_region``: prose outside the page's main region; ``region.after_article``: teasers after a short
article) and two on the blocks' words (``interface``: advertisement labels and action lines, a ``noscript``'s
JavaScript notice). A page whose text is inside ``noscript`` elements gets that text (``noscript_text``). Pages
nested too deep for lexbor, with
no visible block or more blocks than any real page (``features.MAX_BLOCKS``), or of which the classifier
keeps fewer than ``MIN_WORDS`` words go to the rules engine
(``rules``; its text is taken where it holds more words): on a page unlike those it learned (a short page,
a synthetic one) keeping nothing, or a label and a date, is the classifier's least reliable answer. Hidden
elements are read (and marked, the ``in_hidden`` feature) only inside a tab or accordion widget, whose other
panels are content (``dom_walk``)."""
from __future__ import annotations

import re
from itertools import repeat

import numpy as np

from curate.extract.boilerplate import normalize_chars
from curate.extract.depth import too_deep, too_deep_utf8
from curate.extract.dom_walk import MAX_DEPTH
from curate.extract.features import chrome_blocks, dense_words, features, link_columns, place_columns
from curate.extract.interface import interface_labels, script_notices
from curate.extract.model import cached
from curate.extract.region import PROSE_LINKS, text_sizes, after_article, last_descendants, main_region, next_to
from curate.extract.rules import extract_resiliparse
from curate.extract.strip import strip_html, strip_utf8, utf8
from curate.extract.tables import ROW_SEPARATOR, table_rows

_WORDS = re.compile(r"\w+")
# kept text with fewer words than this goes to the rules engine. Chosen on the cross-validated predictions of
# both sets, three training seeds (docs/benchmarks.md): word F1 +0.004 on WCXB (+0.002 of it from pages
# where no block reached the threshold, which kept the blocks scoring half the best one before), Readability
# unchanged; 20 words and more began to cost Readability's pages in other languages.
MIN_WORDS = 10


def words(text: str) -> float:
    """Words of ``text`` in any script: runs of word characters (``\\w+``), and a character of a script written
    without spaces as the share of a word it stands for (``features.dense_words``).
    Counted up to ``MIN_WORDS`` Latin words' worth of text; longer texts count as ``MIN_WORDS``."""
    if len(text) > 60 * MIN_WORDS:
        return float(MIN_WORDS)
    return len(_WORDS.findall(text)) + dense_words(text)


def assemble(texts: list[str], tags: list[str], prob, threshold: float, parents=None, rows=None) -> str:
    """The page's text from its blocks: those with ``prob >= threshold``, one per line, in page order.
    A block repeated right after itself is written once, and so is a block of three words or more (not a
    table cell) whose text was already written: pages often hold their content twice (mobile and desktop
    layouts, a post quoted in a reply, a teaser above the full text). ``parents`` (the element above each
    block's owner, ``Blocks.groups[:, 0]``): a repeat under the same parent as its earlier copy is the
    text saying the same thing twice (a refrain, a repeated line of a poem or a list), and is kept.
    ``rows`` (``tables.table_rows``): per block, the table row whose kept cells share a line, joined by
    ``tables.ROW_SEPARATOR`` (" | "), or -1."""
    prob = np.asarray(prob, dtype=np.float32)
    parents = range(len(texts)) if parents is None else np.asarray(parents).tolist()
    rows = repeat(-1) if rows is None else np.asarray(rows).tolist()
    out: list[str] = []
    seen: dict[str, set] = {}  # text written (line breaks as spaces) -> the parents it was written under
    last = None
    last_row = -1
    for t, keep, tag, par, row in zip(texts, (prob >= threshold).tolist(), tags, parents, rows):
        if not keep:
            continue
        key = t.replace("\n", " ") if "\n" in t else t  # one copy laid out with <br>, the other not: the same
        where = seen.get(key)
        if where is not None and par not in where and (
                last == key or (tag not in ("td", "th") and len(_WORDS.findall(t)) >= 3)):
            continue
        seen.setdefault(key, set()).add(par)
        if row >= 0 and row == last_row:  # the next cell of the row being written
            out[-1] += ROW_SEPARATOR + t
        else:
            out.append(t)
        last = key
        last_row = row
    return "\n".join(out)


_MAIN_LEVEL = 2      # column of ``Blocks.groups``: the element 4 levels above a block's owner
_REGION_LEVEL = 3    # ... and 8 levels above it
_UNSURE = 1 / 3      # share of the threshold above which a block of the main container is kept
_UNSURE_WORDS = 10   # ... when it holds at least this many words
_SURE = 1.5          # times the threshold below which a kept block outside the main region is dropped
_SURE_CHARS = 25     # ... when it holds at least this many characters (a headline, a teaser)


def main_container(texts: list[str], groups, prob, threshold: float, size=None) -> np.ndarray:
    """``prob`` adjusted where the classifier is unsure, readability-style, around the page's article: the
    element holding most of the kept characters. A paragraph (``_UNSURE_WORDS`` words or more) under the
    same element 4 levels up as most kept text is kept when the classifier gives it at least ``_UNSURE``
    of the threshold; a kept block of ``_SURE_CHARS`` characters or more outside the element 8 levels up
    that holds most kept text is dropped when it scores below ``_SURE`` times the threshold (teasers and
    related headlines kept by a narrow margin; short product facts and labels are left as they are), unless
    it sits right next to that text (``region.next_to``: the nearest kept block on either side of it, at most
    one block between; a credit line, a standfirst set in a container of its own: same folds and three
    training seeds, WCXB +0.0005 / +0.0006 / +0.0005, Readability +0.0003 / +0.0004 / +0.0004, trafilatura's
    regression pages one must snippet more and one must-not snippet more).
    Measured side by side (``benchmarks/extract_quality.py``): word F1 +0.003 on WCXB's cross-validated
    predictions, +0.006 on Readability's pages (+0.010 on those not in English)."""
    prob = np.asarray(prob, dtype=np.float32)
    keep = prob >= threshold
    if not keep.any():
        return prob
    groups = np.asarray(groups)
    size = text_sizes(texts) if size is None else size
    chars = size * keep
    prob = prob.copy()
    unsure = np.flatnonzero(_in_largest(groups[:, _MAIN_LEVEL], chars) & ~keep & (prob >= threshold * _UNSURE))
    lift = [i for i in unsure.tolist() if len(_WORDS.findall(texts[i])) >= _UNSURE_WORDS]
    prob[lift] = threshold
    in_main = _in_largest(groups[:, _REGION_LEVEL], chars)
    drop = ~in_main & keep & (prob < threshold * _SURE) & (size >= _SURE_CHARS)
    if drop.any():  # a block right next to the article's kept text stays (a credit line, a lead): next_to
        drop &= ~next_to(keep, in_main)
    prob[drop] = 0.0
    return prob


# on a prose page (``region.PROSE_LINKS``):
_LINK_ONLY = 0.8     # a kept block with at least this share of link text, in a list ...
_LINK_LIST = 0.8     # ... whose element (the block's parent) holds at least this share, is dropped


def link_lists(texts: list[str], links, prob, threshold: float, size=None) -> np.ndarray:
    """``prob`` with the link lists of a prose page dropped: when less than ``PROSE_LINKS`` of the kept
    characters are link text (an article, a post: its content is prose), a kept block that is itself link
    text (``_LINK_ONLY``) in an element that is a list of links (``_LINK_LIST``: the parent's characters) is
    related-article, "read more" or navigation links, in whatever language, wherever it sits. Pages whose
    content is links (listings, collections) keep more link text than that, and the rule does not fire.
    ``links``: per block, the share of its characters inside links and that of its parent element (the
    ``link_density`` and ``up1_link_density`` feature columns, ``link_columns``). Chosen on the CV
    predictions of both sets (docs/benchmarks.md): word F1 +0.001 on WCXB, +0.003 on Readability's pages
    (+0.01 on those in other languages)."""
    prob = np.asarray(prob, dtype=np.float32)
    keep = prob >= threshold
    size = text_sizes(texts) if size is None else size
    kept = float(size[keep].sum())
    links = np.asarray(links, dtype=np.float64)
    if not kept or float((size * links[:, 0])[keep].sum()) >= PROSE_LINKS * kept:
        return prob
    drop = keep & (links[:, 0] >= _LINK_ONLY) & (links[:, 1] >= _LINK_LIST)
    if not drop.any():
        return prob
    prob = prob.copy()
    prob[drop] = 0.0
    return prob


def page_chrome(chrome, prob) -> np.ndarray:
    """``prob`` with the blocks inside the page's chrome, its ``nav``, ``footer`` and ``aside`` elements and
    its banner (``features.chrome_blocks``), set to 0. In both gold sets 0.5-5% of such blocks are content, and the
    classifier learned them on pages of hundreds of blocks: on a small plain page (a dozen blocks) it kept a
    menu and a copyright line at 0.65-0.99. Dropped whatever the classifier says: sparing the blocks it is
    sure of (0.9, 0.95) scored the same on both sets, and on a page whose article sits inside an unclosed
    ``footer`` or ``nav`` it kept a few of the article's paragraphs, where dropping them all sends the page to
    the rules engine (``MIN_WORDS``), which finds the article. Chosen on the cross-validated predictions of
    both sets and three training seeds (docs/benchmarks.md)."""
    prob = np.asarray(prob, dtype=np.float32)
    chrome = np.asarray(chrome, dtype=bool)
    if not chrome.any():
        return prob
    prob = prob.copy()
    prob[chrome] = 0.0
    return prob


FORM_SHARE = 0.5  # forms holding at least this share of the kept text are the page's own wrapper


def page_forms(texts, in_form, prob, threshold: float, size=None) -> np.ndarray:
    """``prob`` with the kept blocks inside ``form`` elements after the page's last kept block outside them set
    to 0, where they hold under ``FORM_SHARE`` of its kept characters: a comment form's labels and notes
    ("Name *", "E-Mail", "Your email address will not be published"), a newsletter sign-up, a question box under
    an article. Forms that hold most of the kept text (an ASP.NET page wrapped whole in ``<form
    id="aspnetForm">``) or that kept text follows (a forum whose posts sit in a moderation form) are left as
    they are: dropping every form under the share cost a forum page its posts. On the cross-validated
    predictions of both gold sets (two training seeds) it changes 4-5 WCXB pages, each for the better
    (docs/benchmarks.md)."""
    prob = np.asarray(prob, dtype=np.float32)
    in_form = np.asarray(in_form, dtype=bool)
    kept = prob >= threshold
    inside = kept & in_form
    if not inside.any():
        return prob
    outside = np.flatnonzero(kept & ~in_form)
    if len(outside):
        inside[:outside[-1] + 1] = False
    size = text_sizes(texts) if size is None else size
    if not inside.any() or size[inside].sum() >= FORM_SHARE * size[kept].sum():
        return prob
    prob = prob.copy()
    prob[inside] = 0.0
    return prob


def _in_largest(owner: np.ndarray, chars: np.ndarray) -> np.ndarray:
    """Per block, whether its ``owner`` (an element index) is the one holding the most ``chars`` (the first
    such element in document order where several do)."""
    return owner == np.argmax(np.bincount(owner, weights=chars))


def page_text(texts: list[str], tags: list[str], groups, prob, threshold: float, html, url: str = "",
              links=None, tree=None, comments: bool = True, chrome=None, places=None) -> str:
    """The engine's text of one page from its blocks and their probabilities (``page_chrome`` when
    ``chrome`` is given, ``page_forms`` when ``places`` is, ``main_container``, then ``link_lists`` when
    ``links`` is given, then ``region.main_region`` when ``tree`` is too, ``region.after_article`` when
    ``places`` is too, then ``interface.interface_labels``, then ``assemble``: a data table's row on one line
    when ``tree`` is given),
    or, when that keeps fewer than ``MIN_WORDS`` words, the text inside the page's ``noscript`` elements
    (``noscript_text``) where that holds ``MIN_WORDS``, else the rules engine's text of the page where it holds
    more (``html``: ``str``, UTF-8 bytes, or a function giving them, called only then). ``tree``: (each block's
    owning element, each element's parent), ``Blocks.owner`` and ``Blocks.parent``. ``comments``: the rules
    engine's text keeps comment threads (its ``comments``). ``chrome``: per block, whether it is inside nav,
    footer or aside. ``places``: per block, whether it is inside a ``noscript`` and inside an ``article``
    element (``features.place_columns``); a ``noscript``'s JavaScript notice is dropped
    (``interface.script_notices``)."""
    notices = None
    rows = None
    if len(texts):
        size = text_sizes(texts)
        if chrome is not None:
            prob = page_chrome(chrome, prob)
        if places is not None and places.shape[1] > 2:
            prob = page_forms(texts, places[:, 2], prob, threshold, size)
        prob = main_container(texts, groups, prob, threshold, size)
        if links is not None:
            prob = link_lists(texts, links, prob, threshold, size)
            if tree is not None:
                prob = main_region(texts, tree[0], tree[1], links, prob, threshold, size)
                if places is not None:
                    prob = after_article(texts, tags, np.asarray(groups)[:, 0], links, places[:, 1], prob, threshold,
                                         all_words, size)
        if places is not None and places[:, 0].any():
            notices = script_notices(texts, places[:, 0])
            if notices.any():
                prob = np.where(notices, np.float32(0.0), np.asarray(prob, dtype=np.float32))
        prob = interface_labels(texts, tags, prob, threshold, size)
        if tree is not None:
            rows = table_rows(texts, tags, tree[0], tree[1])
    parents = np.asarray(groups)[:, 0] if len(texts) else None
    # the characters as the rules engine's cleanup and trafilatura give them: soft hyphens and zero-width spaces
    # out (a soft hyphen made two words of one), fixed-width spaces plain, NFC (some pages ship u + U+0308)
    text = normalize_chars(assemble(texts, tags, prob, threshold, parents, rows))
    kept = words(text)
    if kept >= MIN_WORDS:
        return text
    if notices is not None:
        shown = noscript_text(texts, tags, parents, rows, prob, threshold, places[:, 0], notices, chrome, links)
        if shown is not None:
            return shown
    if callable(html):
        html = html()
    rules = extract_resiliparse(html if isinstance(html, str) else html.decode("utf-8"), url, comments=comments)
    return rules if not kept or words(rules) > kept else text


_NOSCRIPT_LINKS = 0.5  # a noscript block with this share of link text or more is its menu, not its text


def noscript_text(texts, tags, parents, rows, prob, threshold: float, noscript, notices, chrome=None,
                  links=None) -> str | None:
    """The page's text as a browser without JavaScript shows it, when the classifier kept under ``MIN_WORDS``
    words of it: the kept blocks and those inside ``noscript`` elements (a page that renders its content by
    script and writes it for the others into a ``noscript``), without the ``noscript``'s notices
    (``notices``: "Please enable JavaScript", a tracking pixel), its chrome (``chrome``) and its menus (blocks
    of ``_NOSCRIPT_LINKS`` link text or more); None when that holds under ``MIN_WORDS`` words too. The
    classifier scores a block inside ``noscript`` low (the ``in_noscript`` feature: most are notices), and
    the rules engine reads none of it: such a page was set aside, or came out as its menu."""
    shown = np.asarray(noscript, dtype=bool) & ~np.asarray(notices, dtype=bool)
    if chrome is not None:
        shown &= ~np.asarray(chrome, dtype=bool)
    if links is not None:
        shown &= np.asarray(links)[:, 0] < _NOSCRIPT_LINKS
    if not shown.any():
        return None
    prob = interface_labels(texts, tags, np.where(shown, np.float32(1.0), np.asarray(prob, dtype=np.float32)),
                            threshold)
    text = normalize_chars(assemble(texts, tags, prob, threshold, parents, rows))
    return text if words(text) >= MIN_WORDS else None


def all_words(text: str) -> float:
    """Words of ``text`` in any script, as ``words`` counts them, without its cap."""
    return len(_WORDS.findall(text)) + dense_words(text)


def extract_blocks(html: str, url: str = "", model: str = "", stripped: bool = False, comments: bool = True) -> str:
    """The learned engine on a page given as ``str``: blocks of the page (``features``), each kept when the
    block classifier (``model``) gives it at least the model's threshold. ``stripped``: ``html`` already went
    through ``strip.strip_html``. ``comments``: where the page falls back to the rules engine, its text keeps
    comment threads."""
    if not stripped:
        html = strip_html(html)
    data = utf8(html)
    if data is not None:
        return extract_blocks_utf8(data, url, model, comments)
    # lone surrogates (selectolax drops them when it encodes the text itself)
    if too_deep(html, MAX_DEPTH):
        return extract_resiliparse(html, url, comments=comments)
    return _assemble_blocks(features(html, stripped=True), html, url, model, comments)


def extract_blocks_utf8(data: bytes, url: str = "", model: str = "", comments: bool = True) -> str:
    """``extract_blocks`` of a page given as the UTF-8 bytes of its stripped HTML (what the stage hands it:
    the bytes of the Arrow column, stripped by ``strip.strip_utf8``)."""
    if too_deep_utf8(data, MAX_DEPTH):
        # the parser would take O(elements x depth): the rules engine's linear whole-page path instead
        return extract_resiliparse(data.decode("utf-8"), url, comments=comments)
    return _assemble_blocks(features(None, stripped=True, data=data), data, url, model, comments)


def _assemble_blocks(b, html, url: str, model: str, comments: bool = True) -> str:
    if b is None:
        # no visible block (the whole page hidden, as in some script-rendered pages that stream their
        # content into a hidden element), or more blocks than a page has (``features.MAX_BLOCKS``): the rules
        # engine, which reads hidden elements too, and whose cost does not grow with the blocks
        return extract_resiliparse(html if isinstance(html, str) else html.decode("utf-8"), url,
                                   comments=comments)
    m = cached(model)
    return page_text(b.texts, b.tags, b.groups, m.predict(b.features, b.groups), m.threshold, html, url,
                     link_columns(b.features), (b.owner, b.parent), comments, chrome_blocks(b.features),
                     place_columns(b.features))


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
        # the main region's kernel, whatever the classifier made of the page above
        main_region(["Text"], np.zeros(1, np.int64), np.full(1, -1, np.int64), np.zeros((1, 2)),
                    np.ones(1, np.float32), 0.5)
        last_descendants(np.full(1, -1, np.int64))  # ... and the table rows' (``tables.table_rows``)
        _WARM.add(model)


"""HTML -> text blocks with the features the learned block classifier reads.

A **block** is a run of text between block-level element boundaries (a paragraph, heading, list item,
table cell, ...). Text inside inline elements (``a``, ``span``, ``b``, ...) joins its block; ``br`` is a line
break inside the block. Each block gets one row of numeric, language-neutral features:

- its own text: characters, words, share of characters inside links, digits, sentence punctuation
  (Latin, CJK, Arabic, Devanagari full stops), commas, separators (``|``, ``»``, ``·``), how often the same
  text occurs on the page;
- its place in the DOM: the tag that owns it, which tags are above it (``nav``, ``footer``, ``li``,
  ``article``, ...), which words occur in the class / id attributes of it and of its ancestors (``menu``,
  ``comment``, ``content``, ``price``, ...), depth;
- its containers: text size and link density of the elements 1, 2 and 4 levels up;
- position on the page, the same text features of the two blocks before and after it;
- the page: total text, link density, share of text in lists and tables, Open Graph type.

Scripts, styles, comments, SVG and templates are cut out of the HTML before parsing (:func:`strip_html`,
one regular expression; :func:`strip_utf8`, the same cut as one compiled scan over UTF-8 bytes, which the
stage uses): that is what makes multi-megabyte pages (mostly inline JavaScript and JSON) cheap, and what
the stage's size limit is applied to.

Parsing is lexbor (an HTML5 parser in C, through selectolax, fed the UTF-8 bytes that the depth check
:func:`too_deep_utf8` already scanned). The tree is walked once: :func:`walk` does it in Python (a loop with
an explicit stack, tags read by lexbor's tag id); ``extract_dom`` does the same walk as one compiled scan of
lexbor's serialization of the body (2-3x faster) and falls back to :func:`walk` where it cannot read a page,
so :func:`walk` is the definition and the compiled scan must give what it gives. The per-block arithmetic
is numpy over the finished block table, with compiled scans (numba) for the text statistics and title
overlap over the code points of all blocks at once and for the container ancestors.
``benchmarks/extract_features_check.py`` checks that a change here leaves the features of WCXB's
development pages as they were (the shipped model reads them).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numba as nb
import numpy as np

# ----------------------------------------------------------------------------------------- stripping
# "<script ...> ... </script>" (and style, svg, template) with the body matched as runs of non-"<" characters
# and "<" not starting the closing tag (linear, ~0.5 ms for a 150 kB page), and HTML comments.
_STRIP_RE = re.compile(r"<(script|style|svg|template)\b[^>]*>[^<]*(?:<(?!/\1\s*>)[^<]*)*</\1\s*>|<!--.*?-->",
                       re.S | re.I)
_OG_TYPE_RE = re.compile(r"""og:type["']?\s+content=["']?([\w.:-]+)""", re.I)


# code point -> lower-case ASCII letter for the letters of "div" and "span" (re.I also folds U+0130 and
# U+0131 to "i", U+017F to "s")
_FOLD = np.arange(128, dtype=np.uint32)
_FOLD[65:91] += 32


def _folded(cps: np.ndarray) -> np.ndarray:
    out = np.where(cps < 128, _FOLD[np.minimum(cps, 127)], cps)
    out[(out == 0x130) | (out == 0x131)] = ord("i")
    out[out == 0x17F] = ord("s")
    return out


def too_deep(html: str, limit: int) -> bool:
    """Whether ``<div>`` / ``<span>`` elements nest more than ``limit`` deep (counted from the tags, without
    parsing). lexbor's tree building costs O(elements x depth) in C, where no signal reaches (20,000 nested
    ``<div>`` take 5 s); real pages nest 10-40 deep. The tags are the matches of ``</?(?:div|span)\\b``
    (case-insensitive), found with numpy over the page's code points (faster than the regular expression)."""
    cps = np.frombuffer(html.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    lt = np.flatnonzero(cps == 60)  # "<"
    if lt.size <= limit:
        return False
    cps = np.concatenate([cps, np.zeros(6, dtype=np.uint32)])
    # exact "<div", "<span", "<DIV" first: at most `limit` of them, and the page passes (a cheap bound)
    c = [cps[lt + k] for k in range(1, 6)]
    exact = (((c[0] == 100) & (c[1] == 105) & (c[2] == 118)) | ((c[0] == 68) & (c[1] == 73) & (c[2] == 86))
             | ((c[0] == 115) & (c[1] == 112) & (c[2] == 97) & (c[3] == 110)))
    if int(exact.sum()) <= limit:
        return False
    closing = c[0] == 47  # "/"
    f = [_folded(np.where(closing, c[k + 1], c[k])) for k in range(4)]
    after_div = np.where(closing, c[4], c[3])
    after_span = np.where(closing, cps[lt + 6], c[4])
    div = (f[0] == 100) & (f[1] == 105) & (f[2] == 118) & ~_is_word(after_div)
    span = (f[0] == 115) & (f[1] == 112) & (f[2] == 97) & (f[3] == 110) & ~_is_word(after_span)
    tags = div | span
    if int(tags.sum()) <= limit:
        return False
    step = np.where(closing[tags], -1, 1).astype(np.int64)
    return int(np.cumsum(step).max()) > limit


def too_deep_utf8(data: bytes, limit: int) -> bool:
    """``too_deep`` of the page given as its UTF-8 bytes: the same tag matches, found by one compiled scan
    over the bytes (``_tag_scan``); only the character after each ``div`` / ``span`` goes through
    ``_is_word``."""
    n_lt, n_exact, m, closing, after = _tag_scan(np.frombuffer(data, dtype=np.uint8))
    if n_lt <= limit or n_exact <= limit or m <= limit:
        return False
    keep = ~_is_word(after[:m])
    if int(keep.sum()) <= limit:
        return False
    step = np.where(closing[:m][keep], -1, 1).astype(np.int64)
    return int(np.cumsum(step).max()) > limit


@nb.njit(cache=True, inline="always")
def _cp_at(buf, i):
    """(code point starting at byte i of valid UTF-8, next byte); past the end: (0, i), as the NUL padding
    of ``too_deep``."""
    n = buf.size
    if i >= n:
        return 0, i
    b0 = np.int64(buf[i])
    if b0 < 0x80:
        return b0, i + 1
    if b0 < 0xE0:
        return ((b0 & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), i + 2
    if b0 < 0xF0:
        return ((b0 & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F), i + 3
    return (((b0 & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12) | ((np.int64(buf[i + 2]) & 0x3F) << 6)
            | (np.int64(buf[i + 3]) & 0x3F)), i + 4


@nb.njit(cache=True, inline="always")
def _fold1(cp):
    if 65 <= cp <= 90:
        return cp + 32
    if cp == 0x130 or cp == 0x131:
        return 105  # "i"
    if cp == 0x17F:
        return 115  # "s"
    return cp


@nb.njit(cache=True)
def _tag_scan(buf):
    """One pass over UTF-8 bytes for ``too_deep``: the number of "<", of exact "<div" / "<DIV" / "<span",
    and the candidate tags ``</?(?:div|span)`` (letters folded as ``_folded`` does): how many, whether each
    closes, and the code point after its name (whether that one is a word character is decided outside)."""
    cap = buf.size // 4 + 1
    closing = np.zeros(cap, dtype=np.bool_)
    after = np.zeros(cap, dtype=np.uint32)
    n_lt = 0
    n_exact = 0
    m = 0
    for i in range(buf.size):
        if buf[i] != 60:
            continue
        n_lt += 1
        c0, j = _cp_at(buf, i + 1)
        c1, j = _cp_at(buf, j)
        c2, j = _cp_at(buf, j)
        c3, j = _cp_at(buf, j)
        c4, j = _cp_at(buf, j)
        if (c0 == 100 and c1 == 105 and c2 == 118) or (c0 == 68 and c1 == 73 and c2 == 86) \
                or (c0 == 115 and c1 == 112 and c2 == 97 and c3 == 110):
            n_exact += 1
        close = c0 == 47
        if close:
            c5, j = _cp_at(buf, j)
            f0, f1, f2, f3 = _fold1(c1), _fold1(c2), _fold1(c3), _fold1(c4)
            a_div, a_span = c4, c5
        else:
            f0, f1, f2, f3 = _fold1(c0), _fold1(c1), _fold1(c2), _fold1(c3)
            a_div, a_span = c3, c4
        if f0 == 100 and f1 == 105 and f2 == 118:
            closing[m] = close
            after[m] = a_div
            m += 1
        elif f0 == 115 and f1 == 112 and f2 == 97 and f3 == 110:
            closing[m] = close
            after[m] = a_span
            m += 1
    return n_lt, n_exact, m, closing, after


def _classes(cps: np.ndarray) -> np.ndarray:
    """``_char_class`` of each code point, through ``_CLASS_TABLE`` (filled the first time a code point is seen)."""
    cls = _CLASS_TABLE[cps]
    unknown = cls == 255
    if unknown.any():
        for cp in np.unique(cps[unknown]):
            _CLASS_TABLE[cp] = _char_class(int(cp))
        cls = _CLASS_TABLE[cps]
    return cls


def _is_word(cps: np.ndarray) -> np.ndarray:
    """``\\w`` (as ``re`` reads it) for each code point; NUL (past the end of the page) is not one."""
    return (_classes(cps) & 1).astype(bool)


def strip_html(html: str) -> str:
    """The HTML without scripts, styles, comments, SVG, templates and noscript fallbacks."""
    return _STRIP_RE.sub(" ", html)


def strip_utf8(data, valid: bool = False) -> bytes | None:
    """``strip_html`` of a page given as UTF-8 bytes (``bytes`` or a uint8 array), done by one compiled scan
    over its "<" (``_strip_scan``): the same bytes as ``strip_html(data.decode()).encode()``. ``valid``: the
    caller knows the bytes are valid UTF-8 (``str.encode`` gave them, or Arrow validated the column). None
    when they are not, or when a "<" or "</" is followed by a non-ASCII character where the regular
    expression's Unicode rules could decide (``re.I`` folds "ſ" to "s" and "İ", "ı" to "i"; ``\\s`` and
    ``\\b`` know Unicode spaces and letters): the caller then takes the ``str`` path."""
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    if not valid and not _utf8_valid(buf):
        return None
    out, size = _strip_scan(buf, np.flatnonzero(buf == 60))
    if size < 0:
        return None
    return out[:size].tobytes()


@nb.njit(cache=True)
def _utf8_valid(buf):
    """Whether ``buf`` is UTF-8 that Python's strict decoder accepts (no overlong forms, no surrogates, at
    most U+10FFFF)."""
    n = buf.size
    i = 0
    while i < n:
        b = buf[i]
        if b < 0x80:
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            k = 1
            lo, hi = 0x80, 0xBF
        elif 0xE0 <= b <= 0xEF:
            k = 2
            lo = 0xA0 if b == 0xE0 else 0x80
            hi = 0x9F if b == 0xED else 0xBF
        elif 0xF0 <= b <= 0xF4:
            k = 3
            lo = 0x90 if b == 0xF0 else 0x80
            hi = 0x8F if b == 0xF4 else 0xBF
        else:
            return False
        if i + k >= n:
            return False
        c = buf[i + 1]
        if c < lo or c > hi:
            return False
        for j in range(2, k + 1):
            c = buf[i + j]
            if c < 0x80 or c > 0xBF:
                return False
        i += k + 1
    return True


# the element names of _STRIP_RE, as lower-case ASCII bytes, in the order the alternation tries them
_STRIP_NAMES = np.array([list(b"script\0\0"), list(b"style\0\0\0"), list(b"svg\0\0\0\0\0"), list(b"template")],
                        dtype=np.uint8)
_STRIP_LENS = np.array([6, 5, 3, 8], dtype=np.int64)
_NO_MATCH = -1
_UNSURE = -2


@nb.njit(cache=True, inline="always")
def _lower(c):
    return c + 32 if 65 <= c <= 90 else c


@nb.njit(cache=True, inline="always")
def _ascii_word(c):
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 95


@nb.njit(cache=True, inline="always")
def _ascii_space(c):
    # str.isspace() of the ASCII code points: \t \n \v \f \r, \x1c-\x1f and the space
    return (9 <= c <= 13) or (28 <= c <= 32)


@nb.njit(cache=True, inline="always")
def _name_at(buf, q, names, w, m):
    """Whether the ``m`` letters of ``names[w]`` stand at byte q (ASCII compared case-insensitively): 1 or 0;
    ``_UNSURE`` where a non-ASCII byte comes first (the regular expression's ``re.I`` folds some of those)."""
    n = buf.size
    for j in range(m):
        r = q + j
        if r >= n:
            return 0
        c = buf[r]
        if c >= 0x80:
            return _UNSURE
        if _lower(c) != names[w, j]:
            return 0
    return 1


@nb.njit(cache=True)
def _match_at(buf, lt, t, names, lens):
    """Where a match of ``_STRIP_RE`` that starts at the "<" ``lt[t]`` ends (``lt``: the positions of all
    "<"); ``_NO_MATCH``; or ``_UNSURE`` where a non-ASCII character could change the regular expression's
    verdict."""
    n = buf.size
    i = lt[t]
    for w in range(names.shape[0]):
        m = lens[w]
        at = _name_at(buf, i + 1, names, w, m)
        if at == _UNSURE:
            return _UNSURE
        if at == 0:
            continue
        q = i + 1 + m
        if q < n:
            if buf[q] >= 0x80:
                return _UNSURE
            if _ascii_word(buf[q]):
                continue  # no \b after the name
        # the opening tag ends at the first ">"
        while q < n and buf[q] != 62:
            q += 1
        if q >= n:
            return _NO_MATCH  # the name's first letter rules out a comment too
        # the first "</name\s*>" after it (name compared case-insensitively)
        u = t + 1
        while u < lt.size and lt[u] <= q:
            u += 1
        while u < lt.size:
            p = lt[u]
            u += 1
            if p + 1 < n and buf[p + 1] == 47:
                at = _name_at(buf, p + 2, names, w, m)
                if at == _UNSURE:
                    return _UNSURE
                if at == 1:
                    r = p + 2 + m
                    while r < n and _ascii_space(buf[r]):
                        r += 1
                    if r < n:
                        if buf[r] >= 0x80:
                            return _UNSURE
                        if buf[r] == 62:
                            return r + 1
        return _NO_MATCH
    # "<!--" ... "-->"
    if i + 3 < n and buf[i + 1] == 33 and buf[i + 2] == 45 and buf[i + 3] == 45:
        q = i + 4
        while q + 2 < n:
            if buf[q] == 45 and buf[q + 1] == 45 and buf[q + 2] == 62:
                return q + 3
            q += 1
    return _NO_MATCH


@nb.njit(cache=True)
def _strip_scan(buf, lt):
    """``_STRIP_RE.sub(" ", ...)`` over UTF-8 bytes (``lt``: the positions of "<"): (output buffer, its
    length), length -1 when unsure. The text between matches is copied in slices."""
    n = buf.size
    out = np.empty(n, dtype=np.uint8)
    o = 0
    i = 0  # bytes before i are done
    t = 0
    while t < lt.size:
        p = lt[t]
        if p < i:  # inside the last match
            t += 1
            continue
        e = _match_at(buf, lt, t, _STRIP_NAMES, _STRIP_LENS)
        if e == _UNSURE:
            return out, -1
        if e >= 0:
            out[o:o + p - i] = buf[i:p]
            o += p - i
            out[o] = 32
            o += 1
            i = e
        t += 1
    out[o:o + n - i] = buf[i:n]
    o += n - i
    return out, o


# -------------------------------------------------------------------------------------------- tags
BLOCK_TAGS = {"p", "div", "li", "ul", "ol", "h1", "h2", "h3", "h4", "h5", "h6", "td", "th", "tr", "table", "pre",
              "blockquote", "section", "article", "main", "header", "footer", "nav", "aside", "dd", "dt", "dl",
              "form", "figure", "figcaption", "address", "hr", "caption", "summary", "details", "fieldset",
              "legend", "body", "center", "tbody", "thead", "tfoot", "menu", "dialog", "hgroup", "html", "option",
              "label", "button", "noscript"}
SKIP_TAGS = {"script", "style", "svg", "template", "iframe", "head", "select", "textarea", "input",
             "object", "embed", "canvas", "video", "audio", "map", "picture", "math", "title", "meta", "link"}
# the owning tag of a block (one-hot)
OWN_TAGS = ["p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "td", "th", "pre", "blockquote", "section",
            "article", "dd", "dt", "span_other", "figcaption", "button", "label", "a_only"]
_OWN_INDEX = {t: i for i, t in enumerate(OWN_TAGS)}
# tags anywhere above a block (bit flags)
ANCESTOR_TAGS = ["a", "li", "nav", "header", "footer", "aside", "article", "main", "form", "table", "h",
                 "blockquote", "pre", "code", "figure", "button", "label", "dl", "ul", "ol", "strong", "em",
                 "time", "address", "section", "details", "menu", "sup", "small", "cite", "q", "span", "noscript"]
_ANC_BIT = {t: 1 << i for i, t in enumerate(ANCESTOR_TAGS)}
for _h in ("h1", "h2", "h3", "h4", "h5", "h6"):
    _ANC_BIT[_h] = _ANC_BIT["h"]
_ANC_BIT["b"] = _ANC_BIT["strong"]
_ANC_BIT["i"] = _ANC_BIT["em"]
_ANC_BIT["kbd"] = _ANC_BIT["code"]
_ANC_BIT["samp"] = _ANC_BIT["code"]
_ANC_BIT["tt"] = _ANC_BIT["code"]

# words looked for (as substrings) in class and id attributes
CLASS_WORDS = ["nav", "menu", "footer", "header", "sidebar", "side", "widget", "comment", "reply", "content",
               "article", "post", "entry", "main", "body", "text", "story", "blog", "related", "share", "social",
               "breadcrumb", "crumb", "ad", "banner", "cookie", "consent", "promo", "newsletter", "subscribe",
               "product", "price", "review", "rating", "forum", "thread", "message", "topic", "author", "byline",
               "meta", "date", "time", "tag", "categor", "title", "head", "desc", "summary", "spec", "detail",
               "feature", "item", "card", "list", "grid", "tile", "result", "search", "login", "account",
               "user", "profile", "modal", "popup", "overlay", "hidden", "sr-only", "visually", "skip", "toolbar",
               "btn", "button", "icon", "logo", "copyright", "legal", "disclaimer", "caption", "credit", "tab",
               "accordion", "faq", "question", "answer", "doc", "markdown", "prose", "rich", "wysiwyg", "toc",
               "pagination", "pager", "next", "prev", "more", "teaser", "recommend", "popular", "trending",
               "hero", "intro", "lead", "signature", "quote", "signup", "form", "cart", "checkout", "shipping",
               "variant", "option", "attribute", "table", "note", "alert", "notice", "message", "body", "col",
               "row", "container", "wrap", "section", "page", "slide", "carousel", "sponsor", "partner",
               "dropdown", "mega", "mobile", "offcanvas", "drawer", "foot", "bottom", "top", "copy", "inner"]
CLASS_WORDS = list(dict.fromkeys(CLASS_WORDS))
_CLASS_WORD_BIT = {w: 1 << i for i, w in enumerate(CLASS_WORDS)}
_CLASS_WORD_RE = re.compile("|".join(sorted(CLASS_WORDS, key=len, reverse=True)).replace("-", r"\-"))
_ROLE_WORDS = {"navigation": "nav", "banner": "header", "contentinfo": "footer", "complementary": "sidebar",
               "main": "main", "article": "article", "search": "search", "menu": "menu", "menubar": "menu",
               "dialog": "modal", "alert": "alert", "tablist": "tab", "toolbar": "toolbar"}

_OG_TYPES = ["article", "product", "website", "blog", "profile", "video", "book"]
_SENT_CHARS = ".!?。！？।۔؟"
_SEP_LIST = "|»›·•/>"
_WORD_RE = re.compile(r"\w+")
_WORD_OR_END_RE = re.compile(r"\w+|\x00")


@dataclass
class Blocks:
    texts: list[str]          # one string per block, whitespace collapsed
    features: np.ndarray      # float32 [n_blocks, n_features]
    tags: list[str]           # owning tag per block (for output layout and headings)
    groups: np.ndarray        # int64 [n_blocks, 4]: the element 1, 2, 4 and 8 levels above each block's owner


_class_cache: dict[str, int] = {}
_token_cache: dict[str, int] = {}


def _class_mask(s: str) -> int:
    """The bits of the ``CLASS_WORDS`` that ``_CLASS_WORD_RE.findall(s.lower())`` finds. No class word holds
    white space, so no match crosses it: the matches are those of each white-space separated token, and a
    token's bits are cached on their own (class lists are new on almost every site, their tokens are not)."""
    m = _class_cache.get(s)
    if m is None:
        m = 0
        for tok in s.split():
            b = _token_cache.get(tok)
            if b is None:
                b = 0
                for w in _CLASS_WORD_RE.findall(tok.lower()):
                    b |= _CLASS_WORD_BIT[w]
                if len(_token_cache) > 200_000:
                    _token_cache.clear()
                _token_cache[tok] = b
            m |= b
        if len(_class_cache) > 200_000:
            _class_cache.clear()
        _class_cache[s] = m
    return m


def _is_hidden(attrs: dict) -> bool:
    if "hidden" in attrs:
        return True
    st = attrs.get("style")
    if st and ("none" in st or "hidden" in st):
        st = st.replace(" ", "").lower()
        if "display:none" in st or "visibility:hidden" in st:
            return True
    return False


def utf8(html: str) -> bytes | None:
    """The page as UTF-8 bytes (what lexbor parses), or None when it holds lone surrogates (selectolax
    drops those when it encodes a ``str`` itself)."""
    try:
        return html.encode("utf-8")
    except UnicodeEncodeError:
        return None


def parse(html: str | None, data: bytes | None = None):
    """lexbor (selectolax) tree of the (already stripped) HTML, or None. ``data``: ``utf8(html)`` when the
    caller has it (lexbor then parses those bytes instead of encoding the text again); ``html`` may then be
    None."""
    from selectolax.lexbor import LexborHTMLParser

    if html is None:  # only the bytes (a page of white space gives no block either way)
        if not data or data.isspace():
            return None
    elif not html or html.isspace():
        return None
    try:
        tree = LexborHTMLParser(html if data is None else data)
    except Exception:  # selectolax raises on a few unparsable inputs; that page has no text then
        return None
    return tree if tree.body is not None else None


def _flush(raw: str, owner: tuple, link: int, ea: int, en: int, blocks: list, el_chars: list, el_link: list):
    """Write the text collected since the last block boundary as a block of ``owner`` (unless it is blank)."""
    if owner[6] != "pre":
        text = " ".join(raw.split())
        if not text:
            return
    else:
        text = raw.strip("\n")
        if not text or text.isspace():
            return
    n = len(text)
    lk = link if link < n else n
    ei = owner[0]
    blocks.append((text, lk, ei, owner[1], owner[2] | ea, owner[3] | en, owner[4] | en, owner[5], owner[6]))
    el_chars[ei] += n
    el_link[ei] += lk


def walk(tree):
    """One pass over the tree: (blocks, element parents, element chars, element link chars).

    A block is ``(text, link chars, owner's element index, owner's tag index, ancestor tag bits, near class
    bits, any class bits, depth, tag)``; its *owner* is the nearest block-level element above its text (or
    the body), a tuple (element index, own tag index, ancestor tag bits, near class bits, any class bits,
    depth, tag, own class bits); the block's bits are its owner's with those of the inline elements its
    text passed through. Text of inline elements
    joins the current block; the block is written when a block-level element starts or ends. An element's
    chars and link chars count the text of all blocks below it. Iterative (an explicit stack), so deep
    pages cost no recursion; below MAX_DEPTH levels an element's text is read as one run."""
    el_parent = [-1]
    el_chars = [0]
    el_link = [0]
    blocks: list[tuple] = []
    parts: list[str] = []
    owner = (0, _OWN_INDEX.get("body", _SPAN_OTHER), 0, 0, 0, 0, "body", 0)
    body_owner = owner
    link = extra_anc = extra_near = 0
    anc = cls_any = 0
    in_link = False
    level = 1
    stack: list[tuple] = []
    info_of = _id_info().copy()  # per page: lexbor gives tags it does not know ids of that page's own
    class_of = _class_cache.get
    c = tree.body.child
    while True:
        if c is None:
            if not stack:
                break
            c, owner, anc, cls_any, in_link, level, block = stack.pop()
            if block is not None and parts:
                raw = "".join(parts)
                if not raw.isspace():  # blank: no block
                    _flush(raw, block, link, extra_anc, extra_near, blocks, el_chars, el_link)
                parts = []
                link = extra_anc = extra_near = 0
            c = c.next
            continue
        tid = c.tag_id
        if tid == _TEXT_ID:
            t = c.text_content
            if t:
                parts.append(t)
                if in_link:
                    link += len(t)
            c = c.next
            continue
        info = info_of.get(tid)
        if info is None:
            info = info_of[tid] = _info(c.tag)
        cat, bit, is_a, tag, own_index = info
        if cat >= 3:
            if cat == 4:  # br
                parts.append("\n")
            c = c.next
            continue
        attrs = c.attributes
        cm = 0
        if attrs:
            cls = attrs.get("class")
            if cls:
                cm = class_of(cls)
                if cm is None:
                    cm = _class_mask(cls)
            eid = attrs.get("id")
            if eid:
                m = class_of(eid)
                cm |= _class_mask(eid) if m is None else m
            if "style" in attrs or "hidden" in attrs or "role" in attrs:
                if _is_hidden(attrs):
                    c = c.next
                    continue
                role = attrs.get("role")
                if role in _ROLE_BITS:
                    cm |= _ROLE_BITS[role]
        if cat == 1 and parts:  # a block starts: the text before it is a block of its own
            raw = "".join(parts)
            if not raw.isspace():  # blank: no block
                _flush(raw, owner, link, extra_anc, extra_near, blocks, el_chars, el_link)
            parts = []
            link = extra_anc = extra_near = 0
        first = c.child
        if first is None and level <= MAX_DEPTH:  # nothing inside: no need to go down and back up
            if cat == 1:
                el_parent.append(owner[0])
                el_chars.append(0)
                el_link.append(0)
            else:
                if cm:
                    extra_near |= cm
                extra_anc |= bit
            c = c.next
            continue
        canc = anc | bit
        cany = cls_any | cm
        if cat == 1:  # block
            new = (len(el_parent), own_index, canc, cm | owner[7], cany, owner[5] + 1, tag, cm)
            el_parent.append(owner[0])
            el_chars.append(0)
            el_link.append(0)
            stack.append((c, owner, anc, cls_any, in_link, level, new))
            owner = new
        else:  # inline: joins the current block
            if cm:
                extra_near |= cm
            extra_anc |= bit
            stack.append((c, owner, anc, cls_any, in_link, level, None))
        anc, cls_any, in_link = canc, cany, in_link or is_a
        if level > MAX_DEPTH:
            # deeper than real pages go (10-40): the rest of this subtree is one run of text
            parts.append(" " + c.text(deep=True, separator=" ") + " ")
            c = None
        else:
            level += 1
            c = first
    if parts:
        raw = "".join(parts)
        if not raw.isspace():  # blank: no block
            _flush(raw, body_owner, link, extra_anc, extra_near, blocks, el_chars, el_link)
    for i in range(len(el_parent) - 1, 0, -1):  # children come after their parent
        p = el_parent[i]
        el_chars[p] += el_chars[i]
        el_link[p] += el_link[i]
    return blocks, el_parent, el_chars, el_link


_CATEGORY = {t: 1 for t in BLOCK_TAGS}
_CATEGORY.update({t: 3 for t in SKIP_TAGS})
_CATEGORY["-comment"] = 3
_CATEGORY["br"] = 4
# per tag: (category: 0 inline, 1 block, 3 skipped, 4 line break; ancestor bit; is it a link)
_TAG_INFO = {t: (_CATEGORY.get(t, 0), _ANC_BIT.get(t, 0), t == "a") for t in set(_CATEGORY) | set(_ANC_BIT)}
_INLINE = (0, 0, False)
_SPAN_OTHER = _OWN_INDEX["span_other"]
_TEXT_ID = 2  # lexbor's tag id of text nodes (LXB_TAG__TEXT)
_ID_INFO: dict[int, tuple] = {}


def _info(tag: str | None) -> tuple:
    """What ``walk`` needs of a tag: (category, ancestor bit, is it a link, tag, own tag index)."""
    cat, bit, is_a = _TAG_INFO.get(tag, _INLINE)
    return cat, bit, is_a, tag, _OWN_INDEX.get(tag, _SPAN_OTHER)


def _id_info() -> dict[int, tuple]:
    """``_info`` by lexbor tag id, for the tags of ``_TAG_INFO`` that lexbor knows (their ids are the same in
    every document; a tag it does not know gets an id of its own per document, looked up by name)."""
    if not _ID_INFO:
        from selectolax.lexbor import LexborHTMLParser

        a, b = LexborHTMLParser("<p>x<!--c--></p>"), LexborHTMLParser("")
        p = a.css_first("p")
        assert p.child.tag_id == _TEXT_ID and p.child.tag == "-text", "lexbor's text node id changed"
        out = {p.child.next.tag_id: _info("-comment")}
        names = sorted(t for t in _TAG_INFO if not t.startswith("-"))
        ids_b = {t: b.create_node(t).tag_id for t in reversed(names)}
        for t in names:
            i = a.create_node(t).tag_id
            if i == ids_b[t]:  # the same id in two documents, made in another order: lexbor's own id
                out[i] = _info(t)
        _ID_INFO.update(out)
    return _ID_INFO
_ROLE_BITS = {r: 1 << CLASS_WORDS.index(w) for r, w in _ROLE_WORDS.items()}


@nb.njit(cache=True)
def _ancestors(el_parent, idx, levels):
    """Per element of ``idx`` and level k of ``levels`` (increasing): its ancestor k levels up (the root where
    the chain ends sooner)."""
    out = np.empty((idx.size, levels.size), dtype=np.int64)
    for i in range(idx.size):
        a = idx[i]
        up = 0
        for t in range(levels.size):
            while up < levels[t]:
                nxt = el_parent[a]
                if nxt >= 0:
                    a = nxt
                up += 1
            out[i, t] = a
    return out


def _bits(words: np.ndarray, n_bits: int) -> np.ndarray:
    """Bit sets given as 64-bit words (``[n, k]``, word 0 holding bits 0-63) as 0/1 columns ``[n, n_bits]``."""
    w = np.ascontiguousarray(words).astype("<u8", copy=False)
    bits = np.unpackbits(w.view(np.uint8).reshape(len(w), -1), axis=1, bitorder="little")
    return bits[:, :n_bits].astype(np.float32)


def _title_overlap(texts: list[str], title: str) -> np.ndarray:
    """Per block: share of its words in the page title, share of the title's words in it (blocks of up to
    300 characters; words: lower-cased ``\\w+``, each counted once). All short blocks are lower-cased in one
    pass and their words counted by one compiled scan (``_title_counts``): each word is a run of word
    characters (``_classes``, the same ``\\w`` as ``re``) and is told apart by a 64-bit polynomial hash of its
    code points (``_word_hash``; two different words of one block sharing a hash: odds about 1e-17)."""
    tw = set(_WORD_RE.findall(title.lower()))
    out = np.zeros((len(texts), 2), dtype=np.float32)
    if not tw:
        return out
    short = [i for i, n in enumerate(map(len, texts)) if n <= 300]
    if not short:
        return out
    # "\x00" ends a block: neither a word character nor cased, so lower() and \w+ act per block as before
    joined = "\x00".join([texts[i] for i in short]).lower()
    if joined.count("\x00") != len(short) - 1:  # a block holding NUL itself: one block at a time
        for i in short:
            bw = set(_WORD_RE.findall(texts[i].lower()))
            if bw:
                common = len(bw & tw)
                out[i, 0] = common / len(bw)
                out[i, 1] = common / len(tw)
        return out
    cps = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    title_key = np.sort(np.array([_word_hash(w) for w in tw], dtype=np.uint64))
    ok, n_words, common = _title_counts(cps, _CLASS_TABLE, title_key, len(short))
    if not ok:  # code points not seen before: fill their classes, then count
        _classes(cps)
        ok, n_words, common = _title_counts(cps, _CLASS_TABLE, title_key, len(short))
    has = np.flatnonzero(n_words)
    rows = np.asarray(short, dtype=np.int64)[has]
    common = common.astype(np.float64)
    out[rows, 0] = common[has] / n_words[has]
    out[rows, 1] = common[has] / len(tw)
    return out


_HASH_BASE = 0x100000001B3


def _word_hash(word: str) -> int:
    """``sum cp[k] * B**k`` modulo 2**64 over the code points of ``word`` (what ``_title_counts`` computes)."""
    return sum(ord(ch) * pow(_HASH_BASE, k, 2**64) for k, ch in enumerate(word)) % 2**64


@nb.njit(cache=True)
def _title_counts(cps, table, title_key, n_blocks):
    """One pass over the code points of the "\\x00"-joined blocks: per block, how many distinct words (runs of
    ``\\w``, told apart by ``_word_hash``) and how many of them are in ``title_key`` (sorted). ok = False when a
    code point's class is not in ``table`` yet (255)."""
    n_words = np.zeros(n_blocks, dtype=np.int64)
    common = np.zeros(n_blocks, dtype=np.int64)
    keys = np.empty(cps.size // 2 + 1, dtype=np.uint64)
    base = np.uint64(_HASH_BASE)
    m = 0  # words of the current block so far
    block = 0
    h = np.uint64(0)
    p = np.uint64(1)
    in_word = False
    for i in range(cps.size + 1):
        if i < cps.size:
            cp = cps[i]
            k = table[cp]
            if k == 255:
                return False, n_words, common
        else:  # past the end: the last block ends
            cp = np.uint32(0)
            k = np.uint8(0)
        if k & 1:
            if not in_word:
                in_word = True
                h = np.uint64(0)
                p = np.uint64(1)
            h += np.uint64(cp) * p
            p *= base
            continue
        if in_word:
            keys[m] = h
            m += 1
            in_word = False
        if cp == 0:  # the end of a block (or of the last one)
            if m:
                ks = keys[:m]
                for j in range(1, m):  # insertion sort: a short block has few words
                    v = ks[j]
                    t = j - 1
                    while t >= 0 and ks[t] > v:
                        ks[t + 1] = ks[t]
                        t -= 1
                    ks[t + 1] = v
                distinct = 0
                hit = 0
                for j in range(m):
                    if j == 0 or ks[j] != ks[j - 1]:
                        distinct += 1
                        t = np.searchsorted(title_key, ks[j])
                        if t < title_key.size and title_key[t] == ks[j]:
                            hit += 1
                n_words[block] = distinct
                common[block] = hit
            m = 0
            block += 1
    return True, n_words, common


_CLASS_CACHE: dict[int, int] = {}
_CLASS_TABLE = np.full(0x110000, 255, dtype=np.uint8)  # code point -> _char_class, filled as characters are seen
_SENT_SET = {ord(c) for c in _SENT_CHARS}
_SEP_SET = {ord(c) for c in _SEP_LIST}
_COMMA_SET = {ord(c) for c in ",、،，"}


def _char_class(cp: int) -> int:
    """Bits: 1 word character (``\\w``), 2 decimal digit (``\\d``), 4 sentence mark, 8 separator, 16 comma,
    32 upper case, 64 white space (``str.isspace``)."""
    k = _CLASS_CACHE.get(cp)
    if k is None:
        ch = chr(cp)
        k = ((ch.isalnum() or ch == "_") * 1 | ch.isdecimal() * 2 | (cp in _SENT_SET) * 4 | (cp in _SEP_SET) * 8
             | (cp in _COMMA_SET) * 16 | ch.isupper() * 32 | ch.isspace() * 64)
        _CLASS_CACHE[cp] = k
    return k


def _text_stats(texts: list[str], link: np.ndarray, pre: np.ndarray):
    """Per-block text features, counted by one compiled scan over the page's code points (``_text_counts``).
    ``pre``: blocks whose white space was kept (``<pre>``); the others hold single spaces between words."""
    n = len(texts)
    chars = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    cps = np.frombuffer("\x00".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    ok, counts, ends = _text_counts(cps, _CLASS_TABLE, chars)
    if not ok:  # code points not seen before: fill their classes, then count
        _classes(cps)
        ok, counts, ends = _text_counts(cps, _CLASS_TABLE, chars)
    wtok, digits, sent, seps, comma, spaces = counts.astype(np.float32).T
    # words (str.split): single spaces between them, except in <pre> blocks
    words = spaces + 1
    for i in np.flatnonzero(pre):
        words[i] = len(texts[i].split())
    upper0, endp, colon = ends.astype(np.float32).T
    chars = chars.astype(np.float32)
    lchars = np.log1p(chars)
    return np.stack([lchars, np.log1p(words), np.log1p(wtok), link / np.maximum(chars, 1), np.log1p(sent),
                     sent / np.maximum(words, 1), np.log1p(comma), np.log1p(seps), digits / np.maximum(chars, 1),
                     upper0, endp, colon, chars / np.maximum(words, 1) / 10.0, wtok / np.maximum(words, 1)], axis=1)


@nb.njit(cache=True)
def _text_counts(cps, table, chars):
    """One pass over the code points of the "\\x00"-joined blocks (``chars``: each block's length; the
    separator after a block belongs to it). Per block: counts of word starts (``\\w`` after a non-word code
    point), digits, sentence marks, separators, commas, spaces (``_char_class`` bits); and whether its first
    code point is upper case, its last a sentence mark, its last a colon. ok = False when a code point's
    class is not in ``table`` yet (255)."""
    n = chars.size
    counts = np.zeros((n, 6), dtype=np.int64)
    ends = np.zeros((n, 3), dtype=np.int64)
    i = 0
    prev_w = False
    for b in range(n):
        start = i
        stop = i + chars[b] + 1
        if stop > cps.size:
            stop = cps.size
        for j in range(start, stop):
            cp = cps[j]
            k = table[cp]
            if k == 255:
                return False, counts, ends
            w = (k & 1) != 0
            if w and not prev_w:
                counts[b, 0] += 1
            prev_w = w
            if k & 2:
                counts[b, 1] += 1
            if k & 4:
                counts[b, 2] += 1
            if k & 8:
                counts[b, 3] += 1
            if k & 16:
                counts[b, 4] += 1
            if cp == 32:
                counts[b, 5] += 1
        last = start + chars[b] - 1
        if last < 0:
            last += cps.size
        if start < cps.size:
            ends[b, 0] = (table[cps[start]] & 32) != 0
        ends[b, 1] = (table[cps[last]] & 4) != 0
        ends[b, 2] = cps[last] == 58  # ":"
        i = stop
    return True, counts, ends


N_TEXT = 14
MAX_DEPTH = 200  # elements below this depth are read as plain text (real pages nest 10-40 deep)
GROUP_LEVELS = (1, 2, 4, 8)


def features(html: str | None, stripped: bool = False, data: bytes | None = None) -> Blocks | None:
    """The blocks of a page and their feature matrix; None when the page has no text. ``data``: the
    stripped page's ``utf8`` bytes, when the caller has them (then ``html`` may be None)."""
    if html is None:
        # the Open Graph type is looked for in the first 20,000 characters, which lie in the first 80,000
        # bytes (a character an "ignore" drops at that cut lies beyond them); only ASCII matches "og:type"
        # under re.I, so without those bytes (in any case) there is none
        head = data[:80000]
        head = head.decode("utf-8", "ignore") if b"og:type" in head.lower() else ""
    else:
        if not stripped:
            html = strip_html(html)
            data = None
        head = html
    m = _OG_TYPE_RE.search(head, 0, 20000)
    og = m.group(1).lower() if m else ""
    tree = parse(html, data)
    if tree is None:
        return None
    from curate.stages.extract_dom import walk_arrays

    w = walk_arrays(tree)
    n = len(w.texts)
    if n == 0:
        return None
    texts, tags = w.texts, w.tags
    title_node = tree.css_first("title")
    title = title_node.text() if title_node is not None else ""
    link = w.link.astype(np.float32)
    ts = _text_stats(texts, link, np.array([t == "pre" for t in tags], dtype=bool))  # [n, N_TEXT]
    own_1h = np.zeros((n, len(OWN_TAGS)), dtype=np.float32)
    own_1h[np.arange(n), w.own] = 1.0
    anc_b = _bits(w.anc[:, None], len(ANCESTOR_TAGS))
    near_b = _bits(w.near, len(CLASS_WORDS))
    any_b = _bits(w.any, len(CLASS_WORDS))
    depth = w.depth.astype(np.float32)

    el_chars = w.el_chars.astype(np.float32)
    el_link = w.el_link.astype(np.float32)
    groups = _ancestors(w.el_parent, w.el, np.array(GROUP_LEVELS, dtype=np.int64))  # [n, len(GROUP_LEVELS)]
    c = el_chars[groups]
    cont = np.empty((n, 2 * len(GROUP_LEVELS)), dtype=np.float32)
    cont[:, 0::2] = np.log1p(c)
    cont[:, 1::2] = el_link[groups] / np.maximum(c, 1)

    chars = np.exp(ts[:, 0]) - 1
    total = float(chars.sum())
    cum = (np.cumsum(chars) - chars) / max(total, 1.0)
    pos = np.stack([np.arange(n, dtype=np.float32) / max(n - 1, 1), cum, depth / 30.0,
                    depth / max(float(depth.max()), 1.0)], axis=1)
    # repetition of the same text on the page
    counts = Counter(texts)
    rep = np.fromiter(map(counts.__getitem__, texts), dtype=np.float32, count=n)
    rep = np.stack([np.log(rep), (rep > 1).astype(np.float32)], axis=1)

    # neighbours' text features: chars, link density, sentence punctuation
    core = ts[:, [0, 3, 4]]
    neigh = []
    for s in (-2, -1, 1, 2):
        sh = np.zeros_like(core)
        if s < 0:
            sh[-s:] = core[:s]
        else:
            sh[:-s] = core[s:]
        neigh.append(sh)
    neigh = np.concatenate(neigh, axis=1)

    # the page
    li_bit = _ANC_BIT["li"]
    tab_bit = _ANC_BIT["table"]
    in_li = ((w.anc & li_bit) != 0)
    in_tab = ((w.anc & tab_bit) != 0)
    page = np.array([np.log1p(total), float(link.sum()) / max(total, 1.0), np.log1p(n),
                     float(chars[in_li].sum()) / max(total, 1.0), float(chars[in_tab].sum()) / max(total, 1.0),
                     float((own_1h[:, _OWN_INDEX["h1"]] + own_1h[:, _OWN_INDEX["h2"]]).sum()) / 10.0,
                     float(rep[:, 1].mean())] + [float(og.endswith(t)) for t in _OG_TYPES], dtype=np.float32)
    page = np.broadcast_to(page, (n, page.size))
    # the block's size relative to the page's largest block
    rel = (ts[:, 0] - ts[:, 0].max())[:, None]
    feats = np.concatenate([ts, own_1h, anc_b, near_b, any_b, cont, pos, rep, neigh, page, rel,
                            _title_overlap(texts, title)], axis=1)
    return Blocks(texts, feats.astype(np.float32), tags, groups)


TEXT_NAMES = ["log_chars", "log_words", "log_tokens", "link_density", "log_sentence_marks", "sentence_marks_per_word",
              "log_commas", "log_separators", "digit_share", "starts_upper", "ends_sentence", "ends_colon",
              "chars_per_word", "tokens_per_word"]
PAGE_NAMES = ["page_log_chars", "page_link_density", "page_log_blocks", "page_list_share", "page_table_share",
              "page_headings", "page_repeated_share"]


def feature_names() -> list[str]:
    """Names of the feature columns, in order (the model file stores their fingerprint)."""
    names = list(TEXT_NAMES)
    names += ["own_" + t for t in OWN_TAGS]
    names += ["in_" + t for t in ANCESTOR_TAGS]
    names += ["near_cls_" + w for w in CLASS_WORDS]
    names += ["any_cls_" + w for w in CLASS_WORDS]
    for k in GROUP_LEVELS:
        names += [f"up{k}_log_chars", f"up{k}_link_density"]
    names += ["pos_block", "pos_chars", "depth", "depth_rel", "log_repeats", "repeated"]
    for s in (-2, -1, 1, 2):
        names += [f"n{s}_log_chars", f"n{s}_link_density", f"n{s}_log_sentence_marks"]
    names += PAGE_NAMES + ["og_" + t for t in _OG_TYPES] + ["rel_log_chars", "title_share_of_block",
                                                             "block_share_of_title"]
    return names


def n_features() -> int:
    return len(feature_names())

"""Page shapes that cost a parser super-linear time, bounded before the page reaches one.

lexbor (behind selectolax and resiliparse) builds its tree in C, where no signal reaches: a page that nests
elements thousands deep costs O(elements x depth) (each block start tag walks the stack of open elements), a
run of thousands of distinct unclosed formatting tags (``<b id=1><b id=2>...``) costs O(n^2) in the list of
active formatting elements, and an element with tens of thousands of attributes O(attributes^2) in the
duplicate check. Real pages nest 10-40 deep, keep a handful of formatting elements open and carry a few
attributes per element.

``bound_shape`` reads the tags of the (stripped) page once, with a compiled scan that follows the stack of
open elements the way a tree builder would (void elements; ``p``, ``li``, ``td``, ... closing an open one of
their kind above formatting elements and others of that group; an end tag popping to its element when that is
in scope, and the end tag of an element that is not "special" (``SPECIAL``: a span, a custom or formatting
element) only when no special element was opened after it: ``</td>`` inside a table nested in a cell, or
``</em>`` after ``<em><section>``, closes nothing, and pages of ``<table><tr><td>x</td><td>`` or
``<i><ul><li>x</i>`` repeated nested thousands deep in lexbor while the scan saw them flat: 17 s for 0.6 MB;
``</form>`` takes the form alone out of the stack; a ``li``, ``dt`` or ``dd`` start tag closes one of its
kind only past formatting elements and ``p``; a table's part opens nothing outside a table; inside ``svg`` and
``math`` no name is void and none closes another, up to an HTML start tag that ends them, except inside an
integration point (svg ``title``, ``desc``, ``foreignObject``; math ``mi`` ... ``mtext``, an HTML
``annotation-xml``), whose start tags are read as HTML; a formatting tag left out leaves the svg it would have
ended open; the text of a textarea, title, script, style, ... is skipped up to its end tag; block start tags
close a p in button scope; an end tag inside a select closes nothing past it, as in lexbor, and a ``<select>``
or ``<input>`` there closes it; a ``<frameset>`` opens only in a frameset or before any other element; the end
tag of a formatting element ends an active one only when one of its name is active and not out of scope;
the formatting elements an end tag or an implied end took off the stack unended are opened again before the
next text or inline start tag, as the tree builder reconstructs them (``<p><b>x</p>y`` repeated nests the b's,
and ``<a><i></table>x<option>x<table>x`` the a, i and option: 5 s per MB in lexbor); a ruby part ends only the
p, rt, option, ... on top of the stack; a ``p`` start tag closes the p in button scope (past a label or a
span), a ``button`` the button in scope, a heading the heading that is the current node, an ``a`` the a with no
special element opened after it (the adoption agency keeps that one open)), and rewrites only a page that goes
past the bounds: a start
tag that would open an element deeper than ``MAX_OPEN`` (or a formatting element beyond ``MAX_FORMATTING``
active ones: opened and not ended, which the tree builder opens again inside every block that follows) is left out, with its end tag; a start tag with more than ``MAX_ATTRIBUTES`` attributes loses them
all, and so does an ``<html>`` or ``<body>`` tag that would take the attributes of all such tags past it (a
second one opens nothing: the tree builder merges its attributes into the element already open). The text stays. Every step of the scan is bounded, so the whole is linear in the page's size. A tag left out right after a
"<" keeps its ">": without it the "<" would open a tag from the text that follows (``<<div>section>``
would become ``<section>``, and the page would nest as deep as before).

A ``<select>`` costs lexbor O(children^2) (options, and even the tags it ignores inside one: 40,000 options
took 6 s to parse, 46 s in the engine at 80,000). Its content is never a block (``tags.SKIP_TAGS``), so the
scan leaves out the tags of a select beyond its first ``MAX_SELECT_TAGS`` (their text stays: one text node,
cheap), up to what ends a select for the tree builder (``</select>``, or a ``select``, ``input``,
``textarea`` or ``keygen`` start tag). Real pages hold at most a few thousand tags in one (a long country
list: 3,970 in WCXB's largest), and the page's text is the same with them left out.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from curate.extract.depth import count_lt, remember_depth
from curate.extract.jit import NO_REFCOUNTS

MAX_OPEN = 256        # elements open at once (lexbor's cost per start tag grows with it)
MAX_FORMATTING = 16   # formatting elements (b, i, font, a, ...) active at once (opened, not ended)
MAX_ATTRIBUTES = 256  # attributes of one element
MAX_SELECT_TAGS = 1024  # tags inside one <select> (options, tags it ignores): lexbor's cost grows with their square

VOID = ("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track",
        "wbr", "keygen", "basefont", "bgsound", "frame", "image")
# a start tag of one of these closes an open element of the same name first (p, li, table parts, ...)
SELF_CLOSING_KIN = ("p", "li", "dt", "dd", "tr", "td", "th", "thead", "tbody", "tfoot")
# ... and these only in their context: ruby's parts while a <ruby> is in scope, option and optgroup inside a
# <select>; elsewhere the tree builder nests them (``<rt>y<rt>y...`` or ``<optgroup>x...`` outside one nested
# 40,000 deep and took lexbor 15 s per 0.4 MB), but for an option or optgroup start tag that closes an option
# that is the current node
RUBY_PARTS = ("rb", "rt", "rp", "rtc")
# elements that end a scope (the HTML standard's "has an element in scope"): a ruby above one is not in scope
# (HTML elements; in svg and math the integration points below end a scope and are special, whatever their name)
SCOPE_ENDS = ("applet", "caption", "html", "table", "td", "th", "marquee", "object", "template")
# the HTML standard's "special" elements: an end tag of another element (a span, a custom element, a formatting
# element) closes nothing past one of them (``</em>`` after ``<em><section>`` leaves the section open, and the
# tree builder's adoption agency nests a new em inside it: 40,000 of them nested 80,000 deep, 5 s in lexbor)
SPECIAL = ("address", "applet", "area", "article", "aside", "base", "basefont", "bgsound", "blockquote", "body",
           "br", "button", "caption", "center", "col", "colgroup", "dd", "details", "dir", "div", "dl", "dt", "embed",
           "fieldset", "figcaption", "figure", "footer", "form", "frame", "frameset", "h1", "h2", "h3", "h4", "h5",
           "h6", "head", "header", "hgroup", "hr", "html", "iframe", "img", "input", "keygen", "li", "link",
           "listing", "main", "marquee", "menu", "meta", "nav", "noembed", "noframes", "noscript", "object", "ol",
           "p", "param", "plaintext", "pre", "script", "search", "section", "select", "source", "style", "summary",
           "table", "tbody", "td", "template", "textarea", "tfoot", "th", "thead", "title", "tr", "track", "ul",
           "wbr", "xmp")
# special elements whose end tag the tree builder reads as "any other end tag" in body (no rule of their own): it
# closes them only when no other special element is open inside (``<noscript><div></noscript>`` leaves both open)
ANY_OTHER_END = ("noscript", "iframe", "noembed", "noframes", "xmp", "textarea", "title", "script", "style")
# elements whose text the tokenizer reads raw (RCDATA / RAWTEXT) up to their own end tag, when the tree builder
# inserts them as HTML (in svg or math they are ordinary elements)
RAW_TEXT = ("textarea", "title", "script", "style", "xmp", "iframe", "noembed", "noframes")
# ("a" and "nobr" are formatting elements too, but a new one ends the one still active: they never pile up)
FORMATTING = ("b", "big", "code", "em", "font", "i", "s", "small", "strike", "strong", "tt", "u")

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_DROPPED_SLOTS = 1024


def name_hash(name: str) -> int:
    """FNV-1a of the lower-cased ASCII name (what ``_scan`` computes over the bytes)."""
    h = _FNV_OFFSET
    for b in name.lower().encode():
        h = ((h ^ b) * _FNV_PRIME) % 2**64
    return h


def _set(names) -> np.ndarray:
    """The names' hashes as an open-addressing table (``_slot``): a power of two of slots, four or more per
    name, 0 in an empty one; a hash h is looked for from slot (h ^ h >> 29) mod size on. One probe per lookup,
    where a binary search took a mispredicted branch per step (the scan looks up each tag's name in several
    sets)."""
    keys = sorted({name_hash(n) for n in names})
    size = 8
    while size < 4 * len(keys):
        size *= 2
    table = np.zeros(size, dtype=np.uint64)
    for h in keys:
        s = (h ^ (h >> 29)) & (size - 1)
        while table[s]:
            s = (s + 1) & (size - 1)
        table[s] = h
    return table


_VOID, _KIN, _FMT = _set(VOID), _set(SELF_CLOSING_KIN), _set(FORMATTING)
_RUBY_PARTS, _SCOPE_ENDS, _SPECIAL = _set(RUBY_PARTS), _set(SCOPE_ENDS), _set(SPECIAL)
_ANY_OTHER_END, _RAW_TEXT = _set(ANY_OTHER_END), _set(RAW_TEXT)
_PLAINTEXT, _SCRIPT = np.uint64(name_hash("plaintext")), np.uint64(name_hash("script"))
_LI, _P, _BUTTON, _FORM, _TABLE = (np.uint64(name_hash(n)) for n in ("li", "p", "button", "form", "table"))
_HR = np.uint64(name_hash("hr"))
_DD_DT = _set(("dd", "dt"))
# namespaces of the open elements (their content is foreign in svg and math: no void elements, no implied ends)
_NS_HTML, _NS_SVG, _NS_MATH = 0, 1, 2
_SVG, _MATH = np.uint64(name_hash("svg")), np.uint64(name_hash("math"))
# integration points (spec: "tree construction dispatcher"): what an open foreign element does to the start tags
# read while it is the current node
_IP_NONE = 0      # foreign content rules
_IP_HTML = 1      # HTML integration point (svg foreignObject, desc, title; math annotation-xml with an HTML
#                   encoding): every start tag read as HTML
_IP_MATH_TEXT = 2  # MathML text integration point (mi, mo, mn, ms, mtext): all but mglyph and malignmark as HTML
_IP_ANNOTATION = 3  # annotation-xml of another encoding: only an svg start tag read as HTML
_SVG_IP = _set(("foreignobject", "desc", "title"))
_MATH_TEXT_IP = _set(("mi", "mo", "mn", "ms", "mtext"))
_ANNOTATION_XML = np.uint64(name_hash("annotation-xml"))
_MGLYPH_MALIGNMARK = _set(("mglyph", "malignmark"))
_ENCODINGS = _set(("encoding",))
_HTML_ENCODINGS = _set(("text/html", "application/xhtml+xml"))
_FONT = np.uint64(name_hash("font"))
_FONT_BREAKOUT_ATTRS = _set(("color", "face", "size"))  # a <font> with one of these ends foreign content too
_BR = np.uint64(name_hash("br"))
# start tags that first "close a p element" when one is in button scope (spec: "in body" insertion mode; not
# table, which does so only outside quirks mode, and p itself, a SELF_CLOSING_KIN)
_CLOSES_P = _set(("address", "article", "aside", "blockquote", "center", "details", "dialog", "dir", "div", "dl",
                  "fieldset", "figcaption", "figure", "footer", "header", "hgroup", "main", "menu", "nav", "ol",
                  "search", "section", "summary", "ul", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "listing", "li",
                  "dd", "dt", "plaintext", "hr", "xmp", "form"))
_ADDRESS_DIV_P = _set(("address", "div", "p"))  # special elements an li, dd or dt start tag looks past
# start tags that end foreign content (spec: "rules for parsing tokens in foreign content": the tree builder pops
# to the nearest HTML element or integration point and reads the tag as HTML)
_BREAKOUT = _set(("b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em", "embed",
                  "h1", "h2", "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing", "menu", "meta",
                  "nobr", "ol", "p", "pre", "ruby", "s", "small", "span", "strong", "strike", "sub", "sup",
                  "table", "tt", "u", "ul", "var"))
# a table's parts: outside a table the tree builder ignores their start tags
_TABLE_PARTS = _set(("caption", "col", "colgroup", "tbody", "td", "tfoot", "th", "thead", "tr"))
# end tags that reach past an open select (lexbor's "in select in table": they close the select and the cell);
# any other end tag closes nothing past one (``<applet><select><div></applet>`` leaves all three open)
_PAST_SELECT = _set(("select", "table", "caption", "tbody", "td", "tfoot", "th", "thead", "tr"))
_FRAMESET = np.uint64(name_hash("frameset"))
_INPUT = np.uint64(name_hash("input"))
_HEAD = np.uint64(name_hash("head"))
_LISTS = _set(("ol", "ul"))  # with SCOPE_ENDS: list item scope (what "</li>" looks in)
_RUBY, _OPTION, _OPTGROUP = (np.uint64(name_hash(n)) for n in ("ruby", "option", "optgroup"))
_RT, _RP, _RTC = (np.uint64(name_hash(n)) for n in ("rt", "rp", "rtc"))
_A = np.uint64(name_hash("a"))
_HEADINGS = _set(("h1", "h2", "h3", "h4", "h5", "h6"))
# what "generate implied end tags" ends while it is the current node
_IMPLIED_ENDS = _set(("dd", "dt", "li", "optgroup", "option", "p", "rb", "rp", "rt", "rtc"))
_SELECT = np.uint64(name_hash("select"))
_ENDS_SELECT = _set(("input", "textarea", "keygen"))  # start tags that end an open select
# a second <html> or <body> start tag opens nothing: the tree builder adds its attributes to the element
# already open, each checked against those it holds (O(attributes^2) over all such tags)
_HTML, _BODY = np.uint64(name_hash("html")), np.uint64(name_hash("body"))
# the list of active formatting elements: what the tree builder reopens ("reconstructs") at the current node,
# before text and before a start tag that is not of a block (``_RECONSTRUCTS``), of those an end tag or an
# implied end took off the stack unended; elements above a marker (a cell, a caption, ...) leave the list
# with it
_A_NOBR = _set(("a", "nobr"))
_MARKERS = _set(("td", "th", "caption", "applet", "object", "marquee", "template"))
# (the special elements whose start tags reconstruct them; the others' do, but a ruby part's)
_RECONSTRUCTS = _set(("applet", "marquee", "object", "area", "br", "embed", "img", "keygen", "wbr", "input", "select",
                      "xmp", "button", "noscript"))


@nb.njit(**NO_REFCOUNTS)
def _slot(table, h):
    """Where the hash ``h`` is in a ``_set`` table, or -1."""
    mask = table.size - 1
    s = np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))
    while table[s] != 0:
        if table[s] == h:
            return s
        s = (s + 1) & mask
    return -1


@nb.njit(**NO_REFCOUNTS)
def _has(table, h):
    return _slot(table, h) >= 0


@nb.njit(cache=True, inline="always")
def _space(c):
    return c == 32 or c == 9 or c == 10 or c == 12 or c == 13


@nb.njit(cache=True, inline="always")
def _letter(c):
    return (65 <= c <= 90) or (97 <= c <= 122)


@nb.njit(**NO_REFCOUNTS)
def _tag_end(buf, j):
    """From just after a tag's name: (index of the ``>`` that ends the tag or -1, number of attributes);
    quoted values are skipped as the HTML tokenizer does."""
    n = buf.size
    attrs = 0
    while j < n:
        c = buf[j]
        if c == 62:  # >
            return j, attrs
        if _space(c) or c == 47:  # white space or /
            j += 1
            continue
        attrs += 1  # an attribute name starts
        while j < n and not _space(buf[j]) and buf[j] != 62 and buf[j] != 61 and buf[j] != 47:
            j += 1
        while j < n and _space(buf[j]):
            j += 1
        if j < n and buf[j] == 61:  # = value
            j += 1
            while j < n and _space(buf[j]):
                j += 1
            if j < n and (buf[j] == 34 or buf[j] == 39):
                q = buf[j]
                j += 1
                while j < n and buf[j] != q:
                    j += 1
                j += 1
            else:
                while j < n and not _space(buf[j]) and buf[j] != 62:
                    j += 1
    return -1, attrs


@nb.njit(**NO_REFCOUNTS)
def _unended(stack, ns, is_fmt, low, high, ended, pend, n_pend):
    """The stack popped from ``high`` down to ``low``: its formatting elements stay in the list of active
    formatting elements, to be reopened (``pend``, ``n_pend`` of them; at most ``pend.size``), except the one
    at ``ended`` (its own end tag ended it; -1: none) and those above a marker, which leave the list with it.
    The new ``n_pend``."""
    for k in range(low, high):
        if ns[k] != _NS_HTML:
            continue
        if _has(_MARKERS, stack[k]):
            break
        if k != ended and (is_fmt[k] or _has(_A_NOBR, stack[k])) and n_pend < pend.size:
            pend[n_pend] = stack[k]
            n_pend += 1
    return n_pend


@nb.njit(**NO_REFCOUNTS)
def _reopen(stack, is_fmt, is_kin, ns, ip, p_scope, depth, fmt, pend, n_pend, max_open):
    """The tree builder reconstructs the active formatting elements: those in ``pend`` are opened again at the
    current node, as many as the stack holds below ``max_open``. The new depth."""
    for q in range(n_pend):
        if depth >= max_open:
            break
        stack[depth] = pend[q]
        is_fmt[depth] = _has(fmt, pend[q])
        is_kin[depth] = False
        ns[depth] = _NS_HTML
        ip[depth] = _IP_NONE
        p_scope[depth] = _p_scope(stack, ns, ip, p_scope, depth)
        depth += 1
    return depth


@nb.njit(**NO_REFCOUNTS)
def _has_text(buf, a, b):
    """Whether ``buf[a:b]`` holds a character that is not HTML white space."""
    for k in range(a, b):
        if not _space(buf[k]):
            return True
    return False


# a compiled kernel kept whole: one state machine over the bytes, its stack and counters in locals (split into
# helpers it would pass that state back and forth per tag)
# what ``depth.too_deep_utf8`` reads off a page, counted by the scan (``_div_span_at``): "<" visited, exact
# "<div" / "<DIV" / "<span", div / span tags, those not followed by a word character, the deepest nesting of
# those, and whether a "<" could not be read in ASCII (then the depth scan reads the page itself)
_LT, _EXACT, _TAGS, _KEPT, _DEEPEST, _UNSURE, _DEPTH = range(7)


@nb.njit(**NO_REFCOUNTS)
def _div_span_at(buf, i, facts):
    """The "<" at byte i as ``depth._tag_scan`` and ``too_deep_utf8`` count it, in ASCII: a name that folds to
    "div" or "span" (``</?(?:div|span)\\b``, case-insensitive), a step in or out of the nesting when the byte
    after it is not a word character. A non-ASCII byte where it could matter (U+017F folds to "s", U+0130 and
    U+0131 to "i", ``\\b`` knows every script's letters): unsure."""
    n = buf.size
    facts[_LT] += 1
    j = i + 1
    close = j < n and buf[j] == 47
    if close:
        j += 1
    b0 = buf[j] if j < n else 0  # past the page's end: NUL, as the depth scan reads it there
    if b0 >= 0x80:
        facts[_UNSURE] |= b0 == 0xC5  # U+017F ("s" under re.I) starts with 0xC5
        return
    low = b0 | 32
    if low != 100 and low != 115:  # d, s
        return
    b1 = buf[j + 1] if j + 1 < n else 0
    b2 = buf[j + 2] if j + 2 < n else 0
    b3 = buf[j + 3] if j + 3 < n else 0
    b4 = buf[j + 4] if j + 4 < n else 0
    if b1 >= 0x80 or b2 >= 0x80 or b3 >= 0x80:
        facts[_UNSURE] = 1
        return
    if low == 100 and b1 | 32 == 105 and b2 | 32 == 118:  # div
        if not close and ((b0 == 100 and b1 == 105 and b2 == 118) or (b0 == 68 and b1 == 73 and b2 == 86)):
            facts[_EXACT] += 1
        after = b3
    elif low == 115 and b1 | 32 == 112 and b2 | 32 == 97 and b3 | 32 == 110:  # span
        if not close and b0 == 115 and b1 == 112 and b2 == 97 and b3 == 110:
            facts[_EXACT] += 1
        after = b4
    else:
        return
    facts[_TAGS] += 1
    if after >= 0x80:
        facts[_UNSURE] = 1
        return
    if (48 <= after <= 57) or (65 <= after <= 90) or (97 <= after <= 122) or after == 95:  # \\w: no tag
        return
    facts[_KEPT] += 1
    facts[_DEPTH] += -1 if close else 1
    if facts[_DEPTH] > facts[_DEEPEST]:
        facts[_DEEPEST] = facts[_DEPTH]


@nb.njit(**NO_REFCOUNTS)
def _name_hash_at(buf, j, end, stop):
    """(FNV-1a hash of the lower-cased name from ``j``, where it ends): up to white space, "/", ``stop`` or
    ``end``; the hash ``name_hash`` gives the same name."""
    h = np.uint64(_FNV_OFFSET)
    while j < end and not _space(buf[j]) and buf[j] != 47 and buf[j] != stop:
        c = buf[j]
        if 65 <= c <= 90:
            c += 32
        h = (h ^ np.uint64(c)) * np.uint64(_FNV_PRIME)
        j += 1
    return h, j


@nb.njit(**NO_REFCOUNTS)
def _attr_value(buf, j, end, names):
    """From just after a tag's name to its ``>`` at ``end``: (start, end) of the value of the first attribute
    whose lower-cased name hashes into ``names`` ((j, j) for one without a value), or (-1, -1)."""
    while j < end:
        if _space(buf[j]) or buf[j] == 47:
            j += 1
            continue
        h, j = _name_hash_at(buf, j, end, 61)  # an attribute's name ends at "=", "/" or white space
        while j < end and _space(buf[j]):
            j += 1
        vs = ve = j
        if j < end and buf[j] == 61:  # = value, as _tag_end reads it
            j += 1
            while j < end and _space(buf[j]):
                j += 1
            if j < end and (buf[j] == 34 or buf[j] == 39):
                q = buf[j]
                vs = j + 1
                j += 1
                while j < end and buf[j] != q:
                    j += 1
                ve = j
                j += 1
            else:
                vs = j
                while j < end and not _space(buf[j]):
                    j += 1
                ve = j
        if _has(names, h):
            return vs, ve
    return -1, -1


@nb.njit(**NO_REFCOUNTS)
def _value_in(buf, vs, ve, words):
    """Whether the bytes ``buf[vs:ve]``, lower-cased, hash into ``words``."""
    h = np.uint64(_FNV_OFFSET)
    for k in range(vs, ve):
        c = buf[k]
        if 65 <= c <= 90:
            c += 32
        h = (h ^ np.uint64(c)) * np.uint64(_FNV_PRIME)
    return _has(words, h)


@nb.njit(**NO_REFCOUNTS)
def _reads_as_html(stack, ns, ip, depth, h):
    """The tree construction dispatcher: whether a start tag named ``h`` follows the HTML rules (the current
    node is an HTML element or an integration point that lets it through) or the rules for foreign content."""
    if depth == 0 or ns[depth - 1] == _NS_HTML:
        return True
    kind = ip[depth - 1]
    return kind == _IP_HTML or (kind == _IP_MATH_TEXT and not _has(_MGLYPH_MALIGNMARK, h)) or (
        kind == _IP_ANNOTATION and h == _SVG)


@nb.njit(**NO_REFCOUNTS)
def _breaks_out(buf, h, j, end):
    """Foreign content: a start tag of an HTML-only element (and a <font> with color, face or size)."""
    if _has(_BREAKOUT, h):
        return True
    return h == _FONT and _attr_value(buf, j, end, _FONT_BREAKOUT_ATTRS)[0] >= 0


@nb.njit(**NO_REFCOUNTS)
def _pop_foreign(ns, ip, depth):
    """Foreign content, a breakout start tag or "</p>" / "</br>": pop until the current node is an HTML element,
    an HTML integration point or a MathML text integration point."""
    while depth > 0 and ns[depth - 1] != _NS_HTML and ip[depth - 1] != _IP_HTML and ip[depth - 1] != _IP_MATH_TEXT:
        depth -= 1
    return depth


@nb.njit(**NO_REFCOUNTS)
def _foreign_ip(buf, h, ns, j, end):
    """What a foreign element named ``h`` in namespace ``ns`` is as an integration point (``_IP_*``)."""
    if ns == _NS_SVG:
        return _IP_HTML if _has(_SVG_IP, h) else _IP_NONE
    if _has(_MATH_TEXT_IP, h):
        return _IP_MATH_TEXT
    if h == _ANNOTATION_XML:
        vs, ve = _attr_value(buf, j, end, _ENCODINGS)
        return _IP_HTML if vs >= 0 and _value_in(buf, vs, ve, _HTML_ENCODINGS) else _IP_ANNOTATION
    return _IP_NONE


@nb.njit(**NO_REFCOUNTS)
def _foreign_end(stack, ns, depth, h):
    """Foreign content, "any other end tag": the place of the foreign element of that name the tree builder
    pops to, walking down from the current node over foreign elements, or -1 (the tag is then read as HTML)."""
    for k in range(depth - 1, 0, -1):  # the topmost element is never popped
        if ns[k] == _NS_HTML:
            return -1
        if stack[k] == h:
            return k
    return -1


@nb.njit(**NO_REFCOUNTS)
def _special_at(stack, ns, ip, k):
    """The HTML standard's "special" category for the open element at k (foreign: the integration points)."""
    return _has(_SPECIAL, stack[k]) if ns[k] == _NS_HTML else ip[k] != _IP_NONE


@nb.njit(**NO_REFCOUNTS)
def _scope_end_at(stack, ns, ip, k):
    """Whether the open element at k ends "has an element in scope" (foreign: the integration points)."""
    return _has(_SCOPE_ENDS, stack[k]) if ns[k] == _NS_HTML else ip[k] != _IP_NONE


@nb.njit(**NO_REFCOUNTS)
def _html_end(stack, ns, ip, depth, h):
    """An end tag read as HTML: the place of the HTML element it pops to, or -1 when it closes nothing. An
    element with an end tag rule of its own is found in scope ("</td>" in a table nested in a cell, "</li>" past
    a list, "</p>" past a button: nothing); "any other end tag" (a span, a custom element, a formatting element, a
    noscript) closes nothing past a special element."""
    own_rule = _has(_SPECIAL, h) and not _has(_ANY_OTHER_END, h)
    for k in range(depth - 1, -1, -1):
        if stack[k] == h and ns[k] == _NS_HTML:
            return k
        if not own_rule:
            if _special_at(stack, ns, ip, k):
                return -1
        elif _scope_end_at(stack, ns, ip, k) or (ns[k] == _NS_HTML and (
                (h == _LI and _has(_LISTS, stack[k])) or (h == _P and stack[k] == _BUTTON)
                or (stack[k] == _SELECT and not _has(_PAST_SELECT, h)))):
            return -1
    return -1


@nb.njit(**NO_REFCOUNTS)
def _select_in_scope(stack, ns, ip, depth):
    """The place of an open select "in scope" (-1: none): lexbor closes it for a ``<select>`` start tag (which
    then opens nothing) or an ``<input>`` read inside it, past any element but a scope's end."""
    for k in range(depth - 1, -1, -1):
        if stack[k] == _SELECT and ns[k] == _NS_HTML:
            return k
        if _scope_end_at(stack, ns, ip, k):
            return -1
    return -1


@nb.njit(**NO_REFCOUNTS)
def _opens_frameset(stack, ns, depth):
    """A ``<frameset>`` start tag read as HTML: whether the tree builder opens one. In "in frameset" (the
    current node a frameset) it nests; in body it replaces the body only while nothing else was opened
    ("frameset-ok"; the scan opens it while only html, head and body are open) and is ignored otherwise
    (``<rt></frameset><frameset>`` repeated: the frameset ignored, its end tag too, the rt nested 3,000 deep)."""
    if depth > 0 and stack[depth - 1] == _FRAMESET and ns[depth - 1] == _NS_HTML:
        return True
    for k in range(depth):
        if not (ns[k] == _NS_HTML and (stack[k] == _HTML or stack[k] == _HEAD or stack[k] == _BODY)):
            return False
    return True


@nb.njit(**NO_REFCOUNTS)
def _raw_text_end(buf, i, name_start, name_end, facts):
    """From byte i inside a raw text element (the name at ``buf[name_start:name_end]``): the "<" of its end tag
    (``</name`` then white space, "/" or ">", any case), or the page's end; every "<" passed is counted for the
    depth scan (``_div_span_at``)."""
    n = buf.size
    m = name_end - name_start
    while i < n:
        if buf[i] == 60:
            if i + 2 + m < n and buf[i + 1] == 47:
                same = True
                for k in range(m):
                    if buf[i + 2 + k] | 32 != buf[name_start + k] | 32:
                        same = False
                        break
                c = buf[i + 2 + m]
                if same and (_space(c) or c == 47 or c == 62):
                    return i
            _div_span_at(buf, i, facts)
        i += 1
    return n


@nb.njit(**NO_REFCOUNTS)
def _p_scope(stack, ns, ip, p_scope, k):
    """For the element just opened at k: the nearest p "in button scope" from it (spec: the scope ends at the
    scope's elements and at a button), or -1."""
    if ns[k] == _NS_HTML and stack[k] == _P:
        return k
    if _scope_end_at(stack, ns, ip, k) or (ns[k] == _NS_HTML and stack[k] == _BUTTON):
        return -1
    return p_scope[k - 1] if k > 0 else -1


@nb.njit(**NO_REFCOUNTS)
def _to_end(buf, i, facts):
    """Past "<plaintext>" the page is text: its "<" are counted for the depth scan, nothing more."""
    for k in range(i, buf.size):
        if buf[k] == 60:
            _div_span_at(buf, k, facts)
    return buf.size


@nb.njit(**NO_REFCOUNTS)
def _ends_formatting(stack, ns, ip, depth, h):
    """Whether the end tag of formatting element ``h`` takes one off the list of active formatting elements
    (spec: adoption agency): yes when none is open or the nearest open one is in scope (past a block too: the
    agency moves it into the block, then pops it); no when it is open past a scope's end (a cell, an applet,
    an integration point; for lexbor a select too): "not in scope", the end tag is ignored and the element
    stays active (``<em>x<select></em>x`` repeated nested 1,500 deep)."""
    for k in range(depth - 1, -1, -1):
        if stack[k] == h and ns[k] == _NS_HTML:
            return True
        if _scope_end_at(stack, ns, ip, k) or (stack[k] == _SELECT and ns[k] == _NS_HTML):
            for m in range(k):
                if stack[m] == h and ns[m] == _NS_HTML:
                    return False
            return True
    return True


@nb.njit(**NO_REFCOUNTS)
def _end_formatting(fmt, fmt_active, h):
    """The end tag of formatting element ``h`` (in ``fmt``): 1 when one of that name is active (the adoption
    agency takes it off the list of active formatting elements), else 0: ``</i>`` with no i active ends nothing,
    and the b still active is opened again in every block that follows (``<div>x<b>x</div>x</i>x`` repeated
    nested 3,000 deep in lexbor while the scan, counting the ``</i>`` as an end, let every ``<b>`` through)."""
    k = _slot(fmt, h)
    if fmt_active[k] == 0:
        return 0
    fmt_active[k] -= 1
    return 1


@nb.njit(cache=True)
def _scan(buf, void, kin, fmt, max_open, max_fmt, max_attrs, select, ends_select, max_select, facts):
    """One pass: (keep mask per byte or an empty one when nothing changes, tags left out, tags whose attributes
    were cut, deepest stack seen); ``facts`` (``_LT`` ...) filled for ``depth.too_deep_utf8``. The
    attributes of all ``<html>`` start tags count as one element's, and those of all ``<body>`` tags as
    another's: the tree builder merges them."""
    n = buf.size
    stack = np.zeros(max_open + 1, dtype=np.uint64)
    is_fmt = np.zeros(max_open + 1, dtype=np.bool_)  # per open element: a formatting element
    is_kin = np.zeros(max_open + 1, dtype=np.bool_)
    ns = np.zeros(max_open + 1, dtype=np.uint8)  # per open element: its namespace (_NS_*)
    ip = np.zeros(max_open + 1, dtype=np.uint8)  # per open foreign element: what integration point (_IP_*)
    # per open element: the place of the nearest p in button scope from it (-1: none), kept as elements open
    p_scope = np.full(max_open + 1, -1, dtype=np.int64)
    dropped = np.zeros(_DROPPED_SLOTS, dtype=np.int64)
    # allocated up front: an array assigned inside the loop made numba count references on every tag (3.5x
    # slower on real pages); nothing changed -> an empty mask
    keep = np.ones(n, dtype=np.bool_)
    depth = 0
    n_fmt = 0  # active formatting elements: opened and not ended (a block closing them does not end them:
    # the tree builder opens them again in every block that follows)
    # per formatting name (its slot in ``fmt``): how many are active; the end tag of one not active ends nothing
    # (spec: adoption agency, "no such element in the list of active formatting elements": any other end tag)
    fmt_active = np.zeros(fmt.size, dtype=np.int64)
    left_out = 0
    cut = 0
    deepest = 0
    html_attrs = 0  # attributes the <html> start tags kept so far (merged into one element)
    body_attrs = 0  # and the <body> start tags
    in_select = False  # inside a select (the tree builder's "in select" mode)
    select_tags = 0    # tags read since it opened
    last_kept = -1  # the last byte the output keeps before the tag at hand (-1: none)
    prev_end = -1   # where the last tag read ended
    # formatting elements taken off the stack unended (``_unended``): reopened before the next text or inline
    # start tag (``_reopen``); text read since text_from (a raw text element's text is not)
    pend = np.zeros(max_fmt + 2, dtype=np.uint64)
    n_pend = 0
    text_from = 0
    i = 0
    while i < n:
        if buf[i] != 60:  # <
            i += 1
            continue
        _div_span_at(buf, i, facts)
        start = i
        if start - 1 > prev_end:
            last_kept = start - 1  # text since the last tag
        closing = i + 1 < n and buf[i + 1] == 47
        j = i + 2 if closing else i + 1
        if j >= n or not _letter(buf[j]):
            i += 1
            continue
        name_start = j
        h, j = _name_hash_at(buf, j, n, 62)  # a tag's name ends at ">", "/" or white space
        name_end = j
        end, attrs = _tag_end(buf, j)
        if end < 0:
            break  # a tag cut off by the end of the page: the tokenizer drops it
        if n_pend > 0 and not in_select and _has_text(buf, text_from, start):  # text reopens them
            depth = _reopen(stack, is_fmt, is_kin, ns, ip, p_scope, depth, fmt, pend, n_pend, max_open)
            n_pend = 0
            deepest = max(deepest, depth)
        i = end + 1
        prev_end = end
        text_from = i
        pend_before = n_pend
        slot = h % np.uint64(_DROPPED_SLOTS)
        drop = False
        opens_select = False  # a select start tag read in body: it reopens formatting elements as any inline tag
        if in_select:
            if h == select or (not closing and _has(ends_select, h)):
                in_select = False  # "</select>", or a tag the tree builder ends the select for
            else:
                select_tags += 1
                drop = select_tags > max_select
        elif h == select and not closing:
            in_select = True
            opens_select = True
            select_tags = 0
        if drop:
            pass  # a select's tag past its bound: left out below, nothing else about it counts
        elif closing:
            found = -1
            as_html = True
            if depth > 0 and ns[depth - 1] != _NS_HTML:  # the rules for foreign content
                if h == _P or h == _BR:
                    depth = _pop_foreign(ns, ip, depth)  # "</p>", "</br>": out of the foreign content, as HTML
                else:
                    found = _foreign_end(stack, ns, depth, h)
                    as_html = found < 0
            if as_html and h == _FRAMESET:
                # "in frameset": "</frameset>" pops the current node, a frameset; in body it closes nothing
                if depth > 0 and stack[depth - 1] == _FRAMESET and ns[depth - 1] == _NS_HTML:
                    found = depth - 1
            elif as_html and h != _FORM:
                # ("</form>" takes the form out of the stack, not what was opened inside it: depth as it was)
                found = _html_end(stack, ns, ip, depth, h)
            if dropped[slot] > 0 and found < 0:
                dropped[slot] -= 1
                drop = True
            else:
                if found >= 0:
                    n_pend = _unended(stack, ns, is_fmt, found, depth, found, pend, n_pend)
                    depth = found
                if as_html and _has(fmt, h) and _ends_formatting(stack, ns, ip, depth, h):
                    n_fmt -= _end_formatting(fmt, fmt_active, h)
        else:
            before = depth  # a start tag left out changes nothing: the stack as it was
            as_html = _reads_as_html(stack, ns, ip, depth, h)
            if not as_html and _breaks_out(buf, h, name_end, end):
                depth = _pop_foreign(ns, ip, depth)  # an HTML start tag ends the svg or math: read as HTML
                as_html = True
            opens = True
            acts_kin = False
            new_ns = _NS_HTML
            if as_html and (h == _SELECT or h == _INPUT):
                k = _select_in_scope(stack, ns, ip, depth)
                if k >= 0:
                    n_pend = _unended(stack, ns, is_fmt, k, depth, -1, pend, n_pend)
                    depth = k  # the open select ends here ("<select><div><select>": one select, not two)
                    opens = h != _SELECT
            if not as_html:
                new_ns = ns[depth - 1]  # foreign content: an element in the current node's namespace
                opens = not (end > 0 and buf[end - 1] == 47)  # "<path/>": opened and closed; no void element
            elif _has(void, h):
                opens = False
                if h == _HR and depth > 0 and p_scope[depth - 1] >= 0:
                    n_pend = _unended(stack, ns, is_fmt, p_scope[depth - 1], depth, -1, pend, n_pend)
                    depth = p_scope[depth - 1]  # "<hr>" closes a p in button scope
            elif _has(_TABLE_PARTS, h):  # outside any open table the tree builder ignores a table's part
                opens = False
                for k in range(depth - 1, -1, -1):
                    if stack[k] == _TABLE:
                        opens = True
                        break
            elif h == _FRAMESET:
                opens = _opens_frameset(stack, ns, depth)
            elif h == _SVG:
                new_ns = _NS_SVG
            elif h == _MATH:
                new_ns = _NS_MATH
            if opens and as_html:
                opens = not (new_ns != _NS_HTML and end > 0 and buf[end - 1] == 47)  # "<svg/>"
                acts_kin = _has(kin, h)
                ruby_part = _has(_RUBY_PARTS, h)
                if h == _OPTION or h == _OPTGROUP:
                    acts_kin = in_select
                    if not in_select and depth > 0 and stack[depth - 1] == _OPTION and ns[depth - 1] == _NS_HTML:
                        depth -= 1  # outside a select: an option that is the current node is closed, nothing more
                elif ruby_part:
                    for k in range(depth - 1, -1, -1):  # a ruby in scope
                        if stack[k] == _RUBY:
                            acts_kin = True
                            break
                        if _scope_end_at(stack, ns, ip, k) or (stack[k] == _SELECT and ns[k] == _NS_HTML):
                            break  # (lexbor: nor past a select, ``<ruby><select><rt>x<rt>`` nests the rt)
                if acts_kin and ruby_part:
                    # a ruby in scope: "generate implied end tags" (rt and rp leave an rtc open): the open p, rt,
                    # option, ... on top of the stack end, and nothing past them (``<rt>x<b>y<rt>`` nests the
                    # second rt in the b)
                    while (depth > 0 and ns[depth - 1] == _NS_HTML and _has(_IMPLIED_ENDS, stack[depth - 1])
                           and not ((h == _RT or h == _RP) and stack[depth - 1] == _RTC)):
                        depth -= 1
                elif acts_kin:  # closes an open element of its name above formatting elements and its kin
                    if h == _LI or _has(_DD_DT, h):
                        # li: the open li, past any element but a special one (an address, div or p pass);
                        # dd and dt: the open dd or dt, alike (``<li>x<span>y<li>``: side by side)
                        for k in range(depth - 1, -1, -1):
                            if ns[k] == _NS_HTML and (stack[k] == h or (h != _LI and _has(_DD_DT, stack[k]))):
                                n_pend = _unended(stack, ns, is_fmt, k, depth, -1, pend, n_pend)
                                depth = k
                                break
                            if _special_at(stack, ns, ip, k) and not (
                                    ns[k] == _NS_HTML and _has(_ADDRESS_DIV_P, stack[k])):
                                break
                    else:
                        for k in range(depth - 1, -1, -1):
                            if stack[k] == h and ns[k] == _NS_HTML:
                                n_pend = _unended(stack, ns, is_fmt, k, depth, -1, pend, n_pend)
                                depth = k
                                break
                            if not (is_fmt[k] or is_kin[k]):
                                break
                if h == _A and not in_select:  # an open a ends first where no special element was opened
                    # after it (the adoption agency without a furthest block: "<a>x<b>y<a>", side by side; with
                    # one the agency keeps it open, and the scan counts the a open too)
                    for k in range(depth - 1, -1, -1):
                        if _special_at(stack, ns, ip, k):
                            break
                        if stack[k] == _A and ns[k] == _NS_HTML:
                            n_pend = _unended(stack, ns, is_fmt, k, depth, k, pend, n_pend)
                            depth = k
                            break
                if h == _BUTTON:  # a button in scope is closed first ("<button><b>x<button>": two, side by side)
                    for k in range(depth - 1, -1, -1):
                        if stack[k] == _BUTTON and ns[k] == _NS_HTML:
                            n_pend = _unended(stack, ns, is_fmt, k, depth, -1, pend, n_pend)
                            depth = k
                            break
                        if _scope_end_at(stack, ns, ip, k) or (stack[k] == _SELECT and ns[k] == _NS_HTML):
                            break  # (nor past a select, as in lexbor)
                if ((h == _P and not in_select) or _has(_CLOSES_P, h)) and depth > 0 and p_scope[depth - 1] >= 0:
                    # "close a p element" in button scope first (a p too, past a label or a span: ``<p>x<span>x<p>``;
                    # in a select lexbor closes nothing past it)
                    n_pend = _unended(stack, ns, is_fmt, p_scope[depth - 1], depth, -1, pend, n_pend)
                    depth = p_scope[depth - 1]
                if _has(_HEADINGS, h) and depth > 0 and ns[depth - 1] == _NS_HTML and _has(_HEADINGS, stack[depth - 1]):
                    depth -= 1  # a heading that is the current node is closed ("<h2>x<h2>": side by side)
            # an inline start tag (not a block's) reopens the formatting elements taken off the stack unended
            reopens = n_pend > 0 and as_html and (not in_select or opens_select) and (
                _has(_RECONSTRUCTS, h) or not (_has(_SPECIAL, h) or _has(_RUBY_PARTS, h)))
            if opens:
                f = as_html and _has(fmt, h)
                if depth + (n_pend if reopens else 0) >= max_open or (f and n_fmt >= max_fmt):
                    # left out: so is what it would have done (a formatting tag that would have ended an svg
                    # leaves the svg open: with the tag gone, the svg's content goes on)
                    drop = True
                    dropped[slot] += 1
                    depth = before
                    n_pend = pend_before
                else:
                    if reopens:
                        depth = _reopen(stack, is_fmt, is_kin, ns, ip, p_scope, depth, fmt, pend, n_pend, max_open)
                        n_pend = 0
                    stack[depth] = h
                    is_fmt[depth] = f
                    is_kin[depth] = acts_kin
                    ns[depth] = new_ns
                    ip[depth] = _IP_NONE if new_ns == _NS_HTML else _foreign_ip(buf, h, new_ns, name_end, end)
                    p_scope[depth] = _p_scope(stack, ns, ip, p_scope, depth)
                    depth += 1
                    if f:
                        n_fmt += 1
                        fmt_active[_slot(fmt, h)] += 1
                    if depth > deepest:
                        deepest = depth
                    if new_ns == _NS_HTML and h == _PLAINTEXT:
                        i = _to_end(buf, i, facts)  # "<plaintext>": the rest of the page is its text
                    elif new_ns == _NS_HTML and _has(_RAW_TEXT, h) and (not in_select or h == _SCRIPT):
                        i = _raw_text_end(buf, i, name_start, name_end, facts)  # its text up to its end tag
                        text_from = i  # (the element's text, not the body's: it reopens nothing)
            elif reopens and depth < max_open:  # a void element (img, br, input) reopens them too
                depth = _reopen(stack, is_fmt, is_kin, ns, ip, p_scope, depth, fmt, pend, n_pend, max_open)
                n_pend = 0
                deepest = max(deepest, depth)
        cut_attrs = not closing and attrs > max_attrs
        if not (drop or closing or cut_attrs) and attrs > 0:
            if h == _HTML:
                cut_attrs = html_attrs + attrs > max_attrs
                html_attrs += 0 if cut_attrs else attrs
            elif h == _BODY:
                cut_attrs = body_attrs + attrs > max_attrs
                body_attrs += 0 if cut_attrs else attrs
        if drop or cut_attrs:
            if drop:
                left_out += 1
                keep[start:end + 1] = False
                if last_kept >= 0 and buf[last_kept] == 60:
                    # a "<" just before: with the tag gone it would open a tag from the text after it
                    # ("<<div>section>" would become "<section>"); its ">" stays, and "<>" is text
                    keep[end] = True
                    last_kept = end
            else:  # only the name is kept: "<name" + ">"
                cut += 1
                keep[name_end:end] = False
                last_kept = end
        else:
            last_kept = end
    if left_out == 0 and cut == 0:
        return keep[:0], left_out, cut, deepest
    return keep, left_out, cut, deepest


def bound_shape(data: bytes) -> tuple[bytes, int, int]:
    """(the page with its depth, open formatting elements, attributes per element (the ``<html>`` tags'
    together, and the ``<body>`` tags') and tags per ``<select>`` bounded, start tags left out, tags whose attributes were cut). The page itself when it is within the
    bounds."""
    if len(data) < 4 * MAX_ATTRIBUTES and data.count(b"<") <= min(MAX_OPEN, MAX_FORMATTING):
        return data, 0, 0  # too few tags to go past any bound
    buf = np.frombuffer(data, dtype=np.uint8)
    facts = np.zeros(_DEPTH + 1, dtype=np.int64)
    keep, left_out, cut, _ = _scan(buf, _VOID, _KIN, _FMT, MAX_OPEN, MAX_FORMATTING, MAX_ATTRIBUTES,
                                   _SELECT, _ENDS_SELECT, MAX_SELECT_TAGS, facts)
    if keep.size == 0:
        # the page as it is: what the depth scan would count on it is known when every "<" was read outside a
        # tag (none inside an attribute value, none after a tag cut off by the page's end) and in ASCII
        if not facts[_UNSURE] and facts[_LT] == count_lt(buf):
            remember_depth(data, *facts[[_LT, _EXACT, _TAGS, _KEPT, _DEEPEST]].tolist())
        return data, 0, 0
    return buf[keep].tobytes(), left_out, cut


def deepest_open(data: bytes) -> int:
    """How deep the scan's stack of open elements went (for tests and benchmarks)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    big = len(data) // 2 + 1  # more elements than that cannot be open
    facts = np.zeros(_DEPTH + 1, dtype=np.int64)
    return int(_scan(buf, _VOID, _KIN, _FMT, big, big, big, _SELECT, _ENDS_SELECT, big, facts)[3])


_WARM = []


def warm_shape() -> None:
    """Compile the scan (or load it from numba's cache) once per process, before a time limit is armed."""
    if not _WARM:
        bound_shape(b"<b>" * (MAX_OPEN + 1))
        _WARM.append(True)

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

Scripts, styles, comments, SVG and templates are cut out of the HTML with one regular expression before
parsing (:func:`strip_html`): that is what makes multi-megabyte pages (mostly inline JavaScript and JSON)
cheap, and what the stage's size limit is applied to.

Parsing is lexbor (an HTML5 parser in C, through selectolax), walked once in Python; all per-block
arithmetic is numpy over the finished block table.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# ----------------------------------------------------------------------------------------- stripping
# "<script ...> ... </script>" (and style, svg, template) with the body matched as runs of non-"<" characters
# and "<" not starting the closing tag (linear, ~0.5 ms for a 150 kB page), and HTML comments.
_STRIP_RE = re.compile(r"<(script|style|svg|template)\b[^>]*>[^<]*(?:<(?!/\1\s*>)[^<]*)*</\1\s*>|<!--.*?-->",
                       re.S | re.I)
_OG_TYPE_RE = re.compile(r"""og:type["']?\s+content=["']?([\w.:-]+)""", re.I)


_NEST_RE = re.compile(r"</?(?:div|span)\b", re.I)


def too_deep(html: str, limit: int) -> bool:
    """Whether ``<div>`` / ``<span>`` elements nest more than ``limit`` deep (counted from the tags, without
    parsing). lexbor's tree building costs O(elements x depth) in C, where no signal reaches (20,000 nested
    ``<div>`` take 5 s); real pages nest 10-40 deep."""
    if html.count("<div") + html.count("<span") + html.count("<DIV") <= limit:
        return False
    marks = "".join([m[1] for m in _NEST_RE.findall(html)])
    closing = np.frombuffer(marks.encode("ascii", "replace"), dtype=np.uint8) == ord("/")
    return closing.size > 0 and int(np.cumsum(1 - 2 * closing.astype(np.int32)).max()) > limit


def strip_html(html: str) -> str:
    """The HTML without scripts, styles, comments, SVG, templates and noscript fallbacks."""
    return _STRIP_RE.sub(" ", html)


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


@dataclass
class Blocks:
    texts: list[str]          # one string per block, whitespace collapsed
    features: np.ndarray      # float32 [n_blocks, n_features]
    tags: list[str]           # owning tag per block (for output layout and headings)
    groups: np.ndarray        # int64 [n_blocks, 4]: the element 1, 2, 4 and 8 levels above each block's owner


_class_cache: dict[str, int] = {}


def _class_mask(s: str) -> int:
    m = _class_cache.get(s)
    if m is None:
        m = 0
        for w in _CLASS_WORD_RE.findall(s.lower()):
            m |= _CLASS_WORD_BIT[w]
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


def parse(html: str):
    """lexbor (selectolax) tree of the (already stripped) HTML, or None."""
    from selectolax.lexbor import LexborHTMLParser

    if not html or html.isspace():
        return None
    try:
        tree = LexborHTMLParser(html)
    except Exception:  # selectolax raises on a few unparsable inputs; that page has no text then
        return None
    return tree if tree.body is not None else None


class _Walk:
    """One pass over the tree, collecting blocks and per-element text totals."""

    def __init__(self):
        self.el_parent: list[int] = []
        self.el_chars: list[int] = []
        self.el_link: list[int] = []
        self.b_text: list[str] = []
        self.b_link: list[int] = []
        self.b_el: list[int] = []
        self.b_own: list[int] = []
        self.b_anc: list[int] = []
        self.b_near: list[int] = []
        self.b_any: list[int] = []
        self.b_depth: list[int] = []
        self.b_tag: list[str] = []
        self.parts: list[str] = []
        self.link = 0
        self.extra_anc = 0   # flags of inline elements seen in the current block
        self.extra_near = 0

    def flush(self, owner):
        parts = self.parts
        if not parts:
            return
        raw = "".join(parts)
        text = " ".join(raw.split()) if owner[6] != "pre" else raw.strip("\n")
        self.parts = []
        link, self.link = self.link, 0
        ea, en = self.extra_anc, self.extra_near
        self.extra_anc = self.extra_near = 0
        if not text or text.isspace():
            return
        n = len(text)
        lk = min(link, n)
        self.b_text.append(text)
        self.b_link.append(lk)
        ei = owner[0]
        self.b_el.append(ei)
        self.b_own.append(owner[1])
        self.b_anc.append(owner[2] | ea)
        self.b_near.append(owner[3] | en)
        self.b_any.append(owner[4] | en)
        self.b_depth.append(owner[5])
        self.b_tag.append(owner[6])
        el_chars, el_link, el_parent = self.el_chars, self.el_link, self.el_parent
        while ei >= 0:
            el_chars[ei] += n
            el_link[ei] += lk
            ei = el_parent[ei]

    def new_owner(self, parent, tag, cm, anc, cls_any):
        idx = len(self.el_parent)
        self.el_parent.append(parent[0] if parent is not None else -1)
        self.el_chars.append(0)
        self.el_link.append(0)
        own = _OWN_INDEX.get(tag, _SPAN_OTHER)
        near = cm | (parent[7] if parent is not None else 0)
        depth = parent[5] + 1 if parent is not None else 0
        # (element index, own tag, ancestor tag bits, near class bits, any class bits, depth, tag, own class bits)
        return (idx, own, anc, near, cls_any, depth, tag, cm)

    def visit(self, node, owner, anc, cls_any, in_link, level=0):
        """Children of ``node``; ``owner`` is the block owner their text goes to."""
        parts = self.parts
        if level > MAX_DEPTH:
            # deeper than real pages go (10-40): the rest of this subtree is one run of text
            parts.append(" " + node.text(deep=True, separator=" ") + " ")
            return
        level += 1
        c = node.child
        while c is not None:
            tag = c.tag
            if tag == "-text":
                t = c.text_content
                if t:
                    parts.append(t)
                    if in_link:
                        self.link += len(t)
                c = c.next
                continue
            cat = _CATEGORY.get(tag, 0)
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
                    cm = _class_mask(cls)
                eid = attrs.get("id")
                if eid:
                    cm |= _class_mask(eid)
                if "style" in attrs or "hidden" in attrs or "role" in attrs:
                    if _is_hidden(attrs):
                        c = c.next
                        continue
                    role = attrs.get("role")
                    if role in _ROLE_BITS:
                        cm |= _ROLE_BITS[role]
            canc = anc | _ANC_BIT.get(tag, 0)
            cany = cls_any | cm
            link = in_link or tag == "a"
            if cat == 1:  # block
                if parts:
                    self.flush(owner)
                new = self.new_owner(owner, tag, cm, canc, cany)
                self.visit(c, new, canc, cany, link, level)
                if self.parts:
                    self.flush(new)
                parts = self.parts
            else:  # inline: joins the current block
                if cm:
                    self.extra_near |= cm
                self.extra_anc |= _ANC_BIT.get(tag, 0)
                self.visit(c, owner, canc, cany, link, level)
                parts = self.parts
            c = c.next


_CATEGORY = {t: 1 for t in BLOCK_TAGS}
_CATEGORY.update({t: 3 for t in SKIP_TAGS})
_CATEGORY["-comment"] = 3
_CATEGORY["br"] = 4
_SPAN_OTHER = _OWN_INDEX["span_other"]
_ROLE_BITS = {r: 1 << CLASS_WORDS.index(w) for r, w in _ROLE_WORDS.items()}


def walk(tree):
    """Blocks of a parsed page: (texts, raw per-block lists, element lists)."""
    w = _Walk()
    owner = w.new_owner(None, "body", 0, 0, 0)
    w.visit(tree.body, owner, 0, 0, False)
    w.flush(owner)
    return (w.b_text, w.b_link, w.b_el, w.b_own, w.b_anc, w.b_near, w.b_any, w.b_depth, w.b_tag,
            w.el_parent, w.el_chars, w.el_link)


def _ancestor(el_parent: np.ndarray, idx: np.ndarray, k: int) -> np.ndarray:
    out = idx.copy()
    for _ in range(k):
        nxt = el_parent[out]
        out = np.where(nxt >= 0, nxt, out)
    return out


def _bits(values: list[int], n_bits: int) -> np.ndarray:
    """Bit flags (Python ints) as a float32 0/1 matrix [len(values), n_bits]."""
    nbytes = (n_bits + 7) // 8
    raw = b"".join(v.to_bytes(nbytes, "little") for v in values)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8).reshape(len(values), nbytes), axis=1, bitorder="little")
    return bits[:, :n_bits].astype(np.float32)


def _title_overlap(texts: list[str], title: str) -> np.ndarray:
    """Per block: share of its words in the page title, share of the title's words in it."""
    tw = set(_WORD_RE.findall(title.lower()))
    out = np.zeros((len(texts), 2), dtype=np.float32)
    if not tw:
        return out
    for i, t in enumerate(texts):
        if len(t) > 300:
            continue
        bw = set(_WORD_RE.findall(t.lower()))
        if bw:
            common = len(bw & tw)
            out[i, 0] = common / len(bw)
            out[i, 1] = common / len(tw)
    return out


_CLASS_CACHE: dict[int, int] = {}
_CLASS_TABLE = np.full(0x110000, 255, dtype=np.uint8)  # code point -> _char_class, filled as characters are seen
_SENT_SET = {ord(c) for c in _SENT_CHARS}
_SEP_SET = {ord(c) for c in _SEP_LIST}
_COMMA_SET = {ord(c) for c in ",、،，"}


def _char_class(cp: int) -> int:
    """Bits: 1 word character (``\\w``), 2 decimal digit (``\\d``), 4 sentence mark, 8 separator, 16 comma."""
    k = _CLASS_CACHE.get(cp)
    if k is None:
        ch = chr(cp)
        k = ((ch.isalnum() or ch == "_") * 1 | ch.isdecimal() * 2 | (cp in _SENT_SET) * 4 | (cp in _SEP_SET) * 8
             | (cp in _COMMA_SET) * 16)
        _CLASS_CACHE[cp] = k
    return k


def _text_stats(texts: list[str], link: np.ndarray):
    """Per-block text features, counted over the page's code points at once (numpy)."""
    n = len(texts)
    chars = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    words = np.fromiter((len(t.split()) for t in texts), dtype=np.float32, count=n)
    cps = np.frombuffer("\x00".join(texts).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    cls = _CLASS_TABLE[cps]
    unknown = cls == 255
    if unknown.any():
        for c in np.unique(cps[unknown]):
            _CLASS_TABLE[c] = _char_class(int(c))
        cls = _CLASS_TABLE[cps]
    # block of each code point (the \x00 separators belong to no block and are no word character)
    starts = np.concatenate(([0], np.cumsum(chars[:-1] + 1)))
    block = np.zeros(cps.size, dtype=np.int64)
    block[starts[1:]] = 1
    block = np.cumsum(block)
    isw = (cls & 1).astype(bool)
    wstart = isw.copy()
    wstart[1:] &= ~isw[:-1]

    def per_block(mask):
        return np.bincount(block, weights=mask, minlength=n).astype(np.float32)

    wtok = per_block(wstart)
    sent = per_block((cls & 4) != 0)
    comma = per_block((cls & 16) != 0)
    seps = per_block((cls & 8) != 0)
    digits = per_block((cls & 2) != 0)
    first = cps[starts]
    last = cps[starts + chars - 1]
    upper0 = np.fromiter((chr(c).isupper() for c in first), dtype=np.float32, count=n)
    endp = np.fromiter(((_char_class(int(c)) & 4) != 0 for c in last), dtype=np.float32, count=n)
    colon = (last == ord(":")).astype(np.float32)
    chars = chars.astype(np.float32)
    lchars = np.log1p(chars)
    return np.stack([lchars, np.log1p(words), np.log1p(wtok), link / np.maximum(chars, 1), np.log1p(sent),
                     sent / np.maximum(words, 1), np.log1p(comma), np.log1p(seps), digits / np.maximum(chars, 1),
                     upper0, endp, colon, chars / np.maximum(words, 1) / 10.0, wtok / np.maximum(words, 1)], axis=1)


N_TEXT = 14
MAX_DEPTH = 200  # elements below this depth are read as plain text (and Python's recursion stays bounded)
GROUP_LEVELS = (1, 2, 4, 8)


def features(html: str, stripped: bool = False) -> Blocks | None:
    """The blocks of a page and their feature matrix; None when the page has no text."""
    if not stripped:
        html = strip_html(html)
    m = _OG_TYPE_RE.search(html, 0, 20000)
    og = m.group(1).lower() if m else ""
    tree = parse(html)
    if tree is None:
        return None
    (texts, link, b_el, own, anc, near, cls_any, depth, tags, el_parent, el_chars, el_link) = walk(tree)
    n = len(texts)
    if n == 0:
        return None
    title_node = tree.css_first("title")
    title = title_node.text() if title_node is not None else ""
    link = np.array(link, dtype=np.float32)
    ts = _text_stats(texts, link)                                   # [n, N_TEXT]
    own_1h = np.zeros((n, len(OWN_TAGS)), dtype=np.float32)
    own_1h[np.arange(n), np.array(own)] = 1.0
    anc_b = _bits(anc, len(ANCESTOR_TAGS))
    near_b = _bits(near, len(CLASS_WORDS))
    any_b = _bits(cls_any, len(CLASS_WORDS))
    depth = np.array(depth, dtype=np.float32)

    el_parent = np.array(el_parent, dtype=np.int64)
    el_chars = np.array(el_chars, dtype=np.float32)
    el_link = np.array(el_link, dtype=np.float32)
    bel = np.array(b_el, dtype=np.int64)
    cont, groups = [], []
    for k in GROUP_LEVELS:
        a = _ancestor(el_parent, bel, k)
        groups.append(a)
        c = el_chars[a]
        cont += [np.log1p(c), el_link[a] / np.maximum(c, 1)]
    cont = np.stack(cont, axis=1)

    chars = np.exp(ts[:, 0]) - 1
    total = float(chars.sum())
    cum = (np.cumsum(chars) - chars) / max(total, 1.0)
    pos = np.stack([np.arange(n, dtype=np.float32) / max(n - 1, 1), cum, depth / 30.0,
                    depth / max(float(depth.max()), 1.0)], axis=1)
    # repetition of the same text on the page
    counts: dict[str, int] = {}
    for t in texts:
        counts[t] = counts.get(t, 0) + 1
    rep = np.fromiter((counts[t] for t in texts), dtype=np.float32, count=n)
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
    ancarr = np.array(anc, dtype=np.int64)
    in_li = ((ancarr & li_bit) != 0)
    in_tab = ((ancarr & tab_bit) != 0)
    page = np.array([np.log1p(total), float(link.sum()) / max(total, 1.0), np.log1p(n),
                     float(chars[in_li].sum()) / max(total, 1.0), float(chars[in_tab].sum()) / max(total, 1.0),
                     float((own_1h[:, _OWN_INDEX["h1"]] + own_1h[:, _OWN_INDEX["h2"]]).sum()) / 10.0,
                     float(rep[:, 1].mean())] + [float(og.endswith(t)) for t in _OG_TYPES], dtype=np.float32)
    page = np.broadcast_to(page, (n, page.size))
    # the block's size relative to the page's largest block
    rel = (ts[:, 0] - ts[:, 0].max())[:, None]
    feats = np.concatenate([ts, own_1h, anc_b, near_b, any_b, cont, pos, rep, neigh, page, rel,
                            _title_overlap(texts, title)], axis=1)
    return Blocks(texts, feats.astype(np.float32), tags, np.stack(groups, axis=1))


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

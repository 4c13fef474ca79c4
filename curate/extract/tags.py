"""The vocabulary of the block walk: which tags make a block, which are skipped, which tags and class / id
words become features, and what the walk reads of each tag (by name and by lexbor's tag id); shared by the
Python walk (``dom_walk``), the compiled scan (``dom_scan``) and the features."""
from __future__ import annotations

import re

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
OWN_INDEX = {t: i for i, t in enumerate(OWN_TAGS)}
# tags anywhere above a block (bit flags)
ANCESTOR_TAGS = ["a", "li", "nav", "header", "footer", "aside", "article", "main", "form", "table", "h",
                 "blockquote", "pre", "code", "figure", "button", "label", "dl", "ul", "ol", "strong", "em",
                 "time", "address", "section", "details", "menu", "sup", "small", "cite", "q", "span", "noscript",
                 "hidden"]  # "hidden": under an element that is not shown (``is_hidden``), not a tag
ANC_BIT = {t: 1 << i for i, t in enumerate(ANCESTOR_TAGS)}
for _h in ("h1", "h2", "h3", "h4", "h5", "h6"):
    ANC_BIT[_h] = ANC_BIT["h"]
ANC_BIT["b"] = ANC_BIT["strong"]
ANC_BIT["i"] = ANC_BIT["em"]
ANC_BIT["kbd"] = ANC_BIT["code"]
ANC_BIT["samp"] = ANC_BIT["code"]
ANC_BIT["tt"] = ANC_BIT["code"]
HIDDEN_BIT = ANC_BIT.pop("hidden")  # set by the walks from the attributes; no tag gives it

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
               "dialog": "modal", "alert": "alert", "tablist": "tab", "tabpanel": "tab", "toolbar": "toolbar"}

ROLE_BITS = {r: 1 << CLASS_WORDS.index(w) for r, w in _ROLE_WORDS.items()}
# class words of widgets whose hidden panels hold content (tabs, accordions)
WIDGET_BITS = (1 << CLASS_WORDS.index("tab")) | (1 << CLASS_WORDS.index("accordion"))

CLASS_MASK_CACHE: dict[str, int] = {}  # class / id attribute value -> class_mask
_token_cache: dict[str, int] = {}


def class_mask(s: str) -> int:
    """The bits of the ``CLASS_WORDS`` that ``_CLASS_WORD_RE.findall(s.lower())`` finds. No class word holds
    white space, so no match crosses it: the matches are those of each white-space separated token, and a
    token's bits are cached on their own (class lists are new on almost every site, their tokens are not)."""
    m = CLASS_MASK_CACHE.get(s)
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
        if len(CLASS_MASK_CACHE) > 200_000:
            CLASS_MASK_CACHE.clear()
        CLASS_MASK_CACHE[s] = m
    return m


def is_hidden(attrs: dict) -> bool:
    """Whether an element with these attributes is hidden (``hidden``, ``display:none``, ``visibility:hidden``)."""
    if "hidden" in attrs:
        return True
    st = attrs.get("style")
    if st and ("none" in st or "hidden" in st):
        st = st.replace(" ", "").lower()
        if "display:none" in st or "visibility:hidden" in st:
            return True
    return False


_CATEGORY = {t: 1 for t in BLOCK_TAGS}
_CATEGORY.update({t: 3 for t in SKIP_TAGS})
_CATEGORY["-comment"] = 3
_CATEGORY["br"] = 4
# per tag: (category: 0 inline, 1 block, 3 skipped, 4 line break; ancestor bit; is it a link)
TAG_INFO = {t: (_CATEGORY.get(t, 0), ANC_BIT.get(t, 0), t == "a") for t in set(_CATEGORY) | set(ANC_BIT)}
INLINE = (0, 0, False)
SPAN_OTHER = OWN_INDEX["span_other"]
TEXT_ID = 2  # lexbor's tag id of text nodes (LXB_TAG__TEXT)
_ID_INFO: dict[int, tuple] = {}


def tag_info(tag: str | None) -> tuple:
    """What ``walk`` needs of a tag: (category, ancestor bit, is it a link, tag, own tag index)."""
    cat, bit, is_a = TAG_INFO.get(tag, INLINE)
    return cat, bit, is_a, tag, OWN_INDEX.get(tag, SPAN_OTHER)


def id_info() -> dict[int, tuple]:
    """``tag_info`` by lexbor tag id, for the tags of ``TAG_INFO`` that lexbor knows (their ids are the same in
    every document; a tag it does not know gets an id of its own per document, looked up by name)."""
    if not _ID_INFO:
        from selectolax.lexbor import LexborHTMLParser

        a, b = LexborHTMLParser("<p>x<!--c--></p>"), LexborHTMLParser("")
        p = a.css_first("p")
        assert p.child.tag_id == TEXT_ID and p.child.tag == "-text", "lexbor's text node id changed"
        out = {p.child.next.tag_id: tag_info("-comment")}
        names = sorted(t for t in TAG_INFO if not t.startswith("-"))
        ids_b = {t: b.create_node(t).tag_id for t in reversed(names)}
        for t in names:
            i = a.create_node(t).tag_id
            if i == ids_b[t]:  # the same id in two documents, made in another order: lexbor's own id
                out[i] = tag_info(t)
        _ID_INFO.update(out)
    return _ID_INFO

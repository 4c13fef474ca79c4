"""The compiled block walk (``dom_scan``) gives what ``dom_walk.walk`` gives, on real pages and on
generated tag soup made to hit every corner of lexbor's serialization; where it cannot read a page it says
so and the Python walk answers."""
import gzip
import json
import random
from pathlib import Path

import pytest

from curate.readers import read_file
from curate.extract import dom_scan as X
from curate.extract import dom_walk as W
from curate.extract import strip as S

DATA = Path(__file__).resolve().parent / "data" / "extract"


def _tree(html: str):
    data = S.utf8(html)
    return W.parse(None, S.strip_utf8(data)) if data is not None else W.parse(S.strip_html(html))


_differs = X.differs


def _check(html: str) -> bool:
    """Compare on one page, both compiled walks (over lexbor's nodes, over the serialization); True when the
    one the engine uses read it."""
    tree = _tree(html)
    if tree is None:
        return False
    ref = X.from_walk(*W.walk(tree))
    tables = X.node_tables()
    for got in (X.node_walk(tree, tables) if tables else None, X.serialized_walk(tree)):
        if got is not None:
            assert _differs(ref, got) is None, (_differs(ref, got), html[:3000])
    assert _differs(ref, X.walk_arrays(tree)) is None
    return X.compiled_walk(tree) is not None


def _real_pages() -> list[str]:
    with gzip.open(DATA / "wcxb_pages.jsonl.gz", "rt", encoding="utf-8") as f:
        pages = [d["html"] for d in map(json.loads, f)]
    for item in read_file(str(DATA / "web-pages-87.warc.gz"), "warc"):
        if item[0] == "doc" and item[1].get("text"):
            pages.append(item[1]["text"])
    return pages


def test_real_pages_are_read_by_the_compiled_scan_and_match_walk():
    pages = _real_pages()
    assert len(pages) >= 100
    compiled = sum(_check(h) for h in pages)
    assert compiled == len(pages)  # no real page needs the Python walk


def test_lexbors_serialization_read_in_place_is_what_node_html_gives(monkeypatch):
    assert X._SERIALIZE is not None  # selectolax exports lexbor's serializer: the scan reads its bytes in place
    for html in _real_pages()[:40] + ["<p>é 東京 \U0001F600 &amp; &lt;x&gt;\u00a0</p>", "<html><body></body></html>"]:
        tree = _tree(html)
        if tree is not None:
            assert bytes(X.body_utf8(tree)) == tree.body.html.encode()
    monkeypatch.setattr(X, "_SERIALIZE", None)  # without it, through node.html: the same walk
    assert _check(_real_pages()[0])


# ------------------------------------------------------------------------------------------ tag soup

TAGS = ["p", "div", "span", "a", "li", "ul", "ol", "pre", "b", "i", "code", "em", "section", "article", "nav",
        "footer", "h1", "h3", "table", "tr", "td", "th", "tbody", "blockquote", "label", "button", "form", "center",
        "noscript", "font", "custom-el", "x-y", "dl", "dt", "dd", "figure", "figcaption", "small", "sup", "q"]
RARE = ["xmp", "noembed", "noframes", "iframe", "script", "style", "textarea", "title", "select", "option",
        "svg", "math", "template", "object", "video", "head", "body", "html", "listing", "menuitem", "ruby", "rt"]
VOID = ["br", "hr", "img", "wbr", "input", "embed", "meta", "link", "area", "source", "col", "param", "keygen"]
WORDS = ["content", "nav", "menu", "Sidebar", "post-entry", "sr-only", "price", "comment", "İtem", "\u212aard",
         "main", "s\u212aip-link", "x", "social-share", "byline", "&amp;", "a&b", "q\"uote", "it's", "\u00a0nav",
         "DISPLAY", "none", "tab-pane", "Tabs", "accordion-body"]
TEXTS = ["Hello world.", "  spaced   out  ", "\n\nlines\n", "a &amp; b", "x &lt; y &gt; z", "non&nbsp;breaking",
         "&#160;", "&copy; 2026", "&quot;q&quot;", "\u00a0\u2003\u3000\u1680\u202f\u205f\u2028", "\x1c\x1d\x85",
         "中文字符。", "ภาษาไทย", "العربية؟", "emoji 😀", "\r\nwin\r\n", "tab\tsep", "\x00nul", "<", "& alone",
         "&", "a<b", "]]>", "-->", "\ufeffbom", "İstanbul", "\u212a", "."]
STYLES = ["display:none", "DISPLAY:NONE", "display: none", "Display:None", "visibility:hidden", "color:red",
          "visibility : hidden", "x:none", "display:\u00a0none", "display:nonE"]
ROLES = ["navigation", "banner", "main", "Navigation", "menu", "dialog", "x", "", "tabpanel", "tablist"]


def _attrs(rng: random.Random) -> str:
    out = []
    for _ in range(rng.choice([0, 0, 1, 2, 3])):
        k = rng.random()
        if k < 0.35:
            out.append(f'class="{" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))}"')
        elif k < 0.45:
            out.append(f"id='{rng.choice(WORDS)}{rng.choice(WORDS)}'")
        elif k < 0.6:
            out.append(f'style="{rng.choice(STYLES)}"')
        elif k < 0.65:
            out.append("hidden")
        elif k < 0.75:
            role = rng.choice(ROLES)
            out.append(f"role={role}" if role else 'role=""')
        elif k < 0.8:
            out.append(rng.choice(["=x", 'a"b=1', "<c=2", "d/e=3", "class", "ID=content", "CLASS=nav",
                                   "class=a class=b", "data-x=&gt;&lt;"]))
        else:
            out.append(f'href="/{rng.choice(WORDS)}" title="{rng.choice(TEXTS)}"')
    return (" " + " ".join(out)) if out else ""


def _soup(rng: random.Random, n: int) -> str:
    parts: list[str] = []
    open_: list[str] = []
    for _ in range(n):
        k = rng.random()
        if k < 0.3:
            t = rng.choice(TAGS) if rng.random() < 0.9 else rng.choice(RARE)
            parts.append(f"<{t.upper() if rng.random() < 0.1 else t}{_attrs(rng)}>")
            open_.append(t)
        elif k < 0.5 and open_:
            t = open_.pop() if rng.random() < 0.85 else rng.choice(TAGS)
            parts.append(f"</{t}>")
        elif k < 0.58:
            parts.append(f"<{rng.choice(VOID)}{_attrs(rng)}{'/' if rng.random() < 0.3 else ''}>")
        elif k < 0.62:
            parts.append(rng.choice(["<!-- c -->", "<!---->", "<?pi x?>", "<![CDATA[a<b]]>", "<!x>", "</>",
                                     "<!-- a -- b --!>", "<plaintext>" if rng.random() < 0.05 else "<p/>"]))
        else:
            parts.append(rng.choice(TEXTS))
    return "".join(parts)


@pytest.mark.parametrize("seed", range(4))
def test_generated_tag_soup_matches_walk(seed):
    rng = random.Random(seed)
    compiled = total = 0
    for i in range(150):
        html = _soup(rng, rng.randint(5, 120))
        if rng.random() < 0.3:
            html = f"<html><head><title>{rng.choice(TEXTS)}</title></head><body{_attrs(rng)}>{html}</body></html>"
        total += 1
        compiled += _check(html)
    # the soup is hostile on purpose, but most of it must take the compiled path, or this tests little
    assert compiled >= 0.7 * total, (compiled, total)


def test_what_the_scan_cannot_read_goes_to_walk_with_the_same_result():
    deep = "<div>" * (W.MAX_DEPTH + 20) + "deep text" + "</div>" * (W.MAX_DEPTH + 20)
    plaintext = "<p>before</p><plaintext>a</plaintext><b>c"
    for html in (deep, plaintext):
        tree = _tree(html)
        assert X.serialized_walk(tree) is None  # plaintext's text may hold its own end tag
        assert _differs(X.from_walk(*W.walk(tree)), X.walk_arrays(tree)) is None
    assert X.node_walk(_tree(deep), X.node_tables()) is None
    assert _check(plaintext)  # the nodes hold its text as it is


def test_pages_larger_than_the_buffers_grow_them():
    html = "".join(f"<p class='c{i % 7} content'>para {i} &amp; more</p><span>s{i}</span>" for i in range(9000))
    assert _check(html)
    b = X.compiled_walk(_tree(html))
    assert len(b.texts) == 18000 and b.texts[17999] == "s8999"


def test_buffers_of_a_very_large_page_are_not_kept(monkeypatch):
    monkeypatch.setattr(X, "KEEP_BYTES", 1000)
    kept = X._WS.size
    html = "<div>" + "<p>big page &amp; text</p>" * 200 + "</div>"
    assert _check(html)
    assert X._WS.size == kept  # the thread's buffers stayed as they were


def test_threads_each_use_their_own_buffers():
    from concurrent.futures import ThreadPoolExecutor

    pages = _real_pages()[:24]
    trees = [_tree(h) for h in pages]
    want = [X.from_walk(*W.walk(t)) for t in trees]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(X.compiled_walk, trees * 3))
    for i, g in enumerate(got):
        assert g is not None and _differs(want[i % len(trees)], g) is None


def test_hidden_panels_of_tab_and_accordion_widgets_are_read_and_marked_other_hidden_elements_are_not():
    """A tab or accordion widget shows one panel and hides the others, which are content as much as the one
    shown (WCXB's gold keeps them); a hidden element elsewhere (a menu, a modal, ``<p hidden>``) is not on the
    page. Both walks agree, and the hidden panels' blocks carry the ``in_hidden`` feature."""
    from curate.extract.features import feature_names, features

    html = ("<html><body><article><p>Shown paragraph of the article, long enough.</p>"
            "<div class='tabs'><div class='tab-pane'>First tab panel text.</div>"
            "<div class='tab-pane' style='display:none'>Second tab panel text.</div></div>"
            "<div role='tabpanel' hidden><p>Panel by role text.</p></div>"
            "<div class='accordion'><div class='item' hidden>Accordion answer text.</div></div>"
            "<p hidden>Plain hidden paragraph.</p><nav style='display: none'><a href='/'>Hidden menu</a></nav>"
            "</article></body></html>")
    assert _check(html)  # the compiled scan read it, equal to the walk
    b = features(html)
    col = feature_names().index("in_hidden")
    marked = {t: bool(v) for t, v in zip(b.texts, b.features[:, col])}
    assert marked == {"Shown paragraph of the article, long enough.": False, "First tab panel text.": False,
                      "Second tab panel text.": True, "Panel by role text.": True, "Accordion answer text.": True}


def test_a_lexbor_laid_out_otherwise_is_not_read_and_the_serialization_scan_is_used(monkeypatch):
    """The node walk follows raw pointers: it is used only where each offset it reads was checked against
    selectolax's API. With one offset wrong (as in a lexbor whose structs differ) the check says no, before it
    follows any pointer read from that field, and the engine scans the serialization instead."""
    from curate.extract import lexbor_layout as L

    assert L.layout_ok() and X.node_tables() is not None
    for name, wrong in (("N_NEXT", 48), ("N_FIRST_CHILD", 72), ("T_LENGTH", 112), ("E_FIRST_ATTR", 128),
                        ("A_VALUE", 104)):
        with monkeypatch.context() as m:
            m.setattr(L, name, wrong)
            assert not L.layout_ok(), name
            assert L.node_tables(X.TAG_NAMES) is None
    monkeypatch.setattr(X, "_NODE_TABLES", [None])
    html = "<div class='content'><p>one &amp; two</p><p hidden>x</p></div>"
    assert _check(html)
    tree = _tree(html)
    assert _differs(X.compiled_walk(tree), X.serialized_walk(tree)) is None

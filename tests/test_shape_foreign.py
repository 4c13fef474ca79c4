"""``shape.bound_shape`` follows the tree builder into svg and math (integration points, breakout tags),
through raw text elements, "any other end tag" of a noscript, "close a p element", the formatting elements it
reopens, ruby parts, headings, buttons and the adoption agency of an a: pages of such a pattern repeated nest
thousands deep in lexbor, and once bounded they must parse within twice the scan's bound; patterns lexbor
keeps flat are left as they are."""
from __future__ import annotations

import pytest

from curate.extract.depth import parsed_depth
from curate.extract.shape import MAX_OPEN, bound_shape

BOUND = 2 * MAX_OPEN + 10
REPEAT = 2000

NESTING = [
    "<svg><i>",  # a formatting breakout tag left out must not end the svg: svg then nests in svg
    "<math><big>",
    "<svg><title><div>",  # HTML integration points: their start tags are read as HTML, inside them
    "<svg><desc><p>",
    "<svg><foreignObject><div>",
    "<dd><svg>x<title>",
    "<b><svg><title><i>",
    "<math><mi><div>",  # MathML text integration point
    '<math><annotation-xml encoding="text/html"><div>',
    "<noscript><div></noscript>",  # "any other end tag": closes nothing past the div
    "<div><textarea></div></textarea>",  # raw text: "</div>" inside a textarea is text
    "<div><title></div></title>",
    "<li><dt><i><p>x",  # "close a p element" in button scope before a dt
    "<dt>x<colgroup>x<li>x<p>x",
    # the end tag of a formatting element that is not active ends nothing: the b stays active and is opened
    # again inside every block that follows
    "<div>x<b>x</div>x</i>x",
    "<ol>x<big>x<caption></ol>x</small>x",
    "</ruby></i>x<ruby>x<small></button>",
    # lexbor: an end tag inside a select closes nothing past it (but </select> and a table's parts)
    "</applet><applet>x<select><div>x</s>x",
    "<applet><select><div></applet>",
    "<em>x<select></em>x",  # ... and the em it leaves open stays active
    # a <frameset> in body opened after other elements is ignored, and so is its end tag
    "<tr></frameset><frameset><ul><rt>",
    "</colgroup></frameset>x<frameset>x<rt>",
    # formatting elements a closed table took off the stack unended are reopened ("reconstructed") before the
    # next text, inside the option they left open: a, i and option nest each round (5 s per MB in lexbor)
    "<a><i></table>x<option>x<table>x",
    # a ruby part ends only the p, rt, option, ... on top of the stack ("generate implied end tags"): the rt
    # opened in the b, and the ruby in the rt, nest
    "<ruby><rt>x<b>y",
    "<ruby><rt>x<p>y<rt>z",
    "<rt>x<ruby>x</dd>x<caption><p>x",
    # an a with a block opened after it: the adoption agency keeps the block open
    "<a>x<div>y<a>z",
    "<mo>x<a><math></tr></template>",
    "<label><a><a></a>x</center>x",
    "<h2>x</nobr><h2></h2>x<ol>",  # the ol, never closed
    "<select><button>x<nobr><p>x",  # (lexbor reopens the nobr before the button)
    "<p><b>x</p>y",  # the b the p's end took off is reopened for the text after it, and holds the next p
    "<button><b>x<button>y",
    "</form>x<p><select>x</p>x<x-a>",
    "</form><p><form><h2>x",  # a form start tag closes the p: the next p opens in the h2
    "<li><section>x<li>z",  # a section is special: the li past it stays open
    # a select start tag in body reopens the formatting elements first, as any inline start tag (the nobr that
    # the last </select> took off the stack holds the next select: one level more each time)
    "<nobr>x</select><select>x",
    "</ruby>x<nobr>x</select><select>x",
    "<s>x</select><select>x",
]

# patterns that stay flat in lexbor: the scan must not take them for deep ones (it would leave tags out of a
# page whose tree is shallow, and what it leaves out can make it deep): a p ends the p open past a label or a
# span, a button the open button, a heading the heading that is the current node, an a the a with no block
# opened after it, an li the li past any element but a special one, a dd or dt the dd or dt alike
FLAT = ["<p>x<label>x<math>x<article>", "<p>x<span>y<p>z", "<caption><button><rt>x<ruby></x-a>", "<button>x<button>y",
        "<h2>x<h3>y", "<a>x<b>y</b><a>z", "<select><p>x<p>y", "<li>x<rt><ruby>x", "<li>x<span>y<li>z",
        "<mo><dd>x<ruby>x<rt></p>", "<dt>x<label>y<dd>z"]


def _page(run: str, repeat: int = REPEAT) -> bytes:
    return ("<html><body>" + run * repeat + "</body></html>").encode()


@pytest.mark.parametrize("run", NESTING)
def test_nesting_pattern_is_bounded(run):
    page = _page(run)
    assert parsed_depth(page) > BOUND  # the pattern does nest deep in lexbor
    out, left_out, _ = bound_shape(page)
    assert left_out > 0
    assert parsed_depth(out) <= BOUND


@pytest.mark.parametrize("run", FLAT)
def test_flat_pattern_is_left_alone(run):
    page = _page(run)
    assert parsed_depth(page) < 40  # lexbor's tree is shallow
    out, left_out, _ = bound_shape(page)
    assert left_out == 0 and out == page


NORMAL = """<!doctype html><html><head><title>A <b>page</b></title>
<script>if (a < b && c > d) { x = "<div><div><div>"; }</script><style>p > a { color: red }</style></head>
<body><div class="main"><p>Text with <svg width="10" height="10"><title>Icon <b>x</b></title>
<desc>A <em>circle</em></desc><circle r="4"/><path d="M0 0"/><foreignObject><div><p>HTML <i>in</i> svg</p>
</div></foreignObject><g><rect/></g></svg> and a formula
<math><mi>x</mi><mo>=</mo><mfrac><mn>1</mn><mi>y</mi></mfrac><annotation-xml encoding="text/html">
<span>x = 1/y</span></annotation-xml></math>.</p>
<template id="row"><tr><td><b>cell</b></td></tr></template>
<noscript><div><img src="a.png"></div></noscript><textarea>a <b> c </div></textarea>
<ul><li><p>one<li><p>two<dl><dt>t<dd>d</dl></ul></div></body></html>"""


def test_normal_svg_math_template_page_untouched():
    page = (NORMAL * 40).encode()  # long enough to be scanned (many "<")
    out, left_out, cut = bound_shape(page)
    assert (out, left_out, cut) == (page, 0, 0)


def test_normal_nested_svg_in_blocks_untouched():
    # a real page's depth: 60 blocks each holding an inline svg with a title and a formatting element after it
    page = ("<html><body>" + "<div><b>x</b><svg><title>t</title><path/></svg><i>y</i>" * 60
            + "</div>" * 60 + "</body></html>").encode()
    out, left_out, cut = bound_shape(page)
    assert (out, left_out, cut) == (page, 0, 0)


def test_stray_formatting_end_tags_untouched():
    # closed formatting elements and a stray end tag of one never opened, as real pages have them
    page = ("<html><body>" + "<p><b>bold</b> and <i>it</i> text</i></em> more</p><div><u>u</u></s></div>" * 200
            + "</body></html>").encode()
    assert bound_shape(page) == (page, 0, 0)


def test_select_and_frameset_pages_untouched():
    # a select closed by another select or an input (lexbor), a frameset page with its frames and noframes
    page = ("<html><body>" + "<div><select><div>a</div><select><p>b</p><input></div>" * 100
            + "</body></html>").encode()
    assert bound_shape(page) == (page, 0, 0)
    frames = ("<html><head><title>t</title></head><frameset cols='50%,50%'>" + "<frameset><frame src=a><frame src=b>"
              "</frameset>" * 200 + "</frameset><noframes><body><p>No frames</p></body></noframes></html>").encode()
    assert bound_shape(frames) == (frames, 0, 0)

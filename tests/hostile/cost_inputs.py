"""Hostile inputs for the per-document cost bounds: page shapes lexbor takes super-linear time on, and texts
spaCy's tokenizer is quadratic on. Each is a function returning the input (built on demand: some are
megabytes). ``tests/test_cost_bounds.py`` runs them through the stages; ``benchmarks/worst_case_cost.py``
prints what each costs."""
from __future__ import annotations

import random

N = 40_000  # elements / characters: 0.2-0.8 MB pages, every one of them seconds or more for lexbor unbounded


def _nested(tag: str, n: int = N) -> str:
    return "<html><body>" + f"<{tag}>" * n + "deep text " * 20 + f"</{tag}>" * n + "</body></html>"


HTML = {
    "nested_div": lambda: _nested("div"),
    "nested_section": lambda: _nested("section"),
    "nested_custom_element": lambda: _nested("x-box"),
    "nested_lists": lambda: "<html><body>" + "<ul><li>" * (N // 2) + "deep text " * 20 + "</body></html>",
    "distinct_unclosed_formatting": lambda: "<html><body>" + "".join(f"<b id={i}>" for i in range(N // 2))
                                            + "<p>text after them</p>" * 100 + "</body></html>",
    "formatting_then_blocks": lambda: "<html><body>" + "".join(f"<font color=c{i}><p>x" for i in range(N // 2))
                                      + "</body></html>",
    "many_attributes": lambda: "<html><body><div " + " ".join(f"a{i}=v" for i in range(N)) + ">text</div>"
                               + "<p>" + "words " * 50 + "</p></body></html>",
    # a second <html> or <body> tag opens nothing: the tree builder merges its attributes into the element
    # already open, each checked against the ones it holds (each tag within the per-element bound, and ended
    # so that it never nests)
    "attributes_merged_into_html": lambda: "<html><body><p>" + "words " * 50 + "</p>" + "".join(
        "<html " + " ".join(f"a{i}_{j}=v" for j in range(200)) + "></html>" for i in range(N // 200)) + "</body></html>",
    "attributes_merged_into_body": lambda: "<html><body><p>" + "words " * 50 + "</p>" + "".join(
        "<body " + " ".join(f"a{i}_{j}=v" for j in range(200)) + "></body>" for i in range(N // 200)) + "</body></html>",
    # tags the bound leaves out, each after a "<": left out whole, the "<" and the text after them would make
    # the deep nesting again ("<section>", "<dl><dd>")
    "tags_rejoined_by_the_bound": lambda: "<html><body><p>words</p>" + "<<div>section>" * N + "</body></html>",
    "formatting_rejoined_by_the_bound": lambda: ("<html><body><p>words</p>" + "<<b id=1>dl><dd>" * N
                                                 + "</body></html>"),
    # opening tags of the elements stripped before parsing, never closed (the stripping regular expression
    # read to the end of the page at each); the "<ſ" sends the page to the str form of the scan
    "unclosed_templates": lambda: "<html><body><p>" + "words " * 50 + "</p>" + "<template>" * N + "</body></html>",
    "unclosed_styles_str_path": lambda: "<html><body><ſ><p>" + "words " * 50 + "</p>" + "<style>x<" * (N // 2)
                                        + "</body></html>",
    "unclosed_comments_str_path": lambda: "<html><body><ſ><p>" + "words " * 50 + "</p>" + "<!--" * N
                                          + "</body></html>",
    # lexbor's cost grows with the square of a <select>'s children, options or tags it ignores (80,000
    # options: 46 s in the engine)
    "options_in_a_select": lambda: ("<html><body><p>" + "words " * 50 + "</p><select>" + "<option>o" * (2 * N)
                                    + "</select><p>after</p></body></html>"),
    "ignored_tags_in_an_unclosed_select": lambda: ("<html><body><p>" + "words " * 50 + "</p><table><tr><td><select>"
                                                   + "<div>x" * (2 * N) + "</body></html>"),
    # ruby's parts and optgroups close one another only inside their context: outside it they nest (40,000
    # <rp>x<rt>y: 15 s in lexbor's parse, the scan took them for self-closing)
    "ruby_parts_outside_a_ruby": lambda: "<html><body><p>" + "words " * 50 + "</p>" + "<rp>x<rt>y" * N
                                         + "</body></html>",
    "ruby_parts_in_a_cell_of_a_ruby": lambda: ("<html><body><p>" + "words " * 50 + "</p><ruby><table><tr><td>"
                                               + "<rt>y" * N + "</table></ruby></body></html>"),
    "optgroups_outside_a_select": lambda: ("<html><body><p>" + "words " * 50 + "</p>" + "<optgroup><option>o" * N
                                           + "</body></html>"),
    "options_under_formatting_outside_a_select": lambda: ("<html><body><p>" + "words " * 50 + "</p>"
                                                          + "<option><i>o" * N + "</body></html>"),
    # NFC sorts a run of combining marks by class in quadratic time (160 KB: 5 s in the extracted text)
    "one_run_of_combining_marks": lambda: ("<html><body><p>" + "words " * 50 + "</p><p>a" + "\u0301\u0316" * N
                                           + "</p></body></html>"),
    # a block per tag: the feature matrix grows with the blocks (400,000: 2.3 GB)
    "one_letter_paragraphs": lambda: "<html><body><p>" + "words " * 50 + "</p>" + "<p>a" * (10 * N) + "</body></html>",
    # end tags that close nothing in the tree builder, past a special element or out of scope, while a scan
    # that popped to them saw the page flat: lexbor nested these 2-8 per repeat (17 s for the list shape)
    "formatting_end_tags_across_lists": lambda: "<html><body>" + "<i><ul><li>x</i>" * N + "</body></html>",
    "formatting_end_tags_across_sections": lambda: "<html><body>" + "<em><section>x</em>" * N + "</body></html>",
    "span_end_tags_across_divs": lambda: "<html><body>" + "<span><div>x</span>" * N + "</body></html>",
    "list_item_end_tags_across_lists": lambda: "<html><body>" + "<li><ul>x</li>" * N + "</body></html>",
    # start tags the scan closed or opened where the tree builder does not: a list item inside a dt, a form's
    # end tag (it closes the form alone), table parts outside a table, a void name in an svg (an element there)
    "list_items_in_definition_terms": lambda: "<html><body>" + "<li><dt>x" * N + "</body></html>",
    "form_end_tags_inside_lists": lambda: "<html><body>" + "<form><ul>x</form>" * N + "</body></html>",
    "table_rows_outside_tables": lambda: "<html><body>" + "</tr><tr>x<dl>x" * N + "</body></html>",
    "void_names_in_svg": lambda: "<html><body><svg>" + "<col>x" * N + "</svg></body></html>",
    # formatting elements a closed table left active, reopened before the text in the option they left open
    # (stop 45: 5 s per MB in lexbor past the bound); shapes the scan took for deep ones, whose tags it left out
    # until lexbor's tree did nest (2.3 s and 0.9 s per MB)
    "formatting_reopened_in_options": lambda: ("<html><body>" + "<a><i></table>x<option>x<table>x" * N
                                               + "</body></html>"),
    "rubies_in_buttons": lambda: "<html><body>" + "<caption><button><rt>x<ruby></x-a>" * N + "</body></html>",
    "paragraphs_past_labels_and_math": lambda: "<html><body>" + "<p>x<label>x<math>x<article>" * N + "</body></html>",
    "list_items_past_rubies": lambda: "<html><body>" + "<li>x<rt><ruby>x" * N + "</body></html>",
    # a nobr a closed select took off the stack, reopened before the next select (stop 46: 2 s per MB past the
    # bound: the scan did not reopen formatting elements for a select start tag)
    "nobr_reopened_before_selects": lambda: "<html><body>" + "<nobr>x</select><select>x" * N + "</body></html>",
    # the rules on the classifier's output (stop 43): a table's rows, labels, noscript text, teasers
    "table_of_short_cells": lambda: ("<html><body><table>" + "<tr><td>a</td><td>b</td><td>c</td><td>d</td></tr>" * N
                                     + "</table></body></html>"),
    "tables_nested_in_cells": lambda: ("<html><body><p>" + "words " * 50 + "</p>"
                                       + "<table><tr><td>x</td><td>" * (N // 20) + "y"
                                       + "</td></tr></table>" * (N // 20) + "</body></html>"),
    "label_paragraphs": lambda: ("<html><body><article><p>" + "words " * 50 + "</p>"
                                 + "<p>Reply</p><p>Advertisement</p><p>回复引用举报</p>" * (N // 2)
                                 + "</article></body></html>"),
    "noscript_paragraphs": lambda: ("<html><body><nav>menu</nav>" + "<noscript><p>word word word</p></noscript>" * N
                                    + "</body></html>"),
    "articles_and_teasers": lambda: ("<html><body>" + ("<article><p>" + "words " * 25 + "</p></article><div><h2>"
                                                       "<a href=/x>title</a></h2><p>teaser text</p></div>") * (N // 4)
                                     + "</body></html>"),
}


def _random_marks(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice("。、，！？「」（）…,.;:!?\"'()[]😀") for _ in range(n))


TEXT = {
    "cjk_full_stops": lambda: "。" * 100_000,
    "cjk_commas_20k": lambda: "，" * 20_000,
    "mixed_marks": lambda: _random_marks(200_000),
    "emoji_run": lambda: "😀" * 50_000,
    "one_run_of_combining_marks": lambda: "Words here. " * 20 + "a" + "\u0301\u0316" * 50_000,
    "marks_between_words": lambda: " ".join("word" + _random_marks(300, i) for i in range(300)),
    # the regex sentence splitter's end marks: a run not followed by a space was read again from each mark
    "end_marks_before_a_letter": lambda: "Words here. " * 20 + "." * 100_000 + "x",
    "abbreviations": lambda: "Mr. " * 100_000,
    # one chunk of hyphenated words or numbers: the check of the shortcut's tokens against spaCy's special
    # cases glued every run of them together (cubic: 14 KB took a minute, these hours)
    "hyphenated_chain": lambda: "-".join(["ab"] * 60_000),
    "number_chain": lambda: "-".join(["12"] * 60_000),
    # C4's sentence mode gave spaCy the whole text: quadratic in a run of prefix/suffix marks (16 KB: 19 s)
    "nested_parentheses": lambda: "(" * 500_000 + "word" + ")" * 500_000,
}

"""Gopher's alpha-words rule under DataTrove's definition and the Gopher paper's, on English prose.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/gopher_words.py              # all of ../shared/corpora/prose
    PYTHONPATH=$PWD .venv/bin/python benchmarks/gopher_words.py --docs 500 --datatrove

The Gopher paper keeps a document when 80% of its words contain at least one alphabetic character.
DataTrove (and ``gopher_quality``'s default, ``alpha_words_of = "tokens"``) divides by all tokens,
punctuation included, so text with many quotation marks and dashes (dialogue, verse) falls under
0.8; ``alpha_words_of = "words"`` divides by words (tokens that are not only punctuation), as the
paper does. Printed, per source and in all: documents, how many ``gopher_alpha_words`` sets aside
under each definition, and how many the whole ``gopher_quality`` stage sets aside under each.
``--datatrove`` also runs DataTrove 0.10.1's ``GopherQualityFilter`` and counts its
``gopher_below_alpha_threshold`` drops (it should equal the "tokens" column).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "prose" / "english_prose.jsonl"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL with 'text' (and 'source')")
    ap.add_argument("--docs", type=int, default=0, help="first N documents only (default: all)")
    ap.add_argument("--datatrove", action="store_true", help="also count DataTrove's drops")
    args = ap.parse_args(argv)

    from curate.stages.gopher_quality import GopherQuality

    with open(args.corpus, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    if args.docs:
        docs = docs[:args.docs]

    only_alpha = {w: GopherQuality("gq", GopherQuality.Params(
        alpha_words_of=w, skip=[c for c in GopherQuality.REASONS if c != "gopher_alpha_words"])) for w in ("tokens", "words")}
    whole = {w: GopherQuality("gq", GopherQuality.Params(alpha_words_of=w)) for w in ("tokens", "words")}
    dt = None
    if args.datatrove:
        from datatrove.data import Document
        from datatrove.pipeline.filters import GopherQualityFilter
        dt = GopherQualityFilter(min_doc_words=None, max_doc_words=None, min_avg_word_length=None,
                                 max_avg_word_length=None, max_symbol_word_ratio=None, max_bullet_lines_ratio=None,
                                 max_ellipsis_lines_ratio=None, min_stop_words=None)

    rows: dict[str, Counter] = defaultdict(Counter)
    for d in docs:
        text, src = d["text"], d.get("source", "?")
        for key in (src, "all"):
            rows[key]["docs"] += 1
        for w in ("tokens", "words"):
            a = only_alpha[w].check(text) is not None
            q = whole[w].check(text) is not None
            for key in (src, "all"):
                rows[key][f"alpha_{w}"] += a
                rows[key][f"quality_{w}"] += q
        if dt is not None:
            out = dt.filter(Document(text=text, id="x"))
            hit = out is not True and out[1] == "gopher_below_alpha_threshold"
            for key in (src, "all"):
                rows[key]["datatrove"] += hit

    print(f"corpus: {args.corpus} ({len(docs)} documents)")
    print("gopher_alpha_words alone (min_alpha_words_ratio 0.8), and the whole gopher_quality stage, "
          "documents set aside:")
    head = f"{'source':<16}{'docs':>7}{'alpha: tokens':>15}{'alpha: words':>14}{'stage: tokens':>15}{'stage: words':>14}"
    if dt is not None:
        head += f"{'DataTrove alpha':>17}"
    print(head)
    for key in sorted(rows, key=lambda k: (k == "all", k)):
        r = rows[key]
        n = r["docs"]

        def cell(c, width):
            return f"{r[c]:>{width - 8}} ({100 * r[c] / n:4.1f}%)"
        line = f"{key:<16}{n:>7}{cell('alpha_tokens', 15)}{cell('alpha_words', 14)}{cell('quality_tokens', 15)}{cell('quality_words', 14)}"
        if dt is not None:
            line += cell("datatrove", 17)
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())

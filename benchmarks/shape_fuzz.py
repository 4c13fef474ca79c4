"""How faithfully the extract stage's shape scan (``curate/extract/shape.py``) follows lexbor's tree builder:
random short runs of start and end tags, each repeated 3,000 times into a page, are bounded by ``bound_shape``
and parsed by lexbor; a page whose tree still goes deeper than twice the scan's bound (``MAX_OPEN``; a table's
implied tbody and tr are not in the scan's model) is a shape the scan took for shallower than it is, whose
parse costs O(elements x depth). Prints how many runs went past the bound and the deepest of them.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/shape_fuzz.py --seconds 120 --seed 1
"""
from __future__ import annotations

import argparse
import random
import time

from curate.extract.depth import parsed_depth
from curate.extract.shape import MAX_OPEN, bound_shape

TAGS = ("div", "span", "p", "b", "i", "em", "a", "li", "ul", "ol", "table", "tr", "td", "th", "tbody", "section",
        "h2", "font", "x-a", "button", "select", "option", "dd", "dl", "dt", "form", "label", "pre", "code", "nobr",
        "ruby", "rt", "svg", "math", "template", "caption", "colgroup", "col", "frameset", "noscript", "textarea",
        "title", "small", "center", "article", "main", "s", "u", "big", "applet", "object", "marquee")
# with --foreign: the integration points of svg and math, and frame (their runs differ from the default's for a seed)
FOREIGN_TAGS = ("desc", "foreignObject", "mi", "mo", "mtext", "annotation-xml", "mglyph", "frame", "iframe")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60, help="how long to try random runs (default 60)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--repeat", type=int, default=3000, help="times each run is repeated in its page (default 3000)")
    ap.add_argument("--show", type=int, default=20, help="deepest runs past the bound to print (default 20)")
    ap.add_argument("--foreign", action="store_true", help="also try svg/math integration points (FOREIGN_TAGS)")
    args = ap.parse_args(argv)
    tags = TAGS + FOREIGN_TAGS if args.foreign else TAGS
    rng = random.Random(args.seed)
    bound = 2 * MAX_OPEN + 10
    past, trials, start = [], 0, time.time()
    while time.time() - start < args.seconds:
        trials += 1
        run = "".join(("</" if rng.random() < 0.35 else "<") + rng.choice(tags) + ">" + ("x" if rng.random() < 0.5
                                                                                        else "")
                      for _ in range(rng.randint(2, 5)))
        out, _, _ = bound_shape(("<html><body>" + run * args.repeat + "</body></html>").encode())
        depth = parsed_depth(out)
        if depth > bound:
            past.append((depth, run))
    past.sort(reverse=True)
    print(f"{trials} random runs of 2-5 tags, each repeated {args.repeat} times: {len(past)} "
          f"({100 * len(past) / max(trials, 1):.2f}%) parse deeper than {bound} after bound_shape")
    for depth, run in past[:args.show]:
        print(f"  {depth:7d}  {run}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Extraction quality and speed on WCXB's development split: Quarry's ``extract`` vs trafilatura vs resiliparse.

    PYTHONPATH=$PWD python benchmarks/extract_quality.py            # all 1,497 pages (about 15-20 min)
    PYTHONPATH=$PWD python benchmarks/extract_quality.py --limit 200 --folds 3   # quick look
    PYTHONPATH=$PWD python benchmarks/extract_quality.py --speed-only             # docs/s only (about 4 min)

Quality: WCXB's word F1 (lower-cased ``\\w+`` tokens, multiset precision / recall per page, F1 per page, mean
over pages; ``curate/extract/training/labels.py``), per page type and overall, for

- **quarry CV**: the default ``blocks`` engine, every page predicted by a model trained (by
  ``curate extractor train``, same settings as the shipped model) on the *other* folds: the honest
  figure for pages the model has not seen;
- **quarry in-sample**: the shipped model (trained on all development pages) on the same pages;
- **trafilatura** 2.3.1 ``extract()`` with its defaults (the stage's ``engine = "trafilatura"``);
- **resiliparse**: plain ``extract_plain_text(main_content=True)``.

Speed: docs/s per core (this process, one thread; BLAS pinned to one thread) of the three (and of the
stage with ``engine = "trafilatura"``, which hands trafilatura the page with scripts cut out) on the same pages
(``--speed-pages``, default 150), in interleaved rounds (``--rounds``, default 5; the order rotates each
round: A B C D, B C D A, ...; on a shared machine one round's ratio can be off by a third); a figure is
the median over rounds, a ratio the median of per-round ratios (each round's ratio is printed too), after
a warm-up of every engine on 30 other pages. Quarry is timed as
the stage runs it on an Arrow table of the pages: reading the rows' UTF-8 bytes, cutting scripts and
styles, parsing, features, the classifier, assembling the text, writing the output column;
trafilatura and resiliparse get the same pages as Python strings.

Data: WCXB (Web Content eXtraction Benchmark), Murrough Foley, 2026, CC-BY-4.0; its development split only.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import statistics
import sys
import time
from collections import defaultdict

import numpy as np

DATA = "/work/shared/corpora/extraction"


def f1_table(name: str, pages, texts) -> dict[str, float]:
    from curate.extract.training.labels import word_f1

    by: dict[str, list[float]] = defaultdict(list)
    for p, t in zip(pages, texts):
        f = word_f1(t or "", p.gold)
        by[p.page_type].append(f)
        by["all"].append(f)
    return {k: float(np.mean(v)) for k, v in by.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warc", default=f"{DATA}/wcxb_dev.warc.gz")
    ap.add_argument("--gold", default=f"{DATA}/wcxb_dev_gold.jsonl")
    ap.add_argument("--limit", type=int, default=0, help="only the first N pages (quick runs)")
    ap.add_argument("--folds", type=int, default=5, help="cross-validation folds (0: skip the CV figure)")
    ap.add_argument("--cv-texts", default="",
                    help="read the cross-validated page texts that `curate extractor train --oof FILE` "
                         "wrote (same folds, same code) instead of training the folds again here")
    ap.add_argument("--speed-pages", type=int, default=150, help="pages timed for docs/s")
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved timing rounds (the figures are medians over them)")
    ap.add_argument("--speed-only", action="store_true", help="skip the quality part: only docs/s per core")
    a = ap.parse_args(argv)

    from resiliparse.extract.html2text import extract_plain_text

    from curate.extract.blocks import extract_blocks
    from curate.extract.engines import extract_trafilatura
    from curate.extract.model import cached
    from curate.extract.stage import Extract, Params
    from curate.extract.strip import strip_html
    from curate.extract.training import train as T
    from curate.extract.training.labels import tokens

    model = cached("")
    settings = model.meta.get("report", {})
    pages = T.load_pages(a.warc, a.gold, a.limit)
    n = len(pages)
    print(f"WCXB development split: {n} pages (WCXB, Murrough Foley, 2026, CC-BY-4.0)")
    if a.speed_only:
        return speed(pages, a.speed_pages, a.rounds)
    rows = {}
    cv_texts = None
    if a.cv_texts:
        import json

        with open(a.cv_texts, encoding="utf-8") as f:
            cv_by_id = {d["id"]: d["text"] for d in map(json.loads, f)}
        missing = [p.id for p in pages if p.id not in cv_by_id]
        if missing:
            raise SystemExit(f"--cv-texts {a.cv_texts} lacks {len(missing)} pages (e.g. {missing[:3]})")
        folds = settings.get("folds", "?")
        cv_texts = [cv_by_id[p.id] for p in pages]
        rows[f"quarry blocks, {folds}-fold CV"] = f1_table("", pages, cv_texts)
    elif a.folds > 1:
        t0 = time.perf_counter()
        ds = T.build(pages, log=lambda *_: None)
        print(f"  block features for all pages: {time.perf_counter() - t0:.0f} s")
        hidden = tuple(settings.get("hidden", (64, 64, 32)))
        prob = T.cross_validate(ds, a.folds, settings.get("seed", 0), log=lambda *_: None, hidden=hidden,
                                epochs=settings.get("epochs", 8), weight_decay=settings.get("weight_decay", 1e-4),
                                dropout=settings.get("dropout", 0.0))
        texts_by_page = T.page_texts(ds, prob, model.threshold)
        cv_texts = [texts_by_page.get(i, "") for i in range(n)]
        rows[f"quarry blocks, {a.folds}-fold CV"] = T.scores(ds, texts_by_page)
    quarry = [extract_blocks(p.html) for p in pages]
    rows["quarry blocks, in-sample"] = f1_table("", pages, quarry)
    t0 = time.perf_counter()
    traf = [extract_trafilatura(strip_html(p.html)) for p in pages]
    print(f"  trafilatura on all pages: {time.perf_counter() - t0:.0f} s")
    rows["trafilatura 2.3.1"] = f1_table("", pages, traf)
    rows["resiliparse main_content"] = f1_table("", pages, [extract_plain_text(p.html, main_content=True)
                                                           for p in pages])
    types = ["all"] + sorted(k for k in rows["trafilatura 2.3.1"] if k != "all")
    counts = defaultdict(int)
    for p in pages:
        counts[p.page_type] += 1
    counts["all"] = n
    print("\nword F1 (mean over pages)")
    print(f"{'':<30}" + "".join(f"{t[:13]:>14}" for t in types))
    print(f"{'pages':<30}" + "".join(f"{counts[t]:>14}" for t in types))
    for name, s in rows.items():
        print(f"{name:<30}" + "".join(f"{s.get(t, float('nan')):>14.3f}" for t in types))
    empty = {"quarry": sum(not (t or "").strip() for t in quarry), "trafilatura": sum(not (t or "").strip() for t in traf)}
    no_gold = sum(not tokens(p.gold) for p in pages)
    cv_empty = f" (CV: {sum(not (t or '').strip() for t in cv_texts)})" if cv_texts is not None else ""
    print(f"pages with no text: quarry {empty['quarry']}{cv_empty}, trafilatura {empty['trafilatura']} "
          f"({no_gold} pages have an empty gold text: there, no text scores 1)")
    ref = rows["trafilatura 2.3.1"]
    cv_key = next((k for k in rows if "CV" in k), "quarry blocks, in-sample")
    below = [t for t in types if rows[cv_key][t] < ref[t]]
    print(f"{cv_key} below trafilatura on: {', '.join(below) if below else 'no page type'}")

    return speed(pages, a.speed_pages, a.rounds)


def speed(pages, n_pages: int, rounds: int, n_warm: int = 30) -> int:
    """docs/s per core of the three engines on the same pages, side by side (see the module's doc)."""
    from resiliparse.extract.html2text import extract_plain_text

    from curate.extract.stage import Extract, Params

    n = len(pages)
    sp = pages[:: max(1, n // n_pages)][: n_pages]
    mb = sum(len(p.html.encode("utf-8", "surrogatepass")) for p in sp) / 1e6
    stage = Extract("extract", Params())
    traf_stage = Extract("extract", Params(engine="trafilatura"))
    from curate.schema import HTML, documents_to_table

    table = documents_to_table([{"id": str(i), "text": p.html, "source": "wcxb", "url": "", "content_type": HTML}
                                for i, p in enumerate(sp)])
    import logging

    import trafilatura

    logging.disable(logging.WARNING)
    fns = {"quarry": lambda: stage.apply(table),
           "trafilatura": lambda: [trafilatura.extract(p.html) for p in sp],
           "resiliparse": lambda: [extract_plain_text(p.html, main_content=True) for p in sp],
           "trafilatura_stage": lambda: traf_stage.apply(table)}
    # warm-up on other pages (the ones after the timed ones): each engine's one-time costs (compiled
    # kernels, a process's first allocations, caches of common class names) out of the figures, while the
    # first timed round still meets its pages for the first time
    timed = {id(p) for p in sp}
    warm = [p for p in pages[1:: max(1, n // n_pages)] if id(p) not in timed][:n_warm]
    warm_table = documents_to_table([{"id": str(i), "text": p.html, "source": "wcxb", "url": "",
                                      "content_type": HTML} for i, p in enumerate(warm)])
    stage.apply(warm_table)
    traf_stage.apply(warm_table)
    for p in warm:
        trafilatura.extract(p.html)
        extract_plain_text(p.html, main_content=True)
    times: dict[str, list[float]] = defaultdict(list)
    names = list(fns)
    for r in range(rounds):
        for k in names[r % len(names):] + names[: r % len(names)]:
            t0 = time.process_time()
            fns[k]()
            times[k].append(time.process_time() - t0)
    print(f"\nspeed on {len(sp)} pages ({mb:.1f} MB HTML), {rounds} interleaved rounds after a warm-up on {len(warm)} "
          f"other pages, CPU time of this process")
    label = {"quarry": "quarry extract stage (blocks)", "trafilatura": "trafilatura.extract(html)",
             "resiliparse": "resiliparse main_content", "trafilatura_stage": "extract stage, engine=trafilatura"}
    for k in names:
        med = statistics.median(times[k])
        ratio = statistics.median(t / q for t, q in zip(times["trafilatura"], times[k]))
        rounds_x = " ".join(f"{t / q:.1f}" for t, q in zip(times["trafilatura"], times[k]))
        print(f"  {label[k]:<34} {len(sp) / med:8.1f} docs/s per core  {mb / med:6.2f} MB/s   {ratio:5.1f}x trafilatura"
              f"  (rounds: {rounds_x})")
    print("  (the extract stage cuts scripts and styles out before any engine; trafilatura.extract(html) gets the "
          "page as fetched)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

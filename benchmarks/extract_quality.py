"""Extraction quality and speed on every set with gold text: Quarry's ``extract`` vs trafilatura vs resiliparse.

    PYTHONPATH=$PWD python benchmarks/extract_quality.py            # everything (about 15-40 min on one core)
    PYTHONPATH=$PWD python benchmarks/extract_quality.py --limit 200 --folds 3   # quick look
    PYTHONPATH=$PWD python benchmarks/extract_quality.py --cv-probs /tmp/wcxb_cv.npy  # CV once, then reused
    PYTHONPATH=$PWD python benchmarks/extract_quality.py --cv-probs /tmp/wcxb_cv.npy --train-seeds 1,2  # + seeds
    PYTHONPATH=$PWD python benchmarks/extract_quality.py --speed-only             # docs/s only (a few minutes)
    PYTHONPATH=$PWD python benchmarks/extract_quality.py --speed-only --speed-set wcxb   # one set
    PYTHONPATH=$PWD python benchmarks/extract_quality.py --speed-only --speed-parts      # + where the time goes

Quality: WCXB's word F1 (lower-cased ``\\w+`` tokens, multiset precision / recall per page, F1 per page, mean
over pages; ``curate/extract/training/labels.py``) on two sets, each side by side with

- **trafilatura** 2.3.1 ``extract()`` with its defaults (the stage's ``engine = "trafilatura"``);
- **resiliparse**: plain ``extract_plain_text(main_content=True)``;
- **quarry rules**: Quarry's rules engine (``engine = "resiliparse"``: resiliparse plus line cleanup).

Two sets with gold text: **WCXB's development split** (1,497 pages, by page type) and **Mozilla Readability's
test pages** (130, by language group, ``labels.language_group``: ``en``, ``other`` the real pages in other
languages, ``lorem`` the synthetic Lorem-ipsum pages; ``not en`` = other + lorem). Quarry's rows:

- **CV over both sets**: every page of both sets predicted by a model trained (the shipped model's settings)
  on the other folds, folds by site (``train.page_group``: no model has seen a page of the same set and
  site); the honest figure for pages the model has not seen, as ``curate extractor train`` computes it;
- **trained on the other set only**: WCXB's pages predicted by a model trained on Readability's pages only,
  Readability's by one trained on WCXB's only (``--no-across`` skips both);
- **shipped model**: the model file as shipped (in-sample for the pages it was trained on); and the pages an
  engine leaves empty where trafilatura finds text.

Speed: docs/s per core (this process, one thread; BLAS pinned to one thread) of the three (and of the
stage with ``engine = "trafilatura"``, which hands trafilatura the page with scripts cut out) on the same pages
(``--speed-pages``, default 150), of each set in turn (``--speed-set``: the ratio differs by set, trafilatura
being about twice as fast on Readability's smaller article pages as on WCXB's), in interleaved rounds
(``--rounds``, default 5; the order rotates each round: A B C D, B C D A, ...; on a shared machine one round's
ratio can be off by a third); a figure is the median over rounds, a ratio the median of per-round ratios (each
round's ratio is printed too), after a warm-up of every engine on 30 other pages (Readability's set has 130
pages in all: 30 of the timed ones). ``--speed-parts`` then prints where the blocks engine's time goes on
those pages, part by part (``speed_parts``). Quarry is timed as
the stage runs it on an Arrow table of the pages: reading the rows' UTF-8 bytes, cutting scripts and
styles, parsing, features, the classifier, assembling the text, writing the output column;
trafilatura and resiliparse get the same pages as Python strings.

Data: WCXB (Web Content eXtraction Benchmark), Murrough Foley, 2026, CC-BY-4.0, its development split only;
Mozilla Readability's test pages (``test/test-pages``, Apache-2.0).
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

DATA = "/work/shared/corpora/extraction"


def f1_table(pages, texts) -> dict[str, float]:
    """Mean word F1 per page type (or language group) and overall."""
    from curate.extract.training.labels import word_f1

    by: dict[str, list[float]] = defaultdict(list)
    for p, t in zip(pages, texts):
        f = word_f1(t or "", p.gold)
        by[p.page_type].append(f)
        by["all"].append(f)
        if p.page_type in ("other", "lorem"):
            by["not en"].append(f)
    return {k: float(np.mean(v)) for k, v in by.items()}


def print_table(title: str, pages, rows: dict[str, dict[str, float]], order=None) -> None:
    counts = defaultdict(int)
    for p in pages:
        counts[p.page_type] += 1
        if p.page_type in ("other", "lorem"):
            counts["not en"] += 1
    counts["all"] = len(pages)
    cols = order or (["all"] + sorted(k for k in counts if k != "all"))
    cols = [c for c in cols if counts[c]]
    print(f"\n{title}")
    print(f"{'':<34}" + "".join(f"{t[:13]:>14}" for t in cols))
    print(f"{'pages':<34}" + "".join(f"{counts[t]:>14}" for t in cols))
    for name, s in rows.items():
        print(f"{name:<34}" + "".join(f"{s.get(t, float('nan')):>14.3f}" for t in cols))


def reference_texts(pages) -> dict[str, list[str]]:
    """trafilatura, resiliparse and Quarry's rules engine on every page."""
    from resiliparse.extract.html2text import extract_plain_text

    from curate.extract.engines import extract_trafilatura
    from curate.extract.rules import extract_resiliparse
    from curate.extract.strip import strip_html

    out = {}
    t0 = time.perf_counter()
    out["trafilatura 2.3.1"] = [extract_trafilatura(strip_html(p.html)) for p in pages]
    print(f"  trafilatura on {len(pages)} pages: {time.perf_counter() - t0:.0f} s")
    out["resiliparse main_content"] = [extract_plain_text(p.html, main_content=True) for p in pages]
    out["quarry rules (engine=resiliparse)"] = [extract_resiliparse(p.html) for p in pages]
    return out


def cv_texts_of(ds, a, settings, threshold: float, train_seed: int | None = None) -> list[str]:
    """Cross-validated texts of every page of ``ds`` (both sets): read (``--cv-texts``), or from out-of-fold
    block probabilities computed here with the folds of ``curate extractor train`` (by site, over both sets)
    and kept in ``--cv-probs`` when given (reused when that file exists). ``train_seed``: the same folds, the
    models trained with another seed (kept in ``--cv-probs`` with ``.seedN`` before its suffix)."""
    from curate.extract.training import train as T

    pages = ds.pages
    cv_probs = a.cv_probs
    if train_seed is not None:
        cv_probs = str(Path(cv_probs).with_suffix(f".seed{train_seed}.npy")) if cv_probs else ""
    elif a.cv_texts:
        with open(a.cv_texts, encoding="utf-8") as f:  # keyed by (set, id): two sets may share ids
            by_id = {(d.get("set", ""), d["id"]): d["text"] for d in map(json.loads, f)}
        keys = [(T.set_of(p) if any(k[0] for k in by_id) else "", p.id) for p in pages]
        missing = [k for k in keys if k not in by_id]
        if missing:
            raise SystemExit(f"--cv-texts {a.cv_texts} lacks {len(missing)} pages (e.g. {missing[:3]})")
        return [by_id[k] for k in keys]
    if cv_probs and Path(cv_probs).is_file():
        prob = np.load(cv_probs)
        if prob.shape != ds.y.shape:
            raise SystemExit(f"--cv-probs {cv_probs} holds {prob.shape[0]} blocks, these pages {ds.y.size}: "
                             f"delete it to compute it again")
        print(f"  out-of-fold probabilities read from {cv_probs}")
    else:
        t0 = time.perf_counter()
        prob = T.cross_validate(ds, a.folds, settings.get("seed", 0), log=lambda *_: None, train_seed=train_seed,
                                **train_settings(settings))
        print(f"  {a.folds}-fold CV over both sets" + (f", training seed {train_seed}" if train_seed is not None
                                                       else "") + f": {time.perf_counter() - t0:.0f} s")
        if cv_probs:
            np.save(cv_probs, prob)
    by_page = T.page_texts(ds, prob, threshold)
    return [by_page.get(i, "") for i in range(len(pages))]


def train_settings(settings: dict) -> dict:
    """The shipped model's training settings (its file's report)."""
    return dict(hidden=tuple(settings.get("hidden", (64, 64, 32))), epochs=settings.get("epochs", 8),
                weight_decay=settings.get("weight_decay", 0.05), dropout=settings.get("dropout", 0.0),
                balance_sets=settings.get("balance_sets", False))


def across_sets(ds, train_on: np.ndarray, settings: dict, threshold: float) -> list[str]:
    """Texts of every page of ``ds`` from a model trained (the shipped model's settings) on ``train_on`` only
    (the caller reads the other set's pages)."""
    from curate.extract.training import train as T

    m = T.train_net(ds, train_on, seed=settings.get("seed", 0), **train_settings(settings))
    by_page = T.page_texts(ds, T.predict_pages(m, ds, np.arange(len(ds.pages))), threshold)
    return [by_page.get(i, "") for i in range(len(ds.pages))]


def empty_where_trafilatura_is_not(texts, traf) -> int:
    return sum(not (t or "").strip() and bool((r or "").strip()) for t, r in zip(texts, traf))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warc", default=f"{DATA}/wcxb_dev.warc.gz")
    ap.add_argument("--gold", default=f"{DATA}/wcxb_dev_gold.jsonl")
    ap.add_argument("--readability-warc", default=f"{DATA}/readability.warc.gz")
    ap.add_argument("--readability-gold", default=f"{DATA}/readability_gold.jsonl")
    ap.add_argument("--limit", type=int, default=0, help="only the first N WCXB pages (quick runs)")
    ap.add_argument("--folds", type=int, default=5, help="cross-validation folds (0: skip the CV figure)")
    ap.add_argument("--cv-texts", default="",
                    help="read the cross-validated page texts that `curate extractor train --oof FILE` "
                         "wrote (same sets, folds and code) instead of training the folds again here")
    ap.add_argument("--cv-probs", default="", help="keep the out-of-fold block probabilities in this .npy file "
                    "(read it instead of training the folds again when it exists)")
    ap.add_argument("--train-seeds", default="", type=lambda v: [int(x) for x in v.split(",") if x.strip()],
                    help="also the CV rows of models trained with these seeds on the same folds, e.g. 1,2 (how "
                         "much a figure moves with the training seed alone; about 4 min each)")
    ap.add_argument("--no-across", action="store_true",
                    help="skip the two models trained on one set only (each tested on the other)")
    ap.add_argument("--speed-pages", type=int, default=150, help="pages timed for docs/s")
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved timing rounds (the figures are medians over them)")
    ap.add_argument("--speed-only", action="store_true", help="skip the quality part: only docs/s per core")
    ap.add_argument("--speed-parts", action="store_true",
                    help="after each set's speed, where the blocks engine's time goes per page, part by part")
    ap.add_argument("--speed-set", choices=("both", "wcxb", "readability"), default="both",
                    help="the pages timed: WCXB's (larger pages, many listings and products), Readability's "
                         "(smaller pages, mostly articles: trafilatura is about twice as fast on them), or both")
    ap.add_argument("--snippets-only", action="store_true",
                    help="only the third set (trafilatura's regression pages, must / must-not snippets)")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    from curate.extract.training import train as T

    if a.snippets_only:
        report_snippets()
        return 0
    pages = T.load_pages(a.warc, a.gold, a.limit)
    print(f"WCXB development split: {len(pages)} pages (WCXB, Murrough Foley, 2026, CC-BY-4.0)")
    rpages = T.load_pages(a.readability_warc, a.readability_gold)
    print(f"Mozilla Readability test pages: {len(rpages)} pages (Apache-2.0)")
    if not a.speed_only:
        quality(a, pages, rpages)
    for name, ps in (("WCXB", pages), ("Readability", rpages)):
        if a.speed_set in ("both", name.lower()):
            speed(ps, a.speed_pages, a.rounds, name)
            if a.speed_parts:
                speed_parts(ps, a.speed_pages, name)
    return 0


def quality(a, pages, rpages) -> None:
    """The two tables: every engine's texts of both sets, then the figures."""
    from curate.extract.blocks import extract_blocks
    from curate.extract.comments import with_comments
    from curate.extract.model import cached
    from curate.extract.training import train as T

    model = cached("")
    settings = model.meta.get("report", {})
    t0 = time.perf_counter()
    ds = T.build(pages + rpages, log=lambda *_: None)
    print(f"  block features of both sets: {time.perf_counter() - t0:.0f} s")
    n = len(pages)
    texts: dict[str, list[str]] = {}
    if a.cv_texts or a.folds > 1:
        folds = settings.get("folds", a.folds) if a.cv_texts else a.folds
        cv = texts[f"quarry blocks, {folds}-fold CV over both sets"] = cv_texts_of(ds, a, settings, model.threshold)
        # what `comments = true` costs where the gold text leaves an article's comments out (both sets do)
        texts["quarry blocks, CV, comments = true"] = [with_comments(t, p.html) for t, p in zip(cv, pages + rpages)]
    for s in a.train_seeds:
        texts[f"quarry blocks, CV, training seed {s}"] = cv_texts_of(ds, a, settings, model.threshold, s)
    if not a.no_across:
        texts["quarry trained on the other set only"] = (
            across_sets(ds, np.arange(n, len(ds.pages)), settings, model.threshold)[:n]
            + across_sets(ds, np.arange(n), settings, model.threshold)[n:])
    print(f"  the shipped model was trained on {model.meta.get('trained_on', '?')} (in-sample there)")
    texts["quarry blocks, shipped model"] = [extract_blocks(p.html) for p in pages + rpages]
    for k, v in reference_texts(pages + rpages).items():
        texts[k] = v
    report_wcxb(pages, {k: v[:n] for k, v in texts.items()})
    report_readability(rpages, {k: v[n:] for k, v in texts.items()})
    report_snippets()


SNIPPETS = Path(__file__).resolve().parent.parent / "tests" / "data" / "extract"


def report_snippets() -> None:
    """A third set of real pages, in neither training set: trafilatura's regression pages (87 news, blog,
    shop and wiki pages, mostly German and English) with must / must-not snippets
    (``curate.extract.training.evaluate``; trafilatura's own tests, so trafilatura is scored on pages its
    rules were tuned to pass)."""
    from curate.extract.engines import engine_function, extract_trafilatura
    from curate.extract.stage import Params
    from curate.extract.strip import strip_utf8
    from curate.extract.training.evaluate import load_pages, reference_engines, score

    pages = load_pages(SNIPPETS / "web-pages-87.warc.gz", SNIPPETS / "expected_snippets.json")
    print(f"\ntrafilatura's regression pages ({len(pages)}, must / must-not snippets; neither set holds them):")
    engines = reference_engines()
    # the comment policy matched: trafilatura keeps an article's comments by default and its tests assert
    # them; the learned engine leaves them out (as both of its gold sets, and FineWeb's trafilatura setting)
    blocks_comments = engine_function(Params(comments=True))
    engines["quarry extract (blocks, comments = true)"] = lambda html, url: blocks_comments(
        strip_utf8(html.encode("utf-8", "surrogatepass")), url)
    engines["trafilatura, include_comments=False"] = lambda html, url: extract_trafilatura(html, url, comments=False)
    in_threads = comment_snippets(pages)
    print(f"  ({len(in_threads)} of the {sum(len(p.must) for p in pages)} must snippets lie in a comment thread)")
    for name, fn in engines.items():
        s = score(name, fn, pages)
        missed = sum(kind == "missing" and (url, snip) in in_threads for url, kind, snip in s.failures)
        print(f"  {s.row()}  comment snippets {len(in_threads) - missed}/{len(in_threads)}")


def comment_snippets(pages) -> set[tuple[str, str]]:
    """(url, snippet) of the must snippets found in an element whose class or id names a comment (or Disqus)."""
    from resiliparse.parse.html import HTMLTree

    from curate.extract.rules import _items

    out = set()
    for p in pages:
        body = HTMLTree.parse(p.html).body
        if body is None:
            continue
        text = " ".join(n.text for n in _items(body.query_selector_all(
            "[class*=comment i], [id*=comment i], [id*=disqus]")))
        out.update((p.url, s) for s in p.must if s in text)
    return out


def report_wcxb(pages, texts: dict[str, list[str]]) -> None:
    from curate.extract.training.labels import tokens

    rows = {k: f1_table(pages, v) for k, v in texts.items()}
    print_table("WCXB development split: word F1 (mean over pages)", pages, rows)
    traf = texts["trafilatura 2.3.1"]
    no_gold = sum(not tokens(p.gold) for p in pages)
    print("pages with no text: " + ", ".join(f"{k.split(',')[0] if 'CV' not in k else 'quarry ' + k.split(', ', 1)[1]} "
                                             f"{sum(not (t or '').strip() for t in v)}" for k, v in texts.items())
          + f" ({no_gold} pages have an empty gold text: there, no text scores 1)")
    below_trafilatura(rows)


def report_readability(rpages, texts: dict[str, list[str]]) -> None:
    rows = {k: f1_table(rpages, v) for k, v in texts.items()}
    print_table("Mozilla Readability test pages: word F1 (mean over pages; other = real pages not in English)",
                rpages, rows, ["all", "en", "not en", "other", "lorem"])
    rt = texts["trafilatura 2.3.1"]
    print("pages left empty where trafilatura finds text: " + ", ".join(
        f"{k} {empty_where_trafilatura_is_not(v, rt)}" for k, v in texts.items() if k != "trafilatura 2.3.1"))
    below_trafilatura(rows)


def below_trafilatura(rows: dict[str, dict[str, float]]) -> None:
    """Where each of Quarry's learned rows is below trafilatura."""
    tr = rows["trafilatura 2.3.1"]
    for k, r in rows.items():
        if k.startswith("quarry blocks") or k.startswith("quarry trained"):
            below = sorted(t for t in tr if r.get(t, 1.0) < tr[t])
            print(f"  {k} below trafilatura on: {', '.join(below) if below else 'none'}")


def speed_parts(pages, n_pages: int, name: str, passes: int = 3) -> None:
    """CPU time per page of each part of the blocks engine, in the order the stage runs them, on the pages
    ``speed`` timed (mean over ``passes`` passes). Each part is timed on its own from the output of the one
    before; "the rest of the features" is ``features()`` less its parse and DOM walk (timed apart)."""
    from curate.extract import dom_scan
    from curate.extract.blocks import extract_blocks_utf8, page_text, warm_blocks
    from curate.extract.depth import too_deep_utf8
    from curate.extract.dom_walk import MAX_DEPTH, parse
    from curate.extract.features import chrome_blocks, features, link_columns
    from curate.extract.model import cached
    from curate.extract.shape import bound_shape
    from curate.extract.strip import strip_utf8, utf8

    n = len(pages)
    sp = pages[:: max(1, n // n_pages)][: n_pages]
    raws = [p.html.encode("utf-8", "surrogatepass") for p in sp]
    valid = [utf8(p.html) is not None for p in sp]  # as Arrow's check in the stage (no lone surrogates)
    warm_blocks()
    m = cached("")
    t: dict[str, float] = defaultdict(float)

    def timed(part, fn, *args):
        t0 = time.process_time()
        out = fn(*args)
        t[part] += time.process_time() - t0
        return out

    for _ in range(passes):
        for raw, ok in zip(raws, valid):
            data = timed("cut scripts and styles (strip_utf8)", strip_utf8, raw, ok)
            data = timed("page-shape scan (bound_shape)", bound_shape, data)[0]
            timed("depth scan (too_deep_utf8; from the shape scan's counts)", too_deep_utf8, data, MAX_DEPTH)
            tree = timed("lexbor parse", parse, None, data)
            if tree is not None:
                timed("DOM walk (compiled, over lexbor's nodes)", dom_scan.walk_arrays, tree)
                timed("  (fallback: lexbor's serialization, then a compiled scan of it)", dom_scan.serialized_walk,
                      tree)
            b = timed("features, whole", features, None, True, data)
            if b is not None:
                prob = timed("classifier", m.predict, b.features, b.groups)
                timed("assembling the text (and the rules engine where it falls back)", page_text, b.texts,
                      b.tags, b.groups, prob, m.threshold, data, "", link_columns(b.features), (b.owner, b.parent),
                      True, chrome_blocks(b.features))
            timed("the engine as the stage calls it (extract_blocks_utf8)", extract_blocks_utf8, data)
    t["features, the rest"] = (t.pop("features, whole") - t["lexbor parse"]
                               - t["DOM walk (compiled, over lexbor's nodes)"])
    print(f"\nwhere the blocks engine's time goes on {len(sp)} {name} pages (CPU ms per page, mean of {passes} "
          f"passes; each part timed on its own)")
    for k, v in t.items():  # in the order of the stage, the rest of the features after the DOM walk
        if k != "features, the rest":
            print(f"  {k:<66} {1000 * v / (passes * len(sp)):6.3f}")
        if k.startswith("  (fallback"):
            print(f"  {'features, the rest':<66} {1000 * t['features, the rest'] / (passes * len(sp)):6.3f}")
    print("  (the stage cuts scripts and runs the shape scan before it calls the engine)")


def speed(pages, n_pages: int, rounds: int, name: str = "WCXB", n_warm: int = 30) -> None:
    """docs/s per core of the three engines on the same pages of one set, side by side (see the module's doc).
    Where the set has fewer pages than ``n_pages`` plus the warm-up's, the warm-up takes pages timed too."""
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
    warm = [p for p in pages[1:: max(1, n // n_pages)] if id(p) not in timed][:n_warm] or pages[:n_warm]
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
    print(f"\nspeed on {len(sp)} {name} pages ({mb:.1f} MB HTML), {rounds} interleaved rounds after a warm-up on "
          f"{len(warm)} {'other ' if not timed & {id(p) for p in warm} else ''}pages, CPU time of this process")
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


if __name__ == "__main__":
    sys.exit(main())

"""Does extraction hold in scripts the gold sets barely have? The same pages with their visible text rewritten
into another script, side by side with trafilatura.

    PYTHONPATH=$PWD python benchmarks/extract_scripts.py                  # both sets, 5-fold CV (about 15 min)
    PYTHONPATH=$PWD python benchmarks/extract_scripts.py --limit 300 --no-trafilatura   # quick look

A metamorphic check. WCXB's and Readability's pages are almost all in Latin scripts. Each page's visible text
(not its tags, attributes, scripts or styles; HTML entities kept) and its gold text are rewritten the same way,
deterministically:

- **zh** (pseudo-Chinese): one Han character per word (the same word, the same character), no spaces between
  them, CJK punctuation (``。，！？：；``);
- **th** (pseudo-Thai): each letter to a Thai consonant, no spaces between words, one space between sentences
  (Thai has no full stop; a block's last one stays);
- **ar** (pseudo-Arabic): each letter to an Arabic letter, spaces kept, ``؟`` and ``،``.

The page's layout stays what it was, so what changes is the script alone. A model whose features lean on
English or on spaces between words (lengths, words per sentence, title overlap) loses here. Scored on pages it
has not seen: 5-fold CV by site over both sets, as ``curate extractor train`` computes it (each fold's model
is trained on the other folds' original pages and predicts the held-out pages in every script). The shipped
model's threshold is used. F1: WCXB's word F1 for the original and ``ar`` pages. For ``zh`` and ``th``, whose
``\\w+`` runs are whole clauses, the F1 of the multisets of letters (digits as runs).

trafilatura 2.3.1 (``extract()`` defaults) on the same rewritten pages. It does not learn; its rules read
the text (link density, sentence marks, lengths) as ours do.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402

import numpy as np  # noqa: E402

DATA = "/work/shared/corpora/extraction"
SCRIPTS = ("orig", "zh", "th", "ar")

_TAG = re.compile(r"(<!--.*?-->|<script\b.*?</script\s*>|<style\b.*?</style\s*>|<[^>]*>)", re.S | re.I)
_ENTITY = re.compile(r"(&#?\w+;)")
_LETTERS = re.compile(r"[^\W\d_]+")
_HAN_GAP = re.compile(r"(?<=[\u4e00-\u9fff]) +(?=[\u4e00-\u9fff])")
_THAI_GAP = re.compile(r"(?<=[\u0e00-\u0e7f]) (?=[\u0e00-\u0e7f])")
_THAI = [chr(c) for c in range(0x0E01, 0x0E2F)]
_ARABIC = [chr(c) for c in range(0x0628, 0x063B)] + [chr(c) for c in range(0x0641, 0x064B)]
_CJK_MARKS = ((". ", "。"), (".", "。"), (", ", "，"), (",", "，"), ("! ", "！"), ("? ", "？"), (": ", "："),
              ("; ", "；"))


def _hash(s: str) -> int:
    return zlib.crc32(s.encode("utf-8", "surrogatepass"))


def as_zh(text: str) -> str:
    text = _HAN_GAP.sub("", _LETTERS.sub(lambda m: chr(0x4E00 + _hash(m.group().lower()) % 20000), text))
    for a, b in _CJK_MARKS:
        text = text.replace(a, b)
    return text


def as_th(text: str) -> str:
    text = _LETTERS.sub(lambda m: "".join(_THAI[_hash(c) % len(_THAI)] for c in m.group().lower()), text)
    text = re.sub(r"[.!?] +", "\0", text)  # a sentence's end: one space (kept by the gap rule below)
    return _THAI_GAP.sub("", text).replace("\0", " ")


def as_ar(text: str) -> str:
    text = _LETTERS.sub(lambda m: "".join(_ARABIC[_hash(c) % len(_ARABIC)] for c in m.group().lower()), text)
    return text.replace("?", "؟").replace(",", "،")


REWRITE = {"orig": lambda t: t, "zh": as_zh, "th": as_th, "ar": as_ar}


def rewrite_html(html: str, script: str) -> str:
    """The page with the text between its tags rewritten (not inside scripts, styles or comments; entities
    kept as they are)."""
    f = REWRITE[script]
    out = []
    for part in _TAG.split(html):
        if not part or part.startswith("<"):
            out.append(part)
        else:
            out.append("".join(p if _ENTITY.fullmatch(p) else f(p) for p in _ENTITY.split(part)))
    return "".join(out)


_WORD = re.compile(r"\w+")
_LETTER = re.compile(r"[^\W\d_]|\d+")


def f1(output: str, gold: str, script: str) -> float:
    """WCXB's word F1; for zh and th the F1 of the letters (digits as runs), whose ``\\w+`` runs are clauses."""
    pat = _LETTER if script in ("zh", "th") else _WORD
    o, g = Counter(pat.findall((output or "").lower())), Counter(pat.findall(gold.lower()))
    no, ng = sum(o.values()), sum(g.values())
    if not ng or not no:
        return float(ng == no)
    common = sum((o & g).values())
    return 2 * common / (no + ng)


def rewritten(pages, script: str):
    from curate.extract.training.train import Page

    f = REWRITE[script]
    return [Page(p.id, p.page_type, rewrite_html(p.html, script), f(p.gold), p.group) for p in pages]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--warc", action="append", help="a set's pages (repeat with --gold; default: WCXB and Readability)")
    ap.add_argument("--gold", action="append", help="the set's gold text, one per --warc")
    ap.add_argument("--limit", type=int, default=0, help="only the first N pages of each set")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0, help="folds and training seed (the shipped model's: 0)")
    ap.add_argument("--no-trafilatura", action="store_true", help="skip trafilatura's rows")
    a = ap.parse_args(argv)
    from curate.extract.model import cached
    from curate.extract.training.train import (build, folds_of, groups_of, load_sets, page_texts, predict_pages,
                                               set_of, train_net)

    warcs = a.warc or [f"{DATA}/wcxb_dev.warc.gz", f"{DATA}/readability.warc.gz"]
    golds = a.gold or [f"{DATA}/wcxb_dev_gold.jsonl", f"{DATA}/readability_gold.jsonl"]
    pages = load_sets(warcs, golds, a.limit)
    sets = sorted({set_of(p) for p in pages})
    threshold = cached("").threshold
    fold = folds_of(groups_of(pages), a.folds, a.seed)
    t0 = time.perf_counter()
    ds = build(pages, log=lambda m: None)
    models = [train_net(ds, np.flatnonzero(fold != f), seed=a.seed) for f in range(a.folds)]
    print(f"{len(pages)} pages ({', '.join(sets)}); {a.folds} fold models trained in {time.perf_counter() - t0:.0f} s;"
          f" threshold {threshold}")
    rows: dict[str, dict[str, dict[str, float]]] = defaultdict(dict)
    for script in SCRIPTS:
        ps = pages if script == "orig" else rewritten(pages, script)
        sd = ds if script == "orig" else build(ps, log=lambda m: None)
        prob = sum(predict_pages(m, sd, np.flatnonzero(fold == f)) for f, m in enumerate(models))
        texts = page_texts(sd, prob, threshold)
        rows["quarry blocks, CV"][script] = _by_set(ps, [texts.get(i, "") for i in range(len(ps))], script)
        if not a.no_trafilatura:
            from curate.extract.engines import extract_trafilatura
            from curate.extract.strip import strip_html

            rows["trafilatura 2.3.1"][script] = _by_set(ps, [extract_trafilatura(strip_html(p.html)) or "" for p in ps],
                                                        script)
        print(f"  {script}: done ({time.perf_counter() - t0:.0f} s)", flush=True)
        del sd
    print("\nmean F1 per set, each script (" + " / ".join(sets) + ")")
    print(f"{'':<22}" + "".join(f"{s:>18}" for s in SCRIPTS))
    for name, by_script in rows.items():
        print(f"{name:<22}" + "".join(f"{' / '.join(f'{by_script[s][x]:.3f}' for x in sets):>18}" for s in SCRIPTS))


def _by_set(pages, texts, script: str) -> dict[str, float]:
    from curate.extract.training.train import set_of

    by = defaultdict(list)
    for p, t in zip(pages, texts):
        by[set_of(p)].append(f1(t, p.gold, script))
    return {k: float(np.mean(v)) for k, v in by.items()}


if __name__ == "__main__":
    main()

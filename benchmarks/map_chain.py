"""Speed of the map chain normalize > langid > gopher_quality > gopher_repetition > c4_quality >
fineweb_quality, by stage, in MB of text per CPU second (= per core: one process, one thread),
today's code beside the code of an earlier commit, in one run.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/map_chain.py                  # against b371ce7
    PYTHONPATH=$PWD .venv/bin/python benchmarks/map_chain.py --docs 400 --rounds 5 --datatrove
    PYTHONPATH=$PWD .venv/bin/python benchmarks/map_chain.py --words regex     # the faster splitter

The earlier commit's ``normalize``, ``langid`` and ``heuristics`` modules are read with ``git show``
into a temporary folder and imported from there, so both chains run in this process on the same
documents. Each round takes its own slice of documents (real prose from
``../shared/corpora/prose/``, or ``--corpus``) and runs the two chains in alternating order; each
stage gets what the stage before it kept, as in a pipeline. Word memos (spaCy's tokens per chunk,
langid's n-gram rows per word) are emptied at the start of every round, so figures are for a process that has seen
only that round's documents (``--warm`` keeps them); models and spaCy's blank pipeline stay loaded
(a worker loads them once, which a 300-document round would otherwise charge to ``gopher_quality``).
Today's chain gets one ``BatchContext`` per round, as the chain runner gives one per batch. Printed: median MB/s per stage and for the
whole chain (input MB / sum of the stages' CPU seconds), and new / old.

``--datatrove`` adds DataTrove 0.10.1's four filters (GopherQuality, GopherRepetition, C4Quality,
FineWebQuality; its defaults) on the same documents, for scale.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpora" / "prose" / "english_prose.jsonl"
STAGES = ["normalize", "langid", "gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality"]
# the earlier commit's module and class of each stage
OLD_CLASSES = {"normalize": ("normalize", "Normalize"), "langid": ("langid", "LangId"),
               "gopher_quality": ("heuristics", "GopherQuality"), "gopher_repetition": ("heuristics", "GopherRepetition"),
               "c4_quality": ("heuristics", "C4Quality"), "fineweb_quality": ("heuristics", "FineWebQuality")}
HEURISTICS = STAGES[2:]


def load_old_modules(rev: str, tmp: Path) -> dict:
    """The stage modules as of ``rev``, imported under private names."""
    mods = {}
    for name in ("normalize", "langid", "heuristics"):
        src = subprocess.run(["git", "show", f"{rev}:curate/stages/{name}.py"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        path = tmp / f"old_{name}.py"
        path.write_text(src)
        spec = importlib.util.spec_from_file_location(f"old_{name}", path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
        mods[name] = mod
    return mods


def build_chain(classes: dict, words: str | None = None) -> list:
    """(stage, instance) for each of ``STAGES``, from ``classes``: stage -> its class."""
    chain = []
    for stage in STAGES:
        cls = classes[stage]
        params = cls.Params(words=words) if words and stage in HEURISTICS else cls.Params()
        chain.append((stage, cls(stage, params)))
    return chain


def clear_memos() -> None:
    from curate.text import fasttext_model
    from curate.text.spacy_words import spacy_words

    spacy_words("en").reset()  # the heuristic stages' splitter: memos emptied, spaCy kept loaded
    for pred in fasttext_model._FAST.values():  # langid's fast_predict: words seen before
        if pred is not None:
            pred.reset_words()


def table_mb(table) -> float:
    from curate.schema import TEXT

    return sum(len(t.encode()) for t in table.column(TEXT).to_pylist()) / 1e6


def run_chain(chain, table, with_context: bool = True) -> dict[str, float]:
    """CPU seconds and input MB per stage; ``with_context``: one ``BatchContext`` handed from stage to
    stage, as the chain runner does (the earlier commit's stages take none)."""
    from curate.schema import TEXT
    from curate.stages.base import BatchContext

    out = {}
    context = BatchContext()
    for stage, obj in chain:
        mb = sum(len(t.encode()) for t in table.column(TEXT).to_pylist()) / 1e6
        docs = table.num_rows
        t0 = time.process_time()
        table = (obj.apply(table, context) if with_context else obj.apply(table)).kept
        out[stage] = (time.process_time() - t0, mb, docs)
    return out


def run_datatrove(texts: list[str]) -> dict[str, float]:
    from datatrove.data import Document
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter)

    out = {}
    for stage, filt in [("gopher_quality", GopherQualityFilter()), ("gopher_repetition", GopherRepetitionFilter()),
                        ("c4_quality", C4QualityFilter()), ("fineweb_quality", FineWebQualityFilter())]:
        mb = sum(len(t.encode()) for t in texts) / 1e6
        docs = len(texts)
        t0 = time.process_time()
        kept = []
        for t in texts:
            d = Document(text=t, id="x")
            if filt.filter(d) is True:
                kept.append(d.text)
        out[stage] = (time.process_time() - t0, mb, docs)
        texts = kept
    return out


def report(results: dict, args) -> None:
    """Print the median MB/s per stage and chain, now beside the earlier commit (and DataTrove)."""
    def mbps(side: str, stage: str, unit: int = 1) -> float:  # unit 1: MB/s, 2: docs/s
        return statistics.median(run[stage][unit] / run[stage][0] for run in results[side])

    def chain_mbps(side: str, stages: list[str], unit: int = 1) -> float:
        return statistics.median(run[stages[0]][unit] / sum(run[s][0] for s in stages) for run in results[side])

    mb_in = statistics.median(run["normalize"][1] for run in results["new"])
    print(f"map chain, {args.docs} documents per round ({mb_in:.2f} MB of text), {args.rounds} rounds, "
          f"memos {'kept' if args.warm else 'emptied each round'}, words = {args.words!r}; "
          "MB/s = MB in / CPU s (one core)")
    print(f"corpus: {args.corpus}")
    head = f"{'stage':<20}{args.baseline + ' MB/s':>14}{'now MB/s':>12}{'now/old':>9}{'now docs/s':>12}"
    if args.datatrove:
        head += f"{'DataTrove MB/s':>16}{'now/DT':>8}"
    print(head)
    for stage in STAGES:
        o, n = mbps("old", stage), mbps("new", stage)
        line = f"{stage:<20}{o:>14.2f}{n:>12.2f}{n / o:>8.2f}x{mbps('new', stage, 2):>12.0f}"
        if args.datatrove and stage in results["datatrove"][0]:
            d = mbps("datatrove", stage)
            line += f"{d:>16.2f}{n / d:>7.1f}x"
        print(line)
    skip_off = statistics.median(r[1] / r[0] for r in results["noskip"])
    print(f"{'  normalize, skip_clean = false (ftfy on every document)':<56}{skip_off:>8.2f} MB/s")
    o, n = chain_mbps("old", STAGES), chain_mbps("new", STAGES)
    line = f"{'whole chain':<20}{o:>14.2f}{n:>12.2f}{n / o:>8.2f}x{chain_mbps('new', STAGES, 2):>12.0f}"
    print(line)
    four = STAGES[2:]
    o4, n4 = chain_mbps("old", four), chain_mbps("new", four)
    line = f"{'the four filters':<20}{o4:>14.2f}{n4:>12.2f}{n4 / o4:>8.2f}x{chain_mbps('new', four, 2):>12.0f}"
    if args.datatrove:
        d4 = chain_mbps("datatrove", four)
        line += f"{d4:>16.2f}{n4 / d4:>7.1f}x"
    print(line)
    slowest = max(STAGES, key=lambda st: statistics.median(run[st][0] / run[STAGES[0]][1] for run in results["new"]))
    print(f"slowest stage now (CPU seconds per input MB): {slowest}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="JSONL with a 'text' field")
    ap.add_argument("--docs", type=int, default=300, help="documents per round (default 300, about 2.6 MB of prose)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", default="b371ce7", help="git revision to compare with (default b371ce7)")
    ap.add_argument("--warm", action="store_true", help="keep word memos between rounds")
    ap.add_argument("--datatrove", action="store_true", help="also time DataTrove's four filters")
    ap.add_argument("--words", choices=["spacy", "regex"], default="spacy",
                    help="today's heuristic stages with this word splitter (default spacy, DataTrove's)")
    args = ap.parse_args(argv)

    import random

    from curate.schema import documents_to_table
    from curate.stages import normalize, stage_class

    with open(args.corpus, encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    random.Random(0).shuffle(docs)
    need = args.docs * args.rounds
    if len(docs) < need:
        docs = (docs * (need // len(docs) + 1))[:need]

    with tempfile.TemporaryDirectory(prefix="map-chain-") as tmp:
        mods = load_old_modules(args.baseline, Path(tmp))
        old = build_chain({st: getattr(mods[m], cls) for st, (m, cls) in OLD_CLASSES.items()})
    new = build_chain({st: stage_class(st) for st in STAGES}, args.words)
    warm_table = documents_to_table([{"id": "w", "text": docs[0]["text"], "source": "", "url": "", "content_type": "text/plain"}])
    run_chain(old, warm_table, with_context=False)  # load models outside the timing
    run_chain(new, warm_table)

    results = {"old": [], "new": [], "datatrove": [], "noskip": []}
    noskip = normalize.Normalize("normalize", normalize.Params(skip_clean=False))
    for r in range(args.rounds):
        part = docs[r * args.docs:(r + 1) * args.docs]
        table = documents_to_table([{"id": f"d{i}", "text": d["text"], "source": "", "url": "",
                                     "content_type": "text/plain"} for i, d in enumerate(part)])
        for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
            if not args.warm:
                clear_memos()
            results[side].append(run_chain(old if side == "old" else new, table, with_context=side == "new"))
        if args.datatrove:
            results["datatrove"].append(run_datatrove([d["text"] for d in part]))
        t0 = time.process_time()
        noskip.apply(table)
        results["noskip"].append((time.process_time() - t0, table_mb(table), table.num_rows))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)

    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

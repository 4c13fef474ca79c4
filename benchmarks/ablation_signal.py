"""How small can a proxy run be before `pretrain ablate`'s verdict is noise? Real prose against a degraded copy
of it (the same documents with web boilerplate lines inserted and some of their lines repeated: a clearly worse
training set with the same text in it), the tiny proxy model, several seeds; every run is evaluated along its
curve. For each metric, each evaluation point (tokens seen) and each number of seeds k it prints the
signal-to-noise ratio (spread of the variant means / RMS of the seed standard deviations, pretrain/ablate/stats.py)
and the verdict of prose against the degraded copy with the first k seeds.

    .venv/bin/python benchmarks/ablation_signal.py                     # ../shared/corpora/prose/, ~15 min on 2 cores
    .venv/bin/python benchmarks/ablation_signal.py --docs 300 --tokens 60000 --seeds 3 --points 4

Evaluation tasks are built from held-out documents of the same corpus (never trained on): ``bpb`` on passages,
a LAMBADA-style ``cloze`` (a passage ending in a word), and a 4-way ``choice`` (a sentence's true continuation
against continuations taken from other documents). Points before the last are intermediate evaluations of the
same runs (the learning-rate schedule not finished), as the curves of `pretrain ablate` show them.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED_PROSE = ROOT.parent / "shared" / "corpora" / "prose"
BOILERPLATE = ["Home | About us | Contact | Privacy policy | Terms of use", "Accept all cookies",
               "Share this: Facebook Twitter Email Print", "Subscribe to our newsletter for the latest updates!",
               "Copyright 2024 All rights reserved.", "Click here to read more", "Advertisement",
               "Related posts:", "Log in | Register | Forgot your password?", "Skip to main content"]


def read_corpus(path: Path) -> list[str]:
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise SystemExit(f"no .jsonl under {path}: give --corpus (the project's shared prose corpus)")
    return [json.loads(line)["text"] for f in files for line in open(f, encoding="utf-8") if line.strip()]


def degrade(text: str, rng: random.Random) -> str:
    """Boilerplate lines between paragraphs and about a third of the lines repeated."""
    out = []
    for line in text.split("\n"):
        out.append(line)
        if line.strip() and rng.random() < 0.33:
            out.append(line)
        if rng.random() < 0.25:
            out.append(rng.choice(BOILERPLATE))
    return "\n".join(out)


def curated_folder(out: Path, texts: list[str]) -> Path:
    """A curation output folder (one Arrow shard and its manifest), as `curate run` writes it."""
    from curate.schema import documents_to_table
    from curate.shards import write_json, write_shard_entry

    rows = [{"id": f"d{i}", "text": t, "source": "bench", "url": "", "content_type": "text/plain"}
            for i, t in enumerate(texts)]
    entry = write_shard_entry(documents_to_table(rows), out / "data" / "part-00000.arrow", out)
    write_json({"shards": [dataclasses.asdict(entry)], "dropped": []}, out / "manifest.json")
    return out


def eval_files(held_out: list[str], out: Path, n: int, rng: random.Random) -> list[dict]:
    """bpb, cloze and choice tasks from held-out documents."""
    sentences = [s.strip().replace("\n", " ") for t in held_out for s in re.split(r"(?<=[.!?])\s+", t)]
    sentences = [s for s in sentences if 12 <= len(s.split()) <= 60]
    rng.shuffle(sentences)
    bpb = [{"text": t[:1500]} for t in held_out[:n]]
    cloze = [{"text": " ".join(s.rstrip(".!?\"'").split())} for s in sentences[:n]]
    pool = sentences[n:]
    choice = []
    for i, s in enumerate(sentences[:n]):
        words = s.split()
        cut = len(words) // 2
        others = [pool[(4 * i + j) % len(pool)].split() for j in range(3)]
        wrong = [" " + " ".join(o[len(o) // 2:]) for o in others]
        choices = [" " + " ".join(words[cut:])] + wrong
        order = list(range(4))
        rng.shuffle(order)
        choice.append({"context": " ".join(words[:cut]), "choices": [choices[k] for k in order],
                       "label": order.index(0)})
    tasks = []
    out.mkdir(parents=True, exist_ok=True)
    for kind, items in (("bpb", bpb), ("cloze", cloze), ("choice", choice)):
        path = out / f"{kind}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in items))
        tasks.append({"name": kind, "kind": kind, "path": str(path)})
    return tasks


def point_table(runs, spec, metrics: list[str]) -> list[str]:
    from pretrain.ablate import stats
    from pretrain.ablate.runs import eval_rows, metrics_of

    curves = {(r.variant, r.seed): {row["step"]: (row.get("tokens"), metrics_of(row))
                                    for row in eval_rows(Path(r.dir) / "logs")} for r in runs}
    steps = sorted(set.intersection(*(set(c) for c in curves.values())))
    lines = [f"{'tokens':>9} {'seeds':>5} " + " ".join(f"{m:>28}" for m in metrics)]
    for step in steps:
        for k in range(2, len(spec.seeds) + 1):
            records = {v.name: [{"seed": s, "tokens": 0, "metrics": curves[(v.name, s)][step][1]}
                                for s in spec.seeds[:k]] for v in spec.variants}
            res = stats.results(spec.tokens, spec.seeds[:k], spec.baseline, records)
            verdicts = {c["metric"]: c["verdict"] for c in res["comparisons"]}
            cells = []
            for m in metrics:
                snr = res["snr"].get(m)
                snr_text = "-" if snr is None else (snr if isinstance(snr, str) else f"{snr:.1f}")
                cells.append(f"{snr_text:>8} {verdicts.get(m, '-'):>19}")
            tokens = curves[(spec.variants[0].name, spec.seeds[0])][step][0]
            lines.append(f"{tokens:>9,} {k:>5} " + " ".join(f"{c:>28}" for c in cells))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=str(SHARED_PROSE), help="prose JSONL file or folder (default ../shared/corpora/prose)")
    ap.add_argument("--docs", type=int, default=300, help="training documents per variant (default 300)")
    ap.add_argument("--tokens", type=int, default=64 * 1024, help="training tokens per run (default 65,536)")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per variant (default 3)")
    ap.add_argument("--points", type=int, default=4, help="evaluations per run (default 4)")
    ap.add_argument("--items", type=int, default=60, help="items per evaluation task (default 60)")
    ap.add_argument("--out", default=None, help="keep the ablation here (default: a temporary folder)")
    args = ap.parse_args()

    from pretrain.ablate.ablation import run_ablation
    from pretrain.ablate.spec import spec_from_dict

    rng = random.Random(0)
    docs = sorted(set(read_corpus(Path(args.corpus))))  # exact copies would put held-out text in training
    rng.shuffle(docs)
    held_out, train = docs[:max(40, args.items)], docs[max(40, args.items):][:args.docs]
    work = Path(args.out or tempfile.mkdtemp(prefix="ablation_signal_"))
    prose = curated_folder(work / "variants" / "prose", train)
    degraded = curated_folder(work / "variants" / "degraded", [degrade(t, rng) for t in train])
    tasks = eval_files(held_out, work / "evals", args.items, rng)
    spec = spec_from_dict({"config": str(ROOT / "pretrain" / "configs" / "proxy-tiny.toml"), "tokens": args.tokens,
                           "seeds": list(range(1, args.seeds + 1)), "baseline": "degraded", "vocab_size": 2048,
                           "eval_points": args.points, "tasks": tasks,
                           "variants": [{"name": "prose", "curated": [str(prose)]},
                                        {"name": "degraded", "curated": [str(degraded)]}]}, "ablation_signal")
    t0 = time.monotonic()
    result = run_ablation(spec, work / "ablation", log=lambda line: print(line, flush=True))
    from pretrain.ablate.runs import Run

    runs = [Run(v.name, s, str(work / "ablation" / "runs" / v.name / f"seed-{s}"), 0, 0, 1, False)
            for v in spec.variants for s in spec.seeds]
    metrics = [m for m in result["snr"] if m.split("/")[1] in ("bits_per_byte", "acc", "acc_norm")]
    print(f"\nprose ({len(train)} documents) against the same documents degraded (boilerplate lines, repeated "
          f"lines); proxy-tiny, {args.tokens:,} tokens per run, {args.seeds} seeds, {args.items} items per task; "
          f"{time.monotonic() - t0:.0f} s")
    print("per metric: signal-to-noise ratio and the verdict of prose against degraded with the first k seeds\n")
    print("\n".join(point_table(runs, spec, metrics)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Agreement of Quarry's heuristic stages with DataTrove 0.10.1's filters on the shared corpora.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/datatrove_parity.py                 # 500 prose + 100/language
    PYTHONPATH=$PWD .venv/bin/python benchmarks/datatrove_parity.py --prose 4022 --per-lang 1000

The same check as ``tests/test_datatrove_parity.py``, at a larger size: English prose documents
(``../shared/corpora/prose/``, whole) and, per language of ``lang/fortunes.jsonl``, documents of 1 to
12 consecutive fortunes joined with blank lines, each filter built with that language. A document
agrees when both keep it (for C4 with the same text after line removal) or both drop it with the
same reason. Printed per language and stage: documents, agreement, drops, and the disagreements
by (DataTrove's reason, Quarry's reason).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT.parent / "shared" / "corpora"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", type=Path, default=CORPORA)
    ap.add_argument("--prose", type=int, default=500, help="English prose documents (default 500)")
    ap.add_argument("--per-lang", type=int, default=100, help="joined-fortune documents per language (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(ROOT / "tests"))
    from test_datatrove_parity import PAIRS, datatrove_decision, quarry_reason

    rng = random.Random(args.seed)
    with open(args.corpora / "prose" / "english_prose.jsonl", encoding="utf-8") as f:
        prose = [json.loads(line)["text"] for line in f]
    sets = [("en (prose)", "en", rng.sample(prose, min(args.prose, len(prose))))]
    fortunes: dict[str, list[str]] = {}
    with open(args.corpora / "lang" / "fortunes.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            fortunes.setdefault(d["lang"], []).append(d["text"])
    for lang in sorted(fortunes):
        pool, docs = fortunes[lang], []
        for _ in range(args.per_lang):
            k = rng.randint(1, 12)
            j = rng.randrange(len(pool) - k)
            docs.append("\n\n".join(pool[j:j + k]))
        sets.append((f"{lang} (fortunes)", lang, docs))

    print(f"{'documents':<16}{'stage':<20}{'docs':>6}{'agree':>9}{'dropped':>9}  disagreements")
    total = Counter()
    for label, lang, texts in sets:
        for stage_type, (dt_cls, ours_cls) in sorted(PAIRS.items()):
            dt, ours = dt_cls(language=lang), ours_cls(stage_type, ours_cls.Params(language=lang))
            agree, dropped, bad = 0, 0, Counter()
            for text in texts:
                reason, dt_text = datatrove_decision(dt, text)
                want = None if reason is None else quarry_reason(stage_type, reason)
                if stage_type == "c4_quality":
                    got, got_text = ours.clean(text)
                    same = got == want and (want is not None or got_text == dt_text)
                else:
                    got = ours.check(text)
                    same = got == want
                agree += same
                dropped += want is not None
                if not same:
                    bad[(want, got)] += 1
            total[stage_type, "docs"] += len(texts)
            total[stage_type, "agree"] += agree
            print(f"{label:<16}{stage_type:<20}{len(texts):>6}{100 * agree / len(texts):>8.2f}%{dropped:>9}  "
                  f"{dict(bad.most_common(3)) or ''}", flush=True)
    for stage_type in sorted(PAIRS):
        n, a = total[stage_type, "docs"], total[stage_type, "agree"]
        print(f"{'all':<16}{stage_type:<20}{n:>6}{100 * a / n:>8.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())

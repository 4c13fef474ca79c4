"""Rebuild the files in this folder from /work/shared/corpora (see SOURCES.md here).

    .venv/bin/python tests/data/filters/make_data.py /work/shared/corpora

Tests only read the files written here, never the corpora themselves.
"""
from __future__ import annotations

import json
import random
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).parent
FORTUNES_PER_LANG = 150
PROSE_PER_SOURCE = {"austen": 30, "sword-web": 20, "sword-kjv": 10, "sword-mhcc": 20, "sword-tdavid": 30, "shakespeare": 10}
MAX_CHARS = 2000
# parity.jsonl (DataTrove side-by-side tests): whole prose documents, and fortunes of one language
# joined with blank lines into documents of 1 to 12 fortunes (short and long, prose and lists)
PARITY_PROSE_PER_SOURCE = {"austen": 12, "shakespeare": 12, "sword-web": 8, "sword-kjv": 8, "sword-mhcc": 8,
                           "sword-tdavid": 8, "sword-scofield": 8, "botchan": 4}
PARITY_FORTUNE_DOCS_PER_LANG = 40


def head(text: str, limit: int = MAX_CHARS) -> str:
    """The first paragraphs of ``text`` that fit in ``limit`` characters; the paragraph that does
    not fit is cut at its last line end or sentence end inside the limit."""
    out = ""
    for para in text.strip().split("\n\n"):
        nxt = f"{out}\n\n{para}" if out else para
        if len(nxt) <= limit:
            out = nxt
            continue
        room = nxt[:limit]
        cut = max(room.rfind("\n", len(out) + 1), room.rfind(". ", len(out) + 1) + 1)
        if cut > len(out) + 2:
            out = room[:cut].rstrip()
        break
    return out


def write_jsonl(rows: list[dict], name: str) -> None:
    with open(HERE / name, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{name}: {len(rows)} rows")


def main(corpora: Path) -> None:
    rng = random.Random(0)
    by_lang = defaultdict(list)
    with open(corpora / "lang" / "fortunes.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            by_lang[d["lang"]].append(d)
    fortunes = []
    for lang in sorted(by_lang):
        fortunes += rng.sample(by_lang[lang], FORTUNES_PER_LANG)
    write_jsonl([{"id": d["id"], "lang": d["lang"], "text": d["text"]} for d in fortunes], "fortunes.jsonl")

    by_source = defaultdict(list)
    with open(corpora / "prose" / "english_prose.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["source"] in PROSE_PER_SOURCE:
                by_source[d["source"]].append(d)
    prose = []
    for source, n in PROSE_PER_SOURCE.items():
        for d in rng.sample(by_source[source], n):
            prose.append({"id": d["id"], "source": source, "text": head(d["text"])})
    write_jsonl(prose, "prose.jsonl")

    boiler = []
    for path in sorted((corpora / "neardup" / "licenses").glob("*.txt")):
        text = head(path.read_text(encoding="utf-8", errors="replace"))
        if len(text) >= 400:
            boiler.append({"id": f"licenses/{path.name}", "source": path.name.split("__")[0], "text": text})
    write_jsonl(boiler, "boilerplate.jsonl")

    parity = []
    all_prose = defaultdict(list)
    with open(corpora / "prose" / "english_prose.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            all_prose[d["source"]].append(d)
    for source, n in PARITY_PROSE_PER_SOURCE.items():
        pool = sorted(all_prose[source], key=lambda d: len(d["text"]))[: max(n, len(all_prose[source]) * 3 // 4)]
        for d in rng.sample(pool, min(n, len(pool))):  # whole documents, the longest quarter left out
            parity.append({"id": d["id"], "lang": "en", "source": source, "text": d["text"]})
    for lang in sorted(by_lang):
        pool = by_lang[lang]
        for i in range(PARITY_FORTUNE_DOCS_PER_LANG):
            k = rng.randint(1, 12)
            j = rng.randrange(len(pool) - k)
            parity.append({"id": f"fortunes-{lang}/joined/{i}", "lang": lang, "source": f"fortunes-{lang}",
                           "text": "\n\n".join(d["text"] for d in pool[j:j + k])})
    write_jsonl(parity, "parity.jsonl")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/corpora"))

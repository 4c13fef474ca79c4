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


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/corpora"))

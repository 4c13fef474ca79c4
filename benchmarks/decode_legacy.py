"""Undeclared legacy encodings: real texts of the corpora (Russian, Czech and Polish fortunes; Japanese,
Korean and Chinese paragraphs of Readability's gold text and of WCXB pages), each encoded in a legacy codec it
fits, put in an HTML page without a charset declaration (or under a stale ``<meta charset="utf-8">`` with
``--stale``) and read by ``curate.readers.text.decode``: per codec, how many come out right, as mojibake (read, but
another text), or set aside (``invalid_utf8``). Short: one paragraph or fortune; long: 8-10 of them.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/decode_legacy.py [--stale] [--corpora ../shared/corpora]

``--spacy-examples``: instead, the example sentences spaCy ships for each of its languages (texts neither the
corpora nor the rules were taken from), one at a time and all of a language's together, in every legacy
encoding of ``SPACY_CODECS`` that can hold them.
"""
from __future__ import annotations

import argparse
import collections
import html
import json
import re
from pathlib import Path

from curate.readers import read_file
from curate.readers.text import decode

ROOT = Path(__file__).resolve().parents[1]
KANA, HAN, HANGUL = re.compile("[\u3040-\u30ff]"), re.compile("[\u4e00-\u9fff]"), re.compile("[\uac00-\ud7af]")
WCXB_PAGES = {"0388", "3060", "0508", "0509", "1976"}  # WCXB dev pages in Japanese and Korean


def _page_text(body: str) -> str:
    body = re.sub(r"(?is)<(script|style)\b.*?</\1>", " ", body)
    text = html.unescape(re.sub(r"<[^>]+>", "\n", body))
    return "\n".join(x.strip() for x in text.splitlines() if x.strip())


def samples(corpora: Path) -> list[dict]:
    fortunes = {"ru": [], "cs": [], "pl": []}
    for line in open(corpora / "lang" / "fortunes.jsonl", encoding="utf-8"):
        d = json.loads(line)
        if d["lang"] in fortunes and len(fortunes[d["lang"]]) < 150:
            fortunes[d["lang"]].append(d["text"])
    gold = {d["id"]: d["main_content"] for d in map(json.loads, open(corpora / "extraction" / "readability_gold.jsonl",
                                                                        encoding="utf-8"))}
    pages = {}
    for item in read_file(str(corpora / "extraction" / "wcxb_dev.warc.gz"), "warc"):
        if item[0] == "doc" and item[1]["url"].rsplit("/", 1)[-1] in WCXB_PAGES:
            pages[item[1]["url"].rsplit("/", 1)[-1]] = _page_text(item[1]["text"])

    def lines(text, rx, least):
        return [x.strip() for x in text.splitlines() if len(rx.findall(x)) >= least]

    def longs(ls, k=8):
        return ["\n".join(ls[i:i + k]) for i in range(0, len(ls), k)]

    ja = lines("\n".join([gold["hukumusume"], gold["yahoo-4"], pages["0508"], pages["0509"], pages["1976"]]), KANA, 5)
    ko = lines("\n".join([pages["0388"], pages["3060"], pages["0508"]]), HANGUL, 10)
    zhs = lines("\n".join([gold["gmw"], gold["qq"], gold["youth"]]), HAN, 15)
    zht = lines(gold["pixnet"], HAN, 15)
    out = []

    def add(codec, kind, texts):
        for t in texts:
            try:
                t.encode(codec)
            except UnicodeEncodeError:
                continue
            out.append({"codec": codec, "kind": kind, "text": t})

    ru, cs, pl = fortunes["ru"], fortunes["cs"], fortunes["pl"]
    for codec in ("koi8_r", "cp1251"):
        add(codec, "short", ru[:100])
        add(codec, "long", ["\n".join(ru[i:i + 10]) for i in range(0, 150, 10)])
    for codec in ("iso8859_2", "cp1250"):
        add(codec, "short", cs[:50] + pl[:50])
        add(codec, "long", ["\n".join(cs[i:i + 10]) for i in range(0, 150, 10)]
            + ["\n".join(pl[i:i + 10]) for i in range(0, 150, 10)])
    for codec in ("euc_jp", "shift_jis"):
        add(codec, "short", ja)
        add(codec, "long", longs(ja))
    for codec, ls in (("gbk", zhs), ("big5", zht), ("euc_kr", ko)):
        add(codec, "short", ls)
        add(codec, "long", longs(ls))
    return out


SPACY_CODECS = ("cp1250", "cp1252", "cp1254", "cp1257", "iso8859_1", "iso8859_2", "iso8859_4", "iso8859_13",
                "iso8859_15", "iso8859_16", "mac_roman", "cp1251", "koi8_r", "cp1253", "iso8859_7", "cp1255", "cp1256",
                "cp874", "euc_jp", "shift_jis", "gbk", "big5", "euc_kr")


def spacy_samples() -> list[dict]:
    import importlib
    import pkgutil

    import spacy.lang

    out = []
    for mod in pkgutil.iter_modules(spacy.lang.__path__):
        try:
            sentences = importlib.import_module(f"spacy.lang.{mod.name}.examples").sentences
        except ImportError:
            continue
        for codec in SPACY_CODECS:
            for i, t in enumerate(sentences + ["\n".join(sentences)]):
                try:
                    if t.encode(codec).isascii():
                        continue
                except UnicodeEncodeError:
                    continue
                out.append({"codec": codec, "kind": "long" if i == len(sentences) else "short", "text": t})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stale", action="store_true", help='pages under a stale <meta charset="utf-8">')
    ap.add_argument("--corpora", default=str(ROOT.parent / "shared" / "corpora"), help="the corpora folder")
    ap.add_argument("--spacy-examples", action="store_true", help="spaCy's example sentences instead of the corpora")
    args = ap.parse_args(argv)
    counts = collections.defaultdict(collections.Counter)
    for s in spacy_samples() if args.spacy_examples else samples(Path(args.corpora)):
        meta = '<meta charset="utf-8">' if args.stale else ""
        page = f"<html><head>{meta}<title>t</title></head><body><p>{s['text']}</p></body></html>"
        text, ok = decode(page.encode(s["codec"]), b"", html=True)
        counts[s["codec"], s["kind"]]["right" if ok and text == page else "mojibake" if ok else "set aside"] += 1
    print(f"{'codec':10} {'texts':6} {'n':>4} {'right':>6} {'mojibake':>9} {'set aside':>10}")
    total = collections.Counter()
    for (codec, kind), c in sorted(counts.items()):
        print(f"{codec:10} {kind:6} {sum(c.values()):4d} {c['right']:6d} {c['mojibake']:9d} {c['set aside']:10d}")
        total += c
    print(f"{'all':10} {'':6} {sum(total.values()):4d} {total['right']:6d} {total['mojibake']:9d} {total['set aside']:10d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

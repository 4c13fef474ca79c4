"""Check that a change to ``curate/extract/`` leaves the block features and the extracted text unchanged.

    PYTHONPATH=$PWD python benchmarks/extract_features_check.py --dump /tmp/ref     # before the change
    PYTHONPATH=$PWD python benchmarks/extract_features_check.py --check /tmp/ref    # after it

``--dump`` writes, for every page of WCXB's development split (or ``--limit`` pages), the stripped HTML's
hash, the block texts, tags, container groups and feature matrix of ``curate.extract.features.features``
and the text the stage's path gives (``strip_utf8`` then ``extract_blocks_utf8``), into one compressed
``.npz`` per page plus ``texts.json``. ``--check`` recomputes them with the code as it is now and
compares: block texts, tags, groups and the integer / 0-1 feature columns exactly; the other (float)
columns with ``np.allclose(rtol=1e-6, atol=1e-6)``; extracted texts exactly; and that the byte-level stripping gives the regular expression's bytes. It prints the pages
that differ (first few) and exits 1 when any does.

The feature matrix is what the shipped model (and any model trained on it) reads: a speed-up of the
feature code must not change it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

DATA = "/work/shared/corpora/extraction"


def compute(html: str):
    """(hash of the stripped page, blocks of the ``str`` path, the text the stage's path gives, whether the
    stage's byte-level stripping gave the same bytes as the regular expression or left the page to it)."""
    from curate.extract.blocks import extract_blocks, extract_blocks_utf8
    from curate.extract.features import features
    from curate.extract.strip import strip_html, strip_utf8, utf8

    stripped = strip_html(html)
    b = features(stripped, stripped=True)
    data = utf8(html)
    if data is None:  # lone surrogates: the str path
        text, same_strip = extract_blocks(html), True
    else:  # the stage's path: strip the UTF-8 bytes, extract from them
        s8 = strip_utf8(data, valid=True)
        same_strip = s8 is None or s8 == stripped.encode("utf-8")
        text = extract_blocks_utf8(stripped.encode("utf-8") if s8 is None else s8)
    digest = hashlib.sha256(stripped.encode("utf-8", "surrogatepass")).hexdigest()
    return digest, b, text, same_strip


def _pack(b) -> dict:
    if b is None:
        return {"none": np.array(1)}
    return {"features": b.features, "groups": b.groups,
            "texts": np.array(json.dumps(b.texts, ensure_ascii=False)),
            "tags": np.array(json.dumps(b.tags))}


def _compare(ref: dict, b) -> list[str]:
    if "none" in ref or b is None:
        return [] if ("none" in ref) == (b is None) else ["features: None on one side only"]
    out = []
    if json.loads(str(ref["texts"])) != b.texts:
        out.append("block texts")
    if json.loads(str(ref["tags"])) != b.tags:
        out.append("tags")
    if ref["groups"].shape != b.groups.shape or not np.array_equal(ref["groups"], b.groups):
        out.append("groups")
    x0, x1 = ref["features"], b.features
    if x0.shape != x1.shape:
        return out + [f"feature shape {x0.shape} vs {x1.shape}"]
    if x0.dtype != x1.dtype:
        out.append(f"dtype {x0.dtype} vs {x1.dtype}")
    integral = np.all(x0 == np.round(x0), axis=0)
    exact = np.flatnonzero(integral & np.any(x0[:, :] != x1[:, :], axis=0))
    close = ~np.isclose(x0, x1, rtol=1e-6, atol=1e-6).all(axis=0) & ~integral
    if exact.size:
        out.append(f"integer columns {exact[:5].tolist()} differ")
    if close.any():
        out.append(f"float columns {np.flatnonzero(close)[:5].tolist()} differ")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--dump", metavar="DIR", help="write the reference of the code as it is now")
    g.add_argument("--check", metavar="DIR", help="compare the code as it is now against DIR")
    ap.add_argument("--warc", default=f"{DATA}/wcxb_dev.warc.gz")
    ap.add_argument("--gold", default=f"{DATA}/wcxb_dev_gold.jsonl")
    ap.add_argument("--limit", type=int, default=0, help="only the first N pages")
    a = ap.parse_args(argv)

    from curate.extract.training.train import load_pages

    pages = load_pages(a.warc, a.gold, a.limit)
    d = Path(a.dump or a.check)
    t0 = time.perf_counter()
    if a.dump:
        d.mkdir(parents=True, exist_ok=True)
        texts = {}
        for i, p in enumerate(pages):
            digest, b, text, _ = compute(p.html)
            np.savez_compressed(d / f"{i:05d}.npz", **_pack(b))
            texts[p.id] = {"text": text, "stripped_sha256": digest, "index": i}
        (d / "texts.json").write_text(json.dumps(texts, ensure_ascii=False))
        print(f"reference of {len(pages)} pages written to {d} ({time.perf_counter() - t0:.0f} s)")
        return 0
    ref_texts = json.loads((d / "texts.json").read_text())
    bad = {}
    stats = {"features": 0, "text": 0, "stripped": 0, "byte strip": 0}
    for i, p in enumerate(pages):
        r = ref_texts[p.id]
        digest, b, text, same_strip = compute(p.html)
        with np.load(d / f"{r['index']:05d}.npz") as z:
            diffs = _compare(dict(z), b)
        if diffs:
            stats["features"] += 1
        if digest != r["stripped_sha256"]:
            stats["stripped"] += 1
            diffs.append("stripped HTML")
        if text != r["text"]:
            stats["text"] += 1
            diffs.append("extracted text")
        if not same_strip:
            stats["byte strip"] += 1
            diffs.append("byte-level stripping")
        if diffs:
            bad[p.id] = diffs
    print(f"{len(pages)} pages checked against {d} ({time.perf_counter() - t0:.0f} s): "
          f"features differ on {stats['features']}, stripped HTML on {stats['stripped']}, "
          f"extracted text on {stats['text']}, byte-level stripping on {stats['byte strip']}")
    for pid, diffs in list(bad.items())[:10]:
        print(f"  {pid}: {'; '.join(diffs)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Writes ``feature_pins.json``: a digest of the block features ``curate.extract.features`` gives for
the 21 pages of ``wcxb_pages.jsonl.gz`` (run from the repository root, with the code whose features the
shipped model was trained on):

    PYTHONPATH=$PWD python tests/data/extract/make_feature_pins.py

Per page: block count, a hash of the block texts and tags, of the container groups and of every column
whose values are whole numbers on that page (0/1 flags, counts) and, for the other columns, their sums
over the page's blocks (compared with a relative tolerance, since ``log1p`` and friends may differ in the
last bit between numpy builds). ``tests/test_extract.py`` recomputes these and compares.
"""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def digest(b) -> dict:
    if b is None:  # no text at all
        return {"blocks": 0}
    x = b.features.astype(np.float64)
    whole = np.all(x == np.round(x), axis=0)
    h = hashlib.sha256
    return {"blocks": int(x.shape[0]), "features": int(x.shape[1]),
            "texts": h(json.dumps([b.texts, b.tags], ensure_ascii=False).encode()).hexdigest()[:16],
            "groups": h(np.ascontiguousarray(b.groups, dtype=np.int64).tobytes()).hexdigest()[:16],
            "whole_columns": h(np.flatnonzero(whole).tobytes() + x[:, whole].astype(np.int64).tobytes()).hexdigest()[:16],
            "float_sums": [round(float(v), 6) for v in x[:, ~whole].sum(axis=0)]}


def main() -> None:
    from curate.extract.features import features

    with gzip.open(HERE / "wcxb_pages.jsonl.gz", "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f if line.strip()]
    pins = {p["id"]: digest(features(p["html"])) for p in pages}
    (HERE / "feature_pins.json").write_text(json.dumps(pins, indent=1) + "\n", encoding="utf-8")
    print(f"{len(pins)} pages pinned")


if __name__ == "__main__":
    main()

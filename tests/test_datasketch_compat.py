"""datasketch interoperability: its band choice, and signatures equal to datasketch.MinHash bit for bit."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSH

from curate.stages.minhash.clusters import connected_components, flatten, union_edges
from curate.stages.minhash.shingles import normalize
from curate.stages.minhash.signatures import MinHasher, choose_bands, datasketch_bands
from tests.test_minhash import run_stage, write_docs

DATA = Path(__file__).resolve().parent / "data" / "dedup"
TEXTS = [(f.name, f.read_text(encoding="utf-8", errors="replace")) for f in sorted((DATA / "licenses").glob("*.txt"))]
MULTILINGUAL = [
    ("de", "Über den Wolken muss die Freiheit wohl grenzenlos sein, sagte Straße-Müller am 3. März 2024."),
    ("tr", "İstanbul'da IŞIK ve ılık rüzgârlar; Çok güzel bir gün, değil mi? 42 kişi geldi."),
    ("el", "Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο, ΟΔΥΣΣΕΑΣ."),
    ("ja", "吾輩は 猫 である。 名前は まだ 無い。 どこで 生れたか とんと 見当が つかぬ。"),
    ("short", "two words"),
]


def datasketch_minhash(text: str, num_perm: int, seed: int, ngram: int = 5) -> MinHash:
    """What a datasketch user writes: the documented normalization, word n-grams as UTF-8 bytes."""
    words = normalize(text).split()
    n = min(ngram, len(words))
    m = MinHash(num_perm=num_perm, seed=seed, scheme="legacy")
    m.update_batch([" ".join(words[i:i + n]).encode("utf-8") for i in range(len(words) - n + 1)] if words else [])
    return m


@pytest.mark.parametrize("num_perm,seed", [(128, 1), (260, 42)])
def test_signatures_equal_datasketch_minhash_bit_for_bit(num_perm, seed):
    docs = TEXTS + MULTILINGUAL
    sig, counts = MinHasher(num_perm, 1, seed=seed, family="datasketch").signatures([t for _, t in docs])
    assert (counts > 0).all()
    for (name, text), s in zip(docs, sig):
        assert np.array_equal(datasketch_minhash(text, num_perm, seed).hashvalues, s), name


def test_quarry_signatures_query_through_datasketch_lsh(tmp_path):
    """Quarry's signatures, wrapped as datasketch MinHash objects, go into a MinHashLSH; querying it with
    datasketch's own MinHash of each text finds exactly the documents the Quarry plan puts in one bucket."""
    bands, rows = 16, 8
    docs = TEXTS
    inputs = write_docs(tmp_path, docs, per_shard=6)
    stats, _, _ = run_stage(inputs, tmp_path / "plan", bands=bands, rows=rows, seed=1, permutation="datasketch")
    sig, _ = MinHasher(bands, rows, seed=1, family="datasketch").signatures([t for _, t in docs])
    lsh = MinHashLSH(num_perm=bands * rows, params=(bands, rows))
    for (name, _), s in zip(docs, sig):
        lsh.insert(name, MinHash(num_perm=bands * rows, seed=1, hashvalues=s, scheme="legacy"))
    index = {name: i for i, (name, _) in enumerate(docs)}
    edges = []
    for name, text in docs:
        found = lsh.query(datasketch_minhash(text, bands * rows, 1))
        assert name in found
        edges += [(index[name], index[f]) for f in found]
    parent = connected_components(len(docs), [])
    union_edges(parent, np.array(edges, np.int64))
    flatten(parent)
    size = np.bincount(parent, minlength=len(docs))
    expect = np.where(size[parent] >= 2, parent, -1)
    assert np.array_equal(np.load(tmp_path / "plan" / "components.npy"), expect)
    assert stats["documents_with_candidates"] == int((expect >= 0).sum()) > 5


@pytest.mark.parametrize("threshold,num_perm", [(0.5, 128), (0.8, 260), (0.9, 128), (0.7, 100)])
def test_band_choice_is_datasketch_minhashlsh(threshold, num_perm):
    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    assert datasketch_bands(threshold, num_perm) == (lsh.b, lsh.r)
    w = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=(0.2, 0.8))
    assert datasketch_bands(threshold, num_perm, (0.2, 0.8)) == (w.b, w.r)


def test_stage_threshold_uses_datasketch_unless_window_is_asked(tmp_path):
    inputs = write_docs(tmp_path, [("a", "some words here and there again"), ("b", "other words")], 5)
    stats, _, _ = run_stage(inputs, tmp_path / "p1", threshold=0.9, bands=16, rows=8)
    lsh = MinHashLSH(threshold=0.9, num_perm=128)
    assert (stats["bands"], stats["rows"]) == (lsh.b, lsh.r)
    stats, _, _ = run_stage(inputs, tmp_path / "p2", threshold=0.9, bands=16, rows=8, band_choice="window")
    assert (stats["bands"], stats["rows"]) == choose_bands(0.9, 128) != (lsh.b, lsh.r)

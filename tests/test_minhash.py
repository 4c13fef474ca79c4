"""minhash_dedup: normalization, exact permutations, the S-curve, buckets, clusters, determinism."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curate import shuffle
from curate.executors.local import LocalExecutor
from curate.schema import documents_to_table
from curate.shards import read_shard, write_shard
from curate.stages.minhash import clusters as clusters_module
from curate.stages.minhash.clusters import connected_components
from curate.stages.minhash.shingles import jaccard, normalize, shingle_sets
from curate.stages.minhash.signatures import (
    MERSENNE61, MinHasher, candidate_probability, choose_bands, permutations, s50,
)
from curate.stages.minhash.stage import MinHashDedup, Params

DATA = Path(__file__).resolve().parent / "data" / "dedup"


# --- helpers ----------------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def small_parts(monkeypatch):
    """Several shard groups, hash ranges and cluster groups even on these small corpora (the sizes are
    decided in the planning process and recorded in the plan, so they hold in worker processes too)."""
    monkeypatch.setattr(shuffle, "TASK_BYTES", 60_000)
    monkeypatch.setattr(shuffle, "RANGE_BYTES", 100_000)
    monkeypatch.setattr(clusters_module, "CLUSTER_ROWS", 40)
    import curate.stages.minhash.stage as stage_module
    monkeypatch.setattr(stage_module, "CLUSTER_ROWS", 40)


def vocabulary(rng, size=200_000, length=8) -> list[str]:
    letters = rng.integers(97, 123, size=(size, length), dtype=np.uint8)
    return [bytes(r).decode() for r in letters]


def py_shingles(words: list[str], n: int = 5) -> set:
    """Ground truth, in plain Python: the set of word n-grams (one n-gram of all words if shorter)."""
    if len(words) < n:
        return {tuple(words)} if words else set()
    return set(zip(*(words[i:] for i in range(n))))


def py_jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def text_jaccard(a: str, b: str) -> float:
    return py_jaccard(py_shingles(normalize(a).split()), py_shingles(normalize(b).split()))


def write_docs(tmp: Path, docs: list[tuple[str, str]], per_shard: int, extra: dict | None = None) -> list[str]:
    paths = []
    for k, lo in enumerate(range(0, len(docs), per_shard)):
        rows = [{"id": i, "text": t, "source": "test", "url": "", "content_type": "text/plain"} for i, t in docs[lo:lo + per_shard]]
        table = documents_to_table(rows)
        if extra:
            for col, values in extra.items():
                table = table.append_column(col, pa.array(values[lo:lo + per_shard], pa.float64()))
        paths.append(str(write_shard(table, tmp / f"in-{k:05d}.arrow")))
    return paths


def run_stage(inputs, plan_dir, workers=1, **params):
    stage = MinHashDedup("minhash_dedup", Params(**params))
    stats = stage.plan(inputs, Path(plan_dir), LocalExecutor(workers))
    kept, dropped = [], []
    for i, p in enumerate(inputs):
        res = stage.apply_with_plan(read_shard(p), i, Path(plan_dir))
        kept.append(res.kept)
        dropped.append(res.dropped)
    return stats, pa.concat_tables(kept), pa.concat_tables(dropped)


def mutate(rng, words: list[str], vocab: list[str], k: int) -> list[str]:
    out = list(words)
    for pos in rng.choice(len(out), size=k, replace=False):
        out[pos] = vocab[rng.integers(len(vocab))]
    return out


def planted_corpus(seed: int = 7):
    """Unique documents, exact copies, near-duplicate pairs over Jaccard 0.5-1 and drifting chains."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(rng, 50_000)
    texts: list[list[str]] = []

    def new_doc():
        return [vocab[i] for i in rng.integers(len(vocab), size=int(rng.integers(80, 120)))]

    for _ in range(250):
        texts.append(new_doc())
    copies = []
    for _ in range(30):  # exact copies, some with other whitespace and case (same normalized text)
        base = new_doc()
        texts.append(base)
        for c in range(int(rng.integers(1, 4))):
            texts.append([w.upper() if c == 1 else w for w in base])
            copies.append(len(texts) - 1)
    for _ in range(100):  # pairs at controlled similarity
        base = new_doc()
        texts.append(base)
        texts.append(mutate(rng, base, vocab, int(rng.integers(1, 6))))
    for _ in range(12):  # chains: each step changes one or two words, the ends drift far apart
        cur = new_doc()
        texts.append(cur)
        for _ in range(12):
            cur = mutate(rng, cur, vocab, int(rng.integers(1, 3)))
            texts.append(cur)
    order = rng.permutation(len(texts))
    docs = []
    for new_pos, old in enumerate(order):
        sep = "  \n" if old % 3 == 0 else " "
        docs.append((f"doc-{new_pos:05d}", sep.join(texts[old])))
    return docs


# --- normalization and signatures -------------------------------------------------------------------

def test_normalization_is_the_documented_one():
    assert normalize("Hello, World!  It's 2024 -- the U.S.A.\t\nnaïve ΣΟΦΊΑ don't_stop") == \
        "hello world its 0000 the usa naïve σοφία dontstop"
    assert normalize("٣ apples\u00a0and\u2003pears… e-mail") == "0 apples and pears email"
    assert normalize("  ,;:!  ") == ""
    # the same words whatever the punctuation, case, digits and spacing around them
    assert jaccard("The cat sat on the mat in 1999.", "the CAT   sat, on the mat in 2001") == 1.0


def test_shingles_are_word_5grams_and_short_documents_have_one():
    flat, off = shingle_sets(["a b c d e f", "a b c", "", "a b c d e f a b c d e f"])
    assert list(np.diff(off)) == [2, 1, 0, 6]  # sets: the repeated 5-grams count once
    assert jaccard("a b c d e f", "a b c d e f a b c d e f") == pytest.approx(py_jaccard(
        py_shingles("a b c d e f".split()), py_shingles("a b c d e f a b c d e f".split())))


@pytest.mark.parametrize("family", ["multiply_shift", "mod_prime"])
def test_signature_is_the_exact_minimum_of_the_documented_permutations(family):
    texts = ["the quick brown fox jumps over the lazy dog and runs far away", "one two", ""]
    mh = MinHasher(bands=4, rows=5, seed=3, family=family)
    sig, counts = mh.signatures(texts)
    a, b = permutations(20, 3, family)
    flat, off = shingle_sets(texts)
    assert list(counts) == list(np.diff(off))
    for d in range(len(texts)):
        if family == "mod_prime":
            xs = [int(x) % MERSENNE61 for x in flat[off[d]:off[d + 1]]]
            h = lambda j, x: (int(a[j]) * x + int(b[j])) % MERSENNE61
        else:
            xs = [int(x) for x in flat[off[d]:off[d + 1]]]
            h = lambda j, x: ((int(a[j]) * x + int(b[j])) % 2**64) >> 32
        expect = [min((h(j, x) for x in xs), default=2**64 - 1) for j in range(20)]
        assert [int(v) for v in sig[d]] == expect


def test_threshold_chooses_bands_and_rows_and_prints_the_curve(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)  # (the tests' conftest sets it: `curate run --quiet`'s switch)
    b, r = choose_bands(0.8, 260)
    assert b * r <= 260
    assert abs(s50(b, r) - 0.8) < 0.03  # the curve's midpoint sits at the threshold
    assert candidate_probability(0.9, b, r) > 0.95 and candidate_probability(0.6, b, r) < 0.05
    b7, r7 = choose_bands(0.7, 260)
    assert s50(b7, r7) < s50(b, r)
    inputs = write_docs(tmp_path, [("a", "some words here and there again"), ("b", "other words")], 5)
    stats, _, _ = run_stage(inputs, tmp_path / "plan", threshold=0.8)
    assert (stats["bands"], stats["rows"]) == (b, r)
    err = capsys.readouterr().err
    assert f"{b} bands x {r} rows" in err and "P(s)" in err


@pytest.fixture(scope="module")
def planted_pairs():
    """Pairs of documents at controlled shingle Jaccard, 2,500 per 0.05 bin from 0.5 to 1.0."""
    rng = np.random.default_rng(2024)
    vocab = vocabulary(rng)
    edges = np.linspace(0.5, 1.0, 11)
    per_bin = 2500
    a_texts, b_texts, truth = [], [], []
    counts = np.zeros(10, int)
    while counts.min() < per_bin:
        want = int(np.argmin(counts))  # fill the emptiest bin next
        target = rng.uniform(edges[want], edges[want + 1])
        n = int(rng.integers(90, 140))
        base = [vocab[i] for i in rng.integers(len(vocab), size=n)]
        s = n - 4
        if rng.random() < 0.5:  # replace the tail: exactly m shingles change
            m = int(round(s * (1 - target) / (1 + target)))
            other = base[: n - m] + [vocab[i] for i in rng.integers(len(vocab), size=m)]
        else:  # replace scattered words: each changes up to 5 shingles
            other = mutate(rng, base, vocab, max(0, int(round(s * (1 - target) / (1 + target) / 4.2))))
        j = py_jaccard(py_shingles(base), py_shingles(other))
        k = min(int(np.searchsorted(edges, j, side="right")) - 1, 9)
        if k < 0 or counts[k] >= per_bin:
            continue
        counts[k] += 1
        a_texts.append(" ".join(base))
        b_texts.append(" ".join(other))
        truth.append(j)
    return edges, a_texts, b_texts, np.array(truth)


@pytest.mark.parametrize("family", ["multiply_shift", "mod_prime"])
def test_candidate_rate_follows_the_s_curve_in_every_jaccard_bin(planted_pairs, family):
    """Planted pairs, exact shingle Jaccard as ground truth: per 0.05 bin from 0.5 to 1.0 the share of
    pairs that share a band is within 0.03 of the mean of 1 - (1 - s^13)^20 over the bin's pairs."""
    edges, a_texts, b_texts, truth = planted_pairs
    bands, rows = 20, 13
    mh = MinHasher(bands, rows, seed=42, family=family)
    ba, _ = mh.bands_of(a_texts)
    bb, _ = mh.bands_of(b_texts)
    candidate = (ba == bb).any(axis=1)
    bins = np.minimum(np.searchsorted(edges, truth, side="right") - 1, 9)
    report = []
    for k in range(10):
        sel = bins == k
        assert sel.sum() >= 500
        measured = candidate[sel].mean()
        expected = candidate_probability(truth[sel], bands, rows).mean()
        report.append((round(edges[k], 2), int(sel.sum()), round(float(measured), 4), round(float(expected), 4)))
    for lo, n, measured, expected in report:
        assert abs(measured - expected) <= 0.03, report


# --- the stage end to end ---------------------------------------------------------------------------

def _clusters_from_drops(kept: pa.Table, dropped: pa.Table) -> dict[str, list[str]]:
    by_rep: dict[str, list[str]] = {}
    for i, rep in zip(dropped.column("id").to_pylist(), dropped.column("duplicate_of").to_pylist()):
        by_rep.setdefault(rep, [rep]).append(i)
    kept_ids = set(kept.column("id").to_pylist())
    assert set(by_rep) <= kept_ids  # every representative is kept
    return by_rep


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corpus")
    docs = planted_corpus()
    inputs = write_docs(tmp, docs, per_shard=170)
    return tmp, docs, inputs


def test_same_plan_and_kept_set_with_1_or_2_workers_and_on_rerun(corpus, tmp_path):
    _, docs, inputs = corpus
    s1, k1, d1 = run_stage(inputs, tmp_path / "w1", workers=1, verify=True)
    s2, k2, d2 = run_stage(inputs, tmp_path / "w2", workers=2, verify=True)
    assert k1.column("id").to_pylist() == k2.column("id").to_pylist()
    assert d1.column("duplicate_of").to_pylist() == d2.column("duplicate_of").to_pylist()
    strip = lambda s: {k: v for k, v in s.items() if k != "phase_seconds"}
    assert strip(s1) == strip(s2)
    files1 = sorted(p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1").rglob("*") if p.is_file())
    files2 = sorted(p.relative_to(tmp_path / "w2") for p in (tmp_path / "w2").rglob("*") if p.is_file())
    assert files1 == files2
    for f in files1:
        if f.name != "minhash_stats.json":
            assert (tmp_path / "w1" / f).read_bytes() == (tmp_path / "w2" / f).read_bytes(), f
    assert d1.num_rows > 0 and set(d1.column("reason").to_pylist()) == {"near_duplicate"}
    assert s1["verify_rejected"] > 0
    assert k1.num_rows + d1.num_rows == len(docs)
    # resume: remove parts of every step (as a kill would leave them) and plan again
    plan = tmp_path / "w1"
    (plan / "minhash_stats.json").unlink()
    (plan / "components.npy").unlink()
    assert s1["shard_groups"] >= 3 and s1["bucket_ranges"] >= 3 and s1["cluster_groups"] >= 3
    for sub in ("sig", "edges", "members", "clusters", "drops", "assign"):
        victims = sorted((plan / sub).iterdir())
        victims[len(victims) // 2].unlink()  # a part, or the marker written after it
    (plan / "sig" / "00001.arrow").unlink()
    s3, k3, d3 = run_stage(inputs, plan, workers=2, verify=True)
    assert k3.column("id").to_pylist() == k1.column("id").to_pylist()
    assert strip(s3) == strip(s1)


def test_buckets_find_exactly_the_pairs_that_share_a_band(corpus, tmp_path):
    _, docs, inputs = corpus
    stats, _, _ = run_stage(inputs, tmp_path / "p")
    bands, _ = MinHasher(20, 13, seed=42).bands_of([t for _, t in docs])
    pairs = []
    for j in range(20):  # brute force: group equal band hashes
        groups: dict[int, list[int]] = {}
        for i, h in enumerate(bands[:, j].tolist()):
            groups.setdefault(h, []).append(i)
        pairs += [(g[0], x) for g in groups.values() for x in g[1:]]
    expect = connected_components(len(docs), [])
    from curate.stages.minhash.clusters import flatten, union_edges
    union_edges(expect, np.array(pairs, np.int64).reshape(-1, 2))
    flatten(expect)
    size = np.bincount(expect, minlength=len(docs))
    expect = np.where(size[expect] >= 2, expect, -1)
    got = np.load(tmp_path / "p" / "components.npy")
    assert np.array_equal(got, expect)
    assert stats["candidate_edges"] >= len(set(map(tuple, pairs))) / 20  # edges were emitted per bucket


def test_exact_copies_removed_and_clusters_only_chain_true_near_duplicates(corpus, tmp_path):
    _, docs, inputs = corpus
    stats, kept, dropped = run_stage(inputs, tmp_path / "p", verify=False)
    text_of = dict(docs)
    norm = {i: normalize(t) for i, t in docs}
    groups: dict[str, list[str]] = {}
    for i, t in norm.items():
        groups.setdefault(t, []).append(i)
    kept_ids = set(kept.column("id").to_pylist())
    copy_groups = [g for g in groups.values() if len(g) > 1]
    assert len(copy_groups) >= 30
    for g in copy_groups:  # every exact copy is removed: one of each group stays
        assert sum(i in kept_ids for i in g) == 1
    clusters = _clusters_from_drops(kept, dropped)
    chained = 0
    for members in clusters.values():
        sh = {i: py_shingles(norm[i].split()) for i in members}
        sim = {(a, b): py_jaccard(sh[a], sh[b]) for a, b in itertools.combinations(members, 2)}
        # the graph of true near-duplicates (J >= 0.5) inside the cluster must connect it
        parent = {i: i for i in members}

        def find(x):
            while parent[x] != x:
                x = parent[x]
            return x
        for (a, b), j in sim.items():
            if j >= 0.5:
                parent[find(a)] = find(b)
        assert len({find(i) for i in members}) == 1, members
        chained += sum(j < 0.5 for j in sim.values())
    assert chained > 0  # the chains did put far-apart documents in one cluster: the check above had work to do
    assert stats["duplicates"] == dropped.num_rows
    assert all(text_of[i] for i in kept_ids)


def test_verification_leaves_no_pair_below_half_in_any_cluster(corpus, tmp_path):
    _, docs, inputs = corpus
    stats, kept, dropped = run_stage(inputs, tmp_path / "p", verify=True)
    t = stats["verify_threshold"]
    assert t == pytest.approx(s50(20, 13), abs=1e-3) and 2 * t - 1 >= 0.5
    assert stats["verify_rejected"] > 0
    norm = {i: normalize(x) for i, x in docs}
    groups: dict[str, list[str]] = {}
    for i, x in norm.items():
        groups.setdefault(x, []).append(i)
    kept_ids = set(kept.column("id").to_pylist())
    for g in groups.values():
        if len(g) > 1:
            assert sum(i in kept_ids for i in g) == 1
    clusters = _clusters_from_drops(kept, dropped)
    assert clusters
    for rep, members in clusters.items():
        sh = {i: py_shingles(norm[i].split()) for i in members}
        for m in members[1:]:
            assert py_jaccard(sh[rep], sh[m]) >= t
        for a, b in itertools.combinations(members, 2):
            assert py_jaccard(sh[a], sh[b]) >= 0.5
    # the recorded Jaccard is the exact one
    ct = pa.concat_tables([read_shard(p) for p in sorted((tmp_path / "p" / "clusters").glob("*.arrow"))])
    for row in ct.to_pylist()[:50]:
        exact = py_jaccard(py_shingles(norm[row["id"]].split()), py_shingles(norm[row["representative"]].split()))
        assert row["jaccard"] == pytest.approx(exact, abs=1e-6)


def test_representative_is_highest_quality_then_smallest_id(tmp_path):
    rng = np.random.default_rng(1)
    vocab = vocabulary(rng, 5000)
    base = [vocab[i] for i in rng.integers(len(vocab), size=200)]
    near = list(base)
    near[100] = "changed"
    filler = [" ".join(vocab[i] for i in rng.integers(len(vocab), size=50)) for _ in range(4)]
    docs = [("e", " ".join(base)), ("c", " ".join(near)), ("x1", filler[0]), ("d", " ".join(base)),
            ("x2", filler[1]), ("b", " ".join(near))]
    quality = [0.2, 0.9, 0.5, 0.9, 0.1, 0.3]
    inputs = write_docs(tmp_path, docs, per_shard=2, extra={"quality_score": quality})
    _, kept, dropped = run_stage(inputs, tmp_path / "q")
    assert sorted(kept.column("id").to_pylist()) == ["c", "x1", "x2"]  # c and d tie at 0.9: "c" < "d"
    assert set(dropped.column("duplicate_of").to_pylist()) == {"c"}
    inputs = write_docs(tmp_path / "noq", docs, per_shard=4)
    _, kept, dropped = run_stage(inputs, tmp_path / "noq-plan")
    assert sorted(kept.column("id").to_pylist()) == ["b", "x1", "x2"]  # no scores: smallest id


def test_real_licence_texts(tmp_path):
    files = sorted((DATA / "licenses").glob("*.txt"))
    docs = [(f.name, f.read_text(encoding="utf-8", errors="replace")) for f in files]
    inputs = write_docs(tmp_path, docs, per_shard=9)
    norm = {i: normalize(t) for i, t in docs}
    sh = {i: py_shingles(n.split()) for i, n in norm.items()}
    for verify in (False, True):
        stats, kept, dropped = run_stage(inputs, tmp_path / f"plan-{verify}", verify=verify)
        rep_of = dict(zip(dropped.column("id").to_pylist(), dropped.column("duplicate_of").to_pylist()))
        cluster = {i: rep_of.get(i, i) for i, _ in docs}
        kept_ids = set(kept.column("id").to_pylist())
        for a, b in itertools.combinations(sh, 2):
            j = py_jaccard(sh[a], sh[b])
            if j >= 0.93:  # P(candidate) > 0.9997: never both kept ...
                assert not (a in kept_ids and b in kept_ids), (a, b, j)
                if not verify:  # ... and, without verification, in one cluster
                    assert cluster[a] == cluster[b], (a, b, j)
        if verify:
            for i, rep in rep_of.items():
                assert py_jaccard(sh[i], sh[rep]) >= stats["verify_threshold"]
        # the three debian-reference files and the two dateutil licences are the same text
        refs = [i for i in sh if "debian-reference" in i]
        assert len({cluster[i] for i in refs}) == 1 and sum(i in rep_of for i in refs) == 2
        dateutil = [i for i in sh if "DATEUTIL" in i or "python_dateutil" in i]
        assert cluster[dateutil[0]] == cluster[dateutil[1]]
        # unrelated copyright files are never touched
        for i in sh:
            if "fortunes" in i or "base-files" in i:
                assert i not in rep_of and cluster[i] == i
        mit = [i for i in sh if "tzlocal" in i or "setuptools" in i or "six-" in i]
        assert len({cluster[i] for i in mit}) == 1


def test_documents_without_words_are_never_duplicates(tmp_path):
    docs = [("a", "!!!"), ("b", "..."), ("c", ""), ("d", "one two three four five six"), ("e", "One two, three four five six!")]
    inputs = write_docs(tmp_path, docs, per_shard=3)
    stats, kept, dropped = run_stage(inputs, tmp_path / "p")
    assert stats["documents_without_shingles"] == 3
    assert dropped.column("id").to_pylist() == ["e"] and dropped.column("duplicate_of").to_pylist() == ["d"]


def test_plan_dir_with_other_parameters_is_rebuilt(corpus, tmp_path):
    _, _, inputs = corpus
    s1, k1, _ = run_stage(inputs[:3], tmp_path / "p", bands=10, rows=5)
    s2, k2, _ = run_stage(inputs[:3], tmp_path / "p", bands=20, rows=13)
    assert (s2["bands"], s2["rows"]) == (20, 13)
    s3, k3, _ = run_stage(inputs[:3], tmp_path / "fresh", bands=20, rows=13)
    assert k2.column("id").to_pylist() == k3.column("id").to_pylist()
    assert s1["candidate_edges"] > s2["candidate_edges"]  # 10 x 5 is far looser than 20 x 13


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="threshold"):
        Params(threshold=1.5)
    with pytest.raises(ValueError, match="bands"):
        Params(bands=0)
    with pytest.raises(RuntimeError, match="global stage"):
        MinHashDedup("m", Params()).apply(pa.table({"id": ["a"], "text": ["b"]}))


def test_empty_inputs_and_empty_shards(tmp_path):
    stats = MinHashDedup("minhash_dedup", Params()).plan([], tmp_path / "none", LocalExecutor(1))
    assert stats["documents"] == 0 and stats["duplicates"] == 0 and stats["clusters"] == 0
    empty = str(write_shard(documents_to_table([]), tmp_path / "empty.arrow"))
    full = write_docs(tmp_path, [("a", "one two three four five six"), ("b", "one two three four five six")], 5)
    stage = MinHashDedup("minhash_dedup", Params())
    stats = stage.plan([empty] + full, tmp_path / "plan", LocalExecutor(1))
    assert stats["documents"] == 2 and stats["duplicates"] == 1
    res = stage.apply_with_plan(read_shard(full[0]), 1, tmp_path / "plan")
    assert res.kept.column("id").to_pylist() == ["a"] and res.dropped.column("duplicate_of").to_pylist() == ["a"]
    with pytest.raises(RuntimeError, match="rows"):
        stage.apply_with_plan(read_shard(full[0]), 0, tmp_path / "plan")  # the plan saw 0 rows there

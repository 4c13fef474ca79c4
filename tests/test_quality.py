"""``curate train-quality`` and the ``quality_classifier`` stage: train on real English prose against
real boilerplate (licence and copyright files), then score documents the model has not seen."""
from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from curate.cli import main as curate_main
from curate.pipeline import ConfigError, parse_stage
from curate.schema import documents_to_table
from curate.shards import shard_entry, write_json, write_shard
from curate.stages.quality import QualityClassifier, pareto_draws, prepare_text
from curate.stages.quality_train import chunks

DATA = Path(__file__).parent / "data" / "filters"


def load(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def table(docs: list[dict]):
    return documents_to_table([
        {"id": d["id"], "text": d["text"], "source": "t", "url": "", "content_type": "text/plain"} for d in docs
    ])


PROSE, BOILER = load("prose.jsonl"), load("boilerplate.jsonl")
rng = random.Random(7)
rng.shuffle(PROSE)
rng.shuffle(BOILER)
# held out: documents the model never sees (boilerplate held out by whole file, so no file is on both sides)
HELD_PROSE, TRAIN_PROSE = PROSE[:25], PROSE[25:]
HELD_BOILER, TRAIN_BOILER = BOILER[:25], BOILER[25:]
SMALL = ["--dim", "32", "--bucket", "20000", "--seed", "3"]  # default training, a 2.5 MB model instead of 80 MB


def write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def curation_output(folder: Path, docs: list[dict]) -> Path:
    """A folder shaped like a curation run's output: two kept shards named by manifest.json."""
    shards = []
    for i, part in enumerate((docs[: len(docs) // 2], docs[len(docs) // 2:])):
        shards.append(write_shard(table(part), folder / "shards" / f"part-{i}.arrow"))
    write_shard(table(docs[:3]), folder / "dropped" / "part-0.arrow")  # must not be read
    write_json({"shards": [shard_entry(p, folder) for p in shards],
                "dropped": [shard_entry(folder / "dropped" / "part-0.arrow", folder)]}, folder / "manifest.json")
    return folder


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("quality")
    # positives from a curation output folder and a parquet shard; negatives from .jsonl
    pos_dir = curation_output(tmp / "prose_run", TRAIN_PROSE[:60])
    pos_shard = write_shard(table(TRAIN_PROSE[60:]), tmp / "more_prose.parquet", fmt="parquet")
    neg = write_jsonl(tmp / "boiler.jsonl", TRAIN_BOILER)
    out = tmp / "models" / "quality.bin"
    rc = curate_main(["train-quality", "--positive", str(pos_dir), str(pos_shard), "--negative", str(neg),
                      "--output", str(out), *SMALL])
    assert rc == 0 and out.is_file()
    assert [p.name for p in out.parent.iterdir()] == ["quality.bin"]  # no temporary left behind
    return out


def test_keeps_held_out_prose_and_drops_held_out_boilerplate(model):
    stage = QualityClassifier("quality", QualityClassifier.Params(model=str(model)))
    res = stage.apply(table(HELD_PROSE + HELD_BOILER))
    kept = set(res.kept.column("id").to_pylist())
    prose_kept = sum(d["id"] in kept for d in HELD_PROSE) / len(HELD_PROSE)
    boiler_dropped = sum(d["id"] not in kept for d in HELD_BOILER) / len(HELD_BOILER)
    assert prose_kept >= 0.9 and boiler_dropped >= 0.9, (prose_kept, boiler_dropped)
    assert set(res.dropped.column("reason").to_pylist()) == {"low_quality"}
    # scores: probabilities, higher for prose; threshold mode keeps exactly score >= 0.5
    for t, keep in ((res.kept, True), (res.dropped, False)):
        assert all((s >= 0.5) == keep and 0.0 <= s <= 1.0 for s in t.column("quality_score").to_pylist())
    scores = dict(zip(res.kept.column("id").to_pylist() + res.dropped.column("id").to_pylist(),
                      res.kept.column("quality_score").to_pylist() + res.dropped.column("quality_score").to_pylist()))
    assert np.median([scores[d["id"]] for d in HELD_PROSE]) > 0.9 > 0.1 > np.median([scores[d["id"]] for d in HELD_BOILER])


def test_threshold_and_tag_only(model):
    docs = HELD_PROSE + HELD_BOILER
    tagged = QualityClassifier("q", QualityClassifier.Params(model=str(model), tag_only=True)).apply(table(docs))
    assert tagged.dropped.num_rows == 0 and tagged.kept.column("id").to_pylist() == [d["id"] for d in docs]
    scores = tagged.kept.column("quality_score").to_pylist()
    for thr in (0.2, 0.8):
        res = QualityClassifier("q", QualityClassifier.Params(model=str(model), threshold=thr)).apply(table(docs))
        assert res.kept.column("id").to_pylist() == [d["id"] for d, s in zip(docs, scores) if s >= thr]


def test_held_out_precision_recall_printed(tmp_path, capsys):
    pos = write_jsonl(tmp_path / "p.jsonl", PROSE)
    neg = write_jsonl(tmp_path / "n.jsonl", BOILER)
    rc = curate_main(["train-quality", "--positive", str(pos), "--negative", str(neg), "--output",
                      str(tmp_path / "m.bin"), "--valid-fraction", "0.25", "--max-docs", "100", *SMALL])
    out = capsys.readouterr().out
    assert rc == 0
    assert "training on 75 positive and 75 negative documents; holding out 25 + 25" in out
    m = re.search(r"precision ([\d.]+)\s+recall ([\d.]+)\s+accuracy ([\d.]+)", out)
    assert m and min(map(float, m.groups())) >= 0.9, out


@pytest.mark.parametrize("flag, value, message", [
    ("--valid-fraction", "nan", "--valid-fraction"),  # was a traceback (nan to an integer count)
    ("--lr", "nan", "--lr a finite number"),  # was fastText's "Encountered NaN" after reading the shards
    ("--bucket", "10000000000000", "at most 2^31 - 1"),  # was a pybind11 argument error
    ("--dim", "100000000", "GiB matrix"),  # was std::bad_alloc
    ("--threads", "100000", "at most 1024"),  # was "terminate called without an active exception"
])
def test_flags_that_make_no_sense_stop_at_start(tmp_path, capsys, flag, value, message):
    pos = write_jsonl(tmp_path / "p.jsonl", PROSE)
    neg = write_jsonl(tmp_path / "n.jsonl", BOILER)
    assert curate_main(["train-quality", "--positive", str(pos), "--negative", str(neg), "--output",
                        str(tmp_path / "m.bin"), flag, value]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not (tmp_path / "m.bin").exists()


def test_same_inputs_same_model(tmp_path):
    pos = write_jsonl(tmp_path / "p.jsonl", TRAIN_PROSE)
    neg = write_jsonl(tmp_path / "n.jsonl", TRAIN_BOILER)
    for name in ("a.bin", "b.bin"):
        assert curate_main(["train-quality", "--positive", str(pos), "--negative", str(neg),
                            "--output", str(tmp_path / name), *SMALL]) == 0
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "b.bin").read_bytes()


def test_pareto_sampling_repeats_across_runs_and_batch_splits(model):
    docs = HELD_PROSE + HELD_BOILER + TRAIN_BOILER
    params = QualityClassifier.Params(model=str(model), pareto_alpha=3.0, seed=11)

    def kept_ids(parts):
        out = set()
        for part in parts:
            out |= set(QualityClassifier("q", params).apply(table(part)).kept.column("id").to_pylist())
        return out

    whole = kept_ids([docs])
    assert whole == kept_ids([docs])
    shuffled = docs[:]
    random.Random(1).shuffle(shuffled)
    assert whole == kept_ids([shuffled[i::3] for i in range(3)])  # other shards, other order
    small = QualityClassifier("q", QualityClassifier.Params(model=str(model), pareto_alpha=3.0, seed=11, batch_size=4))
    assert set(small.apply(table(docs)).kept.column("id").to_pylist()) == whole
    # it samples: all good prose kept, some boilerplate kept, and another seed keeps other boilerplate
    assert {d["id"] for d in HELD_PROSE} <= whole
    boiler = {d["id"] for d in HELD_BOILER + TRAIN_BOILER}
    assert 0 < len(whole & boiler) < 0.5 * len(boiler)
    other = QualityClassifier("q", QualityClassifier.Params(model=str(model), pareto_alpha=3.0, seed=12))
    assert set(other.apply(table(docs)).kept.column("id").to_pylist()) & boiler != whole & boiler


def test_pareto_draws_follow_numpy_pareto():
    ids = [f"doc-{i}" for i in range(20_000)]
    for alpha in (3.0, 9.0):
        ours = np.sort(pareto_draws(5, ids, alpha))
        ref = np.sort(np.random.default_rng(0).pareto(alpha, len(ids)))
        # two-sample Kolmogorov-Smirnov statistic; 0.02 is far above the 1% critical value (0.016)
        grid = np.concatenate([ours, ref])
        ks = np.max(np.abs(np.searchsorted(ours, grid, "right") - np.searchsorted(ref, grid, "right"))) / len(ids)
        assert ks < 0.02, (alpha, ks)
    assert np.array_equal(pareto_draws(5, ids[:10], 3.0), pareto_draws(5, ids[:10], 3.0))
    assert not np.array_equal(pareto_draws(5, ids[:10], 3.0), pareto_draws(6, ids[:10], 3.0))


def test_prepare_text_and_chunks():
    assert prepare_text("Hello,\n  World!  It's\tfine.") == "hello , world ! it ' s fine ."
    assert chunks("a b c d e", 2) == ["a b", "c d", "e"]
    assert chunks("a b c d e", 0) == ["a b c d e"]


def test_errors(model, tmp_path):
    with pytest.raises(ConfigError, match="model"):
        parse_stage({"type": "quality_classifier"}, "t")
    with pytest.raises(ConfigError, match="no such file"):
        parse_stage({"type": "quality_classifier", "model": str(tmp_path / "missing.bin")}, "t")
    with pytest.raises(ConfigError, match="pareto_alpha"):
        parse_stage({"type": "quality_classifier", "model": str(model), "pareto_alpha": "3"}, "t")
    spec = parse_stage({"type": "quality_classifier", "model": str(model), "pareto_alpha": 3, "seed": 1}, "t")
    assert spec.build().params.pareto_alpha == 3
    with pytest.raises(ValueError, match="label = 'cc'.*hq"):  # at config time, with the model's labels
        QualityClassifier.Params(model=str(model), label="cc")
    (tmp_path / "not_a_run").mkdir()
    neg = write_jsonl(tmp_path / "n.jsonl", BOILER[:5])
    assert curate_main(["train-quality", "--positive", str(tmp_path / "not_a_run"), "--negative", str(neg),
                        "--output", str(tmp_path / "m.bin")]) == 2
    (tmp_path / "bad.jsonl").write_text('{"body": "no text field"}\n')
    assert curate_main(["train-quality", "--positive", str(tmp_path / "bad.jsonl"), "--negative", str(neg),
                        "--output", str(tmp_path / "m.bin")]) == 2
    assert not (tmp_path / "m.bin").exists()


def test_lone_surrogate_escapes_in_jsonl_examples_are_replaced(tmp_path):
    """JSON's "\\ud800" in a training example stopped train-quality with a UnicodeEncodeError when the
    examples were written for fastText."""
    from curate.stages.quality_train import collect

    f = tmp_path / "pos.jsonl"
    f.write_text('{"text": "good text \\ud800 here"}\n{"text": "plain"}\n')
    texts = collect([str(f)], 0, random.Random(0))
    assert texts == [prepare_text("good text \ufffd here"), "plain"]
    for t in texts:
        t.encode("utf-8")

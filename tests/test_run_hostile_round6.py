"""Hostile pipelines, sixth round: stage names the output layout reserves or cannot hold, minhash_dedup's
quality_column on a column of text, decontaminate's split ids when a piece is split again, its digits, and the
funnel of a run that splits documents."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curate import tasks
from curate.cli import main as curate_main
from curate.commands.stats import format_funnel
from curate.config import ConfigError
from curate.executors.local import LocalExecutor
from curate.pipeline import MAX_STAGE_NAME, RESERVED_STAGE_NAMES, parse_pipeline
from curate.schema import documents_to_table
from curate.shards import manifest_shards, read_shard, write_shard
from curate.stages.decontaminate import NESTED, SPLIT_ID, _replace_texts
from curate.stages.minhash.clusters import quality_scores
from curate.stages.minhash.stage import MinHashDedup, Params as MinHashParams

SAMPLE = Path(__file__).resolve().parent.parent / "pipelines" / "sample"


def _pipeline(tmp: Path, stages: str, docs: list[dict], name: str = "p") -> Path:
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    p = tmp / f"{name}.toml"
    p.write_text(f'[pipeline]\nname = "r6"\noutput = "{tmp / ("out_" + name)}"\nworkers = 1\n'
                 f'[[sources]]\npath = "{src}"\n{stages}')
    return p


def _parse(stages: str) -> None:
    import tomllib

    raw = tomllib.loads(f'[pipeline]\noutput = "x"\n[[sources]]\npath = "x.jsonl"\n{stages}')
    parse_pipeline(raw, "p.toml")


DOCS = [{"id": f"d{i}", "text": f"Document number {i} has a few words in it."} for i in range(3)] + [{"id": "e", "text": ""}]


# ------------------------------------------------------------------------------------- stage names

def test_the_reserved_names_are_the_readers():
    assert tasks.READ_STAGE in RESERVED_STAGE_NAMES


@pytest.mark.parametrize("name", ["read", "Read", "READ"])
def test_a_stage_named_read_is_refused_at_start(tmp_path, capsys, name):
    """It was accepted, then the run ended with "stage read saw 7 documents but read kept 6", every rerun too."""
    p = _pipeline(tmp_path, f'[[stages]]\ntype = "normalize"\nname = "{name}"\n', DOCS)
    assert curate_main(["run", str(p), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"name = {name!r} is reserved" in err and "another `name`" in err
    assert not (tmp_path / "out_p").exists()  # refused before anything was written


def test_two_stage_names_that_differ_only_in_case_are_refused():
    with pytest.raises(ConfigError, match="differ only in case"):
        _parse('[[stages]]\ntype = "normalize"\nname = "clean"\n[[stages]]\ntype = "langid"\nname = "Clean"\n')
    with pytest.raises(ConfigError, match="two stages named 'clean'"):
        _parse('[[stages]]\ntype = "normalize"\nname = "clean"\n[[stages]]\ntype = "langid"\nname = "clean"\n')


def test_a_long_stage_name_is_refused_at_start(tmp_path, capsys):
    """250 letters passed, then the run failed with "File name too long" after the documents were processed."""
    p = _pipeline(tmp_path, f'[[stages]]\ntype = "langid"\nname = "{"a" * 250}"\n', DOCS)
    assert curate_main(["run", str(p), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "is 250 characters long; use at most 64" in err and "[[stages]] #1" in err
    assert not (tmp_path / "out_p").exists()
    with pytest.raises(ConfigError, match=f"is {MAX_STAGE_NAME + 1} characters long"):
        _parse(f'[[stages]]\ntype = "normalize"\nname = "{"b" * (MAX_STAGE_NAME + 1)}"\n')
    with pytest.raises(ConfigError, match="is 66 bytes as UTF-8 long"):  # 22 letters of 3 bytes each
        _parse(f'[[stages]]\ntype = "normalize"\nname = "{"語" * 22}"\n')


def test_a_stage_name_of_the_longest_length_runs_to_the_end(tmp_path):
    """64 bytes fit every file and folder name it becomes part of (a global stage: steps/ and plans/ too)."""
    n = MAX_STAGE_NAME
    stages = (f'[[stages]]\ntype = "normalize"\nname = "{"m" * n}"\n'
              f'[[stages]]\ntype = "exact_dedup"\nname = "{"g" * n}"\n')
    docs = DOCS + [dict(DOCS[0], id="dup")]
    p = _pipeline(tmp_path, stages, docs)
    p.write_text(p.read_text().replace("workers = 1\n", "workers = 1\nkeep_plans = true\nkeep_intermediate = true\n"))
    assert curate_main(["run", str(p), "--quiet"]) == 0
    out = tmp_path / "out_p"
    stats = json.loads((out / "stats.json").read_text())
    assert [s["name"] for s in stats["stages"]] == ["read", "m" * n, "g" * n]
    assert stats["stages"][-1]["dropped"] == {"exact_duplicate": 1}
    assert any(p.name.startswith("g" * n + "-") for p in manifest_shards(out, "dropped"))


# ------------------------------------------------------------------------------------- minhash_dedup

@pytest.mark.parametrize("column", ["text", "id", "source", "url", "content_type", "lang"])
def test_minhash_quality_column_naming_a_text_column_is_refused_at_start(column):
    """text/id/source crashed the plan after the read step (duplicate field; a path cast to double)."""
    with pytest.raises(ConfigError, match=f"quality_column = '{column}' is a text column.*name a numeric column"):
        _parse(f'[[stages]]\ntype = "minhash_dedup"\nquality_column = "{column}"\n')
    _parse('[[stages]]\ntype = "minhash_dedup"\nquality_column = ""\n')  # none: representatives by smallest id


def test_quality_scores_read_a_value_that_is_not_a_number_as_missing():
    from decimal import Decimal

    inf = -np.inf
    assert quality_scores(pa.array([0.5, None, float("nan")]), 3).tolist() == [0.5, inf, inf]
    assert quality_scores(pa.array([3, 1], pa.int8()), 2).tolist() == [3.0, 1.0]
    assert quality_scores(pa.array([Decimal("1.5")]), 1).tolist() == [1.5]
    assert quality_scores(pa.array([2 ** 63 + 1], pa.uint64()), 1)[0] > 9e18  # no "out of range" on a cast
    assert quality_scores(pa.array([0.25, 0.75]).dictionary_encode(), 2).tolist() == [0.25, 0.75]
    for column in (pa.array(["0.9", "x"]), pa.array([True, False]), pa.array([None, None]), pa.array([[1.0], [2.0]])):
        assert quality_scores(column, 2).tolist() == [inf, inf]
    assert quality_scores(None, 2).tolist() == [inf, inf]


def test_minhash_with_a_quality_column_of_strings_plans_and_keeps_the_smallest_id(tmp_path):
    """A column some stage wrote as text: every score missing (ties to the smallest id), where the cast crashed;
    a shard where the column holds numbers still ranks by them."""
    text = ("The river ran past the old stone mill where the miller and his daughter had lived for many years in "
            "quiet comfort, and every spring the water rose to the second step of the mill.")
    inputs = []
    for k, (ids, scores, typ) in enumerate([(["b", "a"], ["high", "0.9"], pa.string()),
                                           (["d", "c"], [0.1, 0.8], pa.float64())]):
        rows = [{"id": i, "text": text, "source": "s", "url": "", "content_type": "text/plain"} for i in ids]
        t = documents_to_table(rows).append_column("qs", pa.array(scores, typ))
        inputs.append(str(write_shard(t, tmp_path / f"in-{k}.arrow")))
    stage = MinHashDedup("minhash_dedup", MinHashParams(quality_column="qs"))
    stats = stage.plan(inputs, tmp_path / "plan", LocalExecutor(1))
    assert stats["duplicates"] == 3
    kept = [stage.apply_with_plan(read_shard(p), i, tmp_path / "plan").kept for i, p in enumerate(inputs)]
    assert [r["id"] for t in kept for r in t.to_pylist()] == ["c"]  # the one real score, 0.8, is the highest


def test_verify_threshold_without_verify_is_refused_at_start():
    with pytest.raises(ConfigError, match="verify_threshold = 0.9 is used only with verify = true"):
        _parse('[[stages]]\ntype = "minhash_dedup"\nverify_threshold = 0.9\n')
    _parse('[[stages]]\ntype = "minhash_dedup"\nverify = true\nverify_threshold = 0.9\n')


# ------------------------------------------------------------------------------------- decontaminate

def _prose(n: int) -> list[str]:
    with gzip.open(SAMPLE / "prose.jsonl.gz", "rt") as f:
        return [json.loads(line)["text"] for _, line in zip(range(n), f)]


def _evals() -> list[str]:
    return [json.loads(line)["text"] for line in (SAMPLE / "eval_passages.jsonl").read_text().splitlines()[:2]]


def _two_decontaminations(tmp: Path, name: str = "p") -> Path:
    ev = _evals()
    p = _prose(3)
    for k, t in enumerate(ev):
        (tmp / f"ev{k}.jsonl").write_text(json.dumps({"text": t}) + "\n")
    doc = {"id": "d", "text": f"{p[0][:1500]} {ev[0]} {p[1][:1500]} {ev[1]} {p[2][:1500]}"}
    stages = "".join(f'[[stages]]\ntype = "decontaminate"\nname = "decon_{k}"\neval_files = ["{tmp / f"ev{k}.jsonl"}"]\n'
                     for k in range(2))
    return _pipeline(tmp, stages, [doc], name)


def _kept(out: Path) -> list[dict]:
    return [r for p in manifest_shards(out) for r in read_shard(p).to_pylist()]


def test_a_piece_split_again_gets_split_ids_of_its_own(tmp_path, capsys):
    """Two decontaminate stages: the second split a piece of the first, and its pieces took split_id 0 and 1
    again: two rows (d, 0). The pieces of piece 1 take numbers made from 1 (``_nested_ids``)."""
    p = _two_decontaminations(tmp_path)
    assert curate_main(["run", str(p), "--quiet"]) == 0
    rows = _kept(tmp_path / "out_p")
    keys = [(r["id"], r[SPLIT_ID]) for r in rows]
    assert sorted(keys) == [("d", 0), ("d", 2 * NESTED), ("d", 2 * NESTED + 1)]
    stats = json.loads((tmp_path / "out_p" / "stats.json").read_text())
    assert [s.get("added", 0) for s in stats["stages"]] == [0, 1, 1]
    # rerun: resumed as finished, the same rows
    before = (tmp_path / "out_p" / "manifest.json").read_bytes()
    assert curate_main(["run", str(p), "--quiet"]) == 0
    assert (tmp_path / "out_p" / "manifest.json").read_bytes() == before and _kept(tmp_path / "out_p") == rows


def test_replace_texts_numbers_the_pieces_of_a_piece_from_its_own_split_id():
    base = {"source": "s", "url": "", "content_type": "text/plain"}
    rows = [{"id": "d", "text": t, **base} for t in ("A", "B", "C")] + [{"id": "x", "text": "X", **base}]
    table = documents_to_table(rows).append_column(SPLIT_ID, pa.array([0, 1, 2, None], pa.int32()))
    out = _replace_texts(table, {0: ["A1", "A2"], 2: ["C1", "C2", "C3"], 3: ["X1", "X2"]}, True)
    assert list(zip(out.column("text").to_pylist(), out.column(SPLIT_ID).to_pylist())) == [
        ("A1", NESTED), ("A2", NESTED + 1), ("B", 1), ("C1", 3 * NESTED), ("C2", 3 * NESTED + 1),
        ("C3", 3 * NESTED + 2), ("X1", 0), ("X2", 1)]
    first = _replace_texts(documents_to_table(rows[:1]), {0: ["P", "Q"]}, True)  # a first split: 0, 1 as before
    assert first.column(SPLIT_ID).to_pylist() == [0, 1]


def test_the_funnel_of_a_run_that_splits_shows_the_pieces_added(tmp_path):
    """It said "1 input documents -> 3 kept (300.0%)", stage rows at 200% and 150%."""
    p = _two_decontaminations(tmp_path)
    assert curate_main(["run", str(p), "--quiet"]) == 0
    text = format_funnel(json.loads((tmp_path / "out_p" / "stats.json").read_text()))
    lines = text.splitlines()
    assert lines[0].split() == ["stage", "in", "added", "kept", "dropped", "kept", "%", "reasons"]
    assert lines[3].split()[:6] == ["decon_0", "1", "1", "2", "0", "100.0"]
    assert lines[4].split()[:6] == ["decon_1", "2", "1", "3", "0", "100.0"]
    assert lines[-1] == "1 input documents + 2 pieces added by splits -> 3 kept (100.0%)"
    assert "300.0" not in text and "200.0" not in text


def test_the_funnel_without_splits_is_as_before():
    stats = {"stages": [{"name": "read", "in": 4, "kept": 3, "dropped": {"empty_document": 1}},
                        {"name": "normalize", "in": 3, "kept": 3, "dropped": {}}]}
    assert format_funnel(stats).splitlines() == [
        "stage      in  kept  dropped  kept %  reasons",
        "---------------------------------------------",
        "read        4     3        1    75.0  empty_document=1",
        "normalize   3     3        0   100.0",
        "4 input documents -> 3 kept (75.0%)"]


def _numbers_pipeline(tmp: Path, fold: str, training_numbers: str) -> Path:
    (tmp / "eval.jsonl").write_text(json.dumps(
        {"text": "Question: the values are 12 45 78 23 56 89 34 67 90 11 22 33 44 55 66 77 and the answer is 88"}) + "\n")
    p = _prose(2)
    doc = {"id": "table", "text": f"{p[0][:800]}\nreadings {training_numbers} end\n{p[1][:800]}"}
    return _pipeline(tmp, f'[[stages]]\ntype = "decontaminate"\neval_files = ["{tmp / "eval.jsonl"}"]\n{fold}', [doc],
                     name="fold" if fold else "plain")


@pytest.mark.parametrize("fold, numbers, cut", [
    ("", "98 76 54 32 10 98 76 54 32 10 98 76 54 32 10 99", False),  # other numbers: no match (it was cut)
    ("", "12 45 78 23 56 89 34 67 90 11 22 33 44 55 66 77", True),  # the eval item's own numbers still match
    ("fold_digits = true\n", "98 76 54 32 10 98 76 54 32 10 98 76 54 32 10 99", True),  # the old behaviour
])
def test_decontaminate_compares_digits_as_they_are(tmp_path, fold, numbers, cut):
    p = _numbers_pipeline(tmp_path, fold, numbers)
    assert curate_main(["run", str(p), "--quiet"]) == 0
    out = tmp_path / ("out_fold" if fold else "out_plain")
    plan = json.loads((out / "stats.json").read_text())["stages"][-1]["plan"]
    assert (plan["chars_removed"] > 0) is cut and (plan["documents_split"] == 1) is cut
    assert len(_kept(out)) == (2 if cut else 1)


def test_decontaminate_never_makes_an_empty_piece_even_with_min_fragment_0():
    """``min_fragment = 0`` kept the empty text on each side of a span cut out whole (two empty documents)."""
    from curate.stages.decontaminate import cut

    assert cut("abc def ghi", [(0, 11)], 0, 0) == ([], 11)
    assert cut("abc def ghi", [(4, 7)], 0, 0) == (["abc", "ghi"], 5)

"""``(id, split_id)`` names one document whatever runs between two ``decontaminate`` stages: a filter that sets
aside the largest-numbered piece of the first split does not make the second stage hand its number out again
(it counted from the largest ``split_id`` it saw)."""
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pytest

from curate.cli import main as curate_main
from curate.schema import documents_to_table
from curate.shards import manifest_shards, read_shard
from curate.stages.decontaminate import MAX_PIECES, NESTED, SPLIT_ID, _nested_ids, _replace_texts

SAMPLE = Path(__file__).resolve().parent.parent / "pipelines" / "sample"


def _prose(n: int) -> list[str]:
    with gzip.open(SAMPLE / "prose.jsonl.gz", "rt") as f:
        return [json.loads(line)["text"] for _, line in zip(range(n), f)]


def _evals() -> list[str]:
    return [json.loads(line)["text"] for line in (SAMPLE / "eval_passages.jsonl").read_text().splitlines()[:2]]


def _rows(out: Path, which: str) -> list[dict]:
    return [r for p in manifest_shards(out, which) for r in read_shard(p).to_pylist()]


def test_a_piece_set_aside_between_two_decontaminations_keeps_its_number_to_itself(tmp_path):
    ev0, ev1 = _evals()
    p = _prose(3)
    for k, t in enumerate((ev0, ev1)):
        (tmp_path / f"ev{k}.jsonl").write_text(json.dumps({"text": t}) + "\n")
    short = "a short closing line of some twenty words that the quality filter below sets aside as too short to keep"
    # decon_0 cuts ev0 twice: pieces 0 (holding ev1), 1, and 2 (short: gopher_quality sets it aside);
    # decon_1 then cuts ev1 out of piece 0
    text = f"{p[0][:1500]} {ev1} {p[1][:1500]} {ev0} {p[2][:1500]} {ev0} {short}"
    (tmp_path / "in.jsonl").write_text(json.dumps({"id": "d", "text": text}) + "\n")
    decon = '[[stages]]\ntype = "decontaminate"\nname = "{name}"\neval_files = ["{ev}"]\nwindow = 10\nmin_fragment = 50\n'
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "ids"\noutput = "{tmp_path / "out"}"\nworkers = 1\n'
                    f'[[sources]]\npath = "{tmp_path / "in.jsonl"}"\n'
                    + decon.format(name="decon_0", ev=tmp_path / "ev0.jsonl")
                    + '[[stages]]\ntype = "gopher_quality"\nwords = "regex"\nskip = ["gopher_stop_words"]\n'
                    + decon.format(name="decon_1", ev=tmp_path / "ev1.jsonl"))
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    kept, aside = _rows(tmp_path / "out", "shards"), _rows(tmp_path / "out", "dropped")
    assert [(r["stage"], r["reason"], short.endswith(r["text"])) for r in aside] == [
        ("gopher_quality", "gopher_short_doc", True)]  # (less the window cut before it)
    assert len(kept) == 3  # pieces 0 (split again in two) and 1
    keys = [(r["id"], r[SPLIT_ID]) for r in kept + aside]
    assert len(set(keys)) == len(keys), keys
    assert sorted(k[1] for k in keys) == [1, 2, NESTED, NESTED + 1]  # piece 0's pieces: numbers made from 0


def test_the_pieces_of_a_piece_take_numbers_made_from_its_own():
    """Piece s split again: its pieces are (s + 1) * NESTED + 0, 1, ...: never a number of the first split (all
    below NESTED), nor of another piece's pieces, whatever was set aside before."""
    base = {"source": "s", "url": "", "content_type": "text/plain"}
    rows = [{"id": "d", "text": t, **base} for t in ("A", "C")] + [{"id": "x", "text": "X", **base}]
    table = documents_to_table(rows).append_column(SPLIT_ID, pa.array([0, 2, None], pa.int32()))
    out = _replace_texts(table, {0: ["A1", "A2"], 1: ["C1"], 2: ["X1", "X2"]}, True)  # C trimmed: keeps 2
    assert list(zip(out.column("text").to_pylist(), out.column(SPLIT_ID).to_pylist())) == [
        ("A1", NESTED), ("A2", NESTED + 1), ("C1", 2), ("X1", 0), ("X2", 1)]
    again = _replace_texts(out, {1: ["B1", "B2", "B3"]}, True)  # a piece of a piece, split once more
    assert again.column(SPLIT_ID).to_pylist()[1:4] == [(NESTED + 2) * NESTED + j for j in range(3)]


def test_a_fourth_split_deep_stops_saying_what_to_do():
    deepest = _nested_ids(_nested_ids(MAX_PIECES - 1, 2)[1], 2)  # a first split and two more of its pieces: an int64
    assert deepest[-1] < 2 ** 63
    with pytest.raises(ValueError, match="give fewer decontaminate stages"):
        _nested_ids(deepest[-1], 2)

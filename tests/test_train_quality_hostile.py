"""``curate train-quality`` on hostile input: text that carries fastText label words, the same documents on both
sides, and input paths that are not files (a FIFO, a device, a broken link)."""
from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import pytest

from curate.cli import main as curate_main
from curate.stages.quality import neutralise_labels, prepare_text
from curate.stages.quality_train import train

DATA = Path(__file__).parent / "data" / "filters"
SMALL = ["--dim", "16", "--bucket", "5000", "--seed", "3"]


def load(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


PROSE, BOILER = load("prose.jsonl"), load("boilerplate.jsonl")


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    return path


def test_neutralise_labels_makes_label_words_ordinary_words():
    assert neutralise_labels("__label__hq a __label__lq\t__label__x\x00__label__") == \
        "_label__hq a _label__lq\t_label__x\x00_label__"
    # only words that begin with the prefix are labels to fastText: the rest is left alone
    assert neutralise_labels("x__label__hq ___label__hq label__hq") == "x__label__hq ___label__hq label__hq"
    once = neutralise_labels("__label____label__hq __label__")
    assert neutralise_labels(once) == once  # idempotent
    assert not any(w.startswith("__label__") for w in once.split())
    # upper case is lowered first, so it cannot slip through either
    assert prepare_text("Good text __LABEL__HQ here") == "good text _label__hq here"


def test_label_words_in_crawl_text_cannot_add_labels_or_flip_examples(tmp_path):
    """A page holding ``__label__hq`` / ``__label__evil`` words became a positive example (and a model with a
    third label): held-out accuracy fell from 0.9 to 0.5."""
    import fasttext

    def inject(text):
        return " ".join(f"__label__hq __label__evil {w}" for w in text.split()[:80])

    pos = [prepare_text(d["text"]) for d in PROSE[:60]]
    neg = [prepare_text(inject(d["text"])) for d in BOILER[:60]]
    assert all("__label__" not in t.split(" ")[0] for t in neg)  # neutralised already by prepare_text
    out = tmp_path / "m.bin"
    # train() neutralises again, for callers that pass prepare_text output
    raw_neg = [f"__label__hq __label__evil {t}" for t in neg]
    train(pos, raw_neg, out, epochs=10, dim=16, bucket=5000, seed=3)
    model = fasttext.load_model(str(out))
    assert sorted(model.get_labels()) == ["__label__hq", "__label__lq"]
    # pages like the injected negatives are still negatives (the words are ordinary words now, a marker of them)
    labels, _ = model.predict([prepare_text(inject(d["text"])) for d in BOILER[60:80]])
    assert sum(ls[0] == "__label__lq" for ls in labels) >= 18


def test_label_injection_through_the_command_keeps_held_out_accuracy(tmp_path, capsys):
    pos = write_jsonl(tmp_path / "p.jsonl", [d["text"] for d in PROSE])
    inj = [" ".join(x for i, w in enumerate(d["text"].split()) for x in (["__label__hq", w] if i % 10 == 0 else [w]))
           for d in BOILER]
    neg = write_jsonl(tmp_path / "n.jsonl", inj)
    rc = curate_main(["train-quality", "--positive", str(pos), "--negative", str(neg), "--output",
                      str(tmp_path / "m.bin"), "--valid-fraction", "0.25", "--epochs", "10", *SMALL])
    out = capsys.readouterr().out
    assert rc == 0
    m = re.search(r"accuracy ([\d.]+)", out)
    assert m and float(m.group(1)) >= 0.9, out


def _pair(tmp_path):
    pos = write_jsonl(tmp_path / "p.jsonl", [d["text"] for d in PROSE[:20]])
    neg = write_jsonl(tmp_path / "n.jsonl", [d["text"] for d in BOILER[:20]])
    return pos, neg


def _refused(tmp_path, capsys, positive: list, negative: list, message: str):
    out = tmp_path / "m.bin"
    rc = curate_main(["train-quality", "--positive", *map(str, positive), "--negative", *map(str, negative),
                      "--output", str(out), *SMALL])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err, err
    assert not out.exists()
    return err


def test_the_same_file_on_both_sides_is_refused(tmp_path, capsys):
    pos, neg = _pair(tmp_path)
    _refused(tmp_path, capsys, [pos], [pos], "are the same file")
    _refused(tmp_path, capsys, [pos], [neg, tmp_path / "." / "p.jsonl"], "are the same file")
    (tmp_path / "link.jsonl").symlink_to(pos)
    _refused(tmp_path, capsys, [pos], [tmp_path / "link.jsonl"], "are the same file")
    os.link(pos, tmp_path / "hard.jsonl")
    _refused(tmp_path, capsys, [tmp_path / "hard.jsonl"], [pos], "are the same file")


def test_the_same_documents_on_both_sides_are_refused(tmp_path, capsys):
    pos, neg = _pair(tmp_path)
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(pos.read_bytes())
    err = _refused(tmp_path, capsys, [pos], [copy], "hold the same documents")
    assert "p.jsonl" in err and "copy.jsonl" in err
    # the same documents compressed, with other JSON spelling
    with gzip.open(tmp_path / "other.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps({"text": d["text"], "id": i}, ensure_ascii=False) + "\n"
                        for i, d in enumerate(PROSE[:20])))
    _refused(tmp_path, capsys, [tmp_path / "other.jsonl.gz"], [pos], "hold the same documents")
    # both sides' documents the same set, split over files differently
    a = write_jsonl(tmp_path / "a.jsonl", [d["text"] for d in PROSE[:10]])
    b = write_jsonl(tmp_path / "b.jsonl", [d["text"] for d in PROSE[10:20]])
    _refused(tmp_path, capsys, [a, b], [pos], "hold the same documents")


def test_a_shard_of_a_folder_on_the_other_side_is_refused(tmp_path, capsys):
    """Checked before anything is read: the folder need only look like a curation output."""
    cur = tmp_path / "cur"
    (cur / "data").mkdir(parents=True)
    (cur / "manifest.json").write_text('{"shards": [], "dropped": []}')
    shard = cur / "data" / "part-0.arrow"
    shard.write_bytes(b"")
    _, neg = _pair(tmp_path)
    _refused(tmp_path, capsys, [cur], [neg, shard], "lies inside --positive")
    _refused(tmp_path, capsys, [neg, shard], [cur], "lies inside --negative")


def test_some_documents_on_both_sides_are_counted_in_a_warning(tmp_path, capsys):
    pos = write_jsonl(tmp_path / "p.jsonl", [d["text"] for d in PROSE[:40]])
    neg = write_jsonl(tmp_path / "n.jsonl", [d["text"] for d in BOILER[:40] + PROSE[:3]])
    rc = curate_main(["train-quality", "--positive", str(pos), "--negative", str(neg), "--output",
                      str(tmp_path / "m.bin"), "--epochs", "1", *SMALL])
    err = capsys.readouterr().err
    assert rc == 0 and "warning: 3 documents are both positive and negative examples" in err


@pytest.mark.parametrize("kind, message", [
    ("fifo", "in.jsonl: is not a regular file or folder (a named pipe)"),
    ("device", "/dev/null: is not a regular file or folder (a character device)"),
    ("broken link", "in.jsonl: not found (a link to nothing)"),
    ("missing", "in.jsonl: not found"),
])
def test_an_input_that_is_not_a_file_is_named_for_what_it_is(tmp_path, capsys, kind, message):
    _, neg = _pair(tmp_path)
    path = tmp_path / "in.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/null")
    elif kind == "broken link":
        path.symlink_to(tmp_path / "gone.jsonl")
    err = _refused(tmp_path, capsys, [path], [neg], message)
    assert str(path) in err

"""`pretrain tokenizer train` and load_tokenizer, on real prose (tests/data/pretrain/SOURCES.md)."""
import json
import pickle
from pathlib import Path

import pytest

from pretrain.cli import main as pretrain_main
from pretrain.data.tokenizer import load_tokenizer, sample_training_text, train_tokenizer

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    docs = [d["text"] for d in curated.prose_docs()]
    out = curated.make_curated(tmp_path_factory.mktemp("cur") / "curated", docs, shards=3)
    return out, docs


@pytest.fixture(scope="module")
def bpe(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("tok") / "tok.model"
    return train_tokenizer(corpus[0], 800, out, max_bytes=1_500_000, threads=2)


def test_bpe_tokenizer_ids_and_round_trip(bpe, corpus):
    meta = json.loads(Path(bpe.model_path).with_suffix(".json").read_text())
    assert (bpe.unk_id, bpe.bos_id, bpe.eod_id, bpe.pad_id) == (0, 1, 2, 3)
    assert {k: meta[k] for k in ("unk_id", "bos_id", "eod_id", "pad_id", "vocab_size")} == {
        "unk_id": 0, "bos_id": 1, "eod_id": 2, "pad_id": 3, "vocab_size": 800}
    assert bpe.vocab_size == 800 and meta["model_type"] == "bpe" and meta["sampled_bytes"] <= 1_500_000
    docs = corpus[1]
    for text in docs[:60] + ["  two  spaces\n\ttab\n\nline", "naïve café — “quotes” 中文 🎉"]:
        assert bpe.decode(bpe.encode(text)) == text
    assert bpe.encode_batch(docs[:20], num_threads=1) == [bpe.encode(t) for t in docs[:20]]
    assert bpe.id_to_piece(bpe.encode("\n")[-1]) == "\n"  # newline is one piece, not bytes
    assert len(bpe.encode("🎉")) >= 4  # unseen characters fall back to UTF-8 bytes, not UNK
    assert bpe.unk_id not in bpe.encode("🎉 中文")
    clone = pickle.loads(pickle.dumps(bpe))
    assert clone.encode(docs[0]) == bpe.encode(docs[0]) and clone.eod_id == 2


def test_sampling_respects_the_cap_and_the_seed(corpus):
    lines, info = sample_training_text(corpus[0], 200_000, seed=1)
    assert sum(len(x.encode()) for x in lines) == info["sampled_bytes"] <= 200_000
    assert 0 < info["sampled_documents"] < info["documents"] == len(corpus[1])
    again, _ = sample_training_text(corpus[0], 200_000, seed=1)
    other, _ = sample_training_text(corpus[0], 200_000, seed=2)
    assert again == lines and other != lines
    assert all(len(x.encode()) <= 4096 and "\n" not in x for x in lines)


def test_unigram_option(corpus, tmp_path):
    tok = train_tokenizer(corpus[0], 500, tmp_path / "uni.model", model_type="unigram", max_bytes=300_000, threads=2)
    assert json.loads((tmp_path / "uni.json").read_text())["model_type"] == "unigram"
    text = corpus[1][3]
    assert tok.vocab_size == 500 and tok.decode(tok.encode(text)) == text


def test_pretrained_model_without_sidecar(bpe, tmp_path):
    model = tmp_path / "pretrained.model"
    model.write_bytes(Path(bpe.model_path).read_bytes())  # no .json beside it: ids from the model itself
    tok = load_tokenizer(model)
    assert (tok.eod_id, tok.bos_id, tok.pad_id, tok.unk_id) == (2, 1, 3, 0)
    assert tok.encode("hello world") == bpe.encode("hello world")


def test_command_line_and_errors(corpus, tmp_path, capsys):
    out = tmp_path / "cli.model"
    rc = pretrain_main(["tokenizer", "train", "--input", str(corpus[0]), "--vocab-size", "600", "--output", str(out),
                        "--max-bytes", "400K", "--threads", "1"])
    assert rc == 0 and out.is_file() and out.with_suffix(".json").is_file()
    assert "eod=2" in capsys.readouterr().out
    assert load_tokenizer(out).vocab_size == 600
    (tmp_path / "empty").mkdir()
    rc = pretrain_main(["tokenizer", "train", "--input", str(tmp_path / "empty"), "--vocab-size", "600", "--output",
                        str(tmp_path / "x.model")])
    assert rc == 2 and "no manifest.json" in capsys.readouterr().err
    rc = pretrain_main(["tokenizer", "train", "--input", str(corpus[0]), "--vocab-size", "100", "--output",
                        str(tmp_path / "x.model")])
    assert rc == 2 and "too small" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError):
        load_tokenizer(tmp_path / "absent.model")


@pytest.mark.parametrize("flag, value", [("--vocab-size", "10000000000"), ("--max-bytes", "0"), ("--max-bytes", "-1"),
                                         ("--sample-bytes", "0"), ("--character-coverage", "0.5"),
                                         ("--character-coverage", "nan"), ("--threads", "0"),
                                         ("--threads", "100000")])
def test_train_values_sentencepiece_refuses_are_named_at_start(corpus, tmp_path, capsys, flag, value):
    """Values SentencePiece refuses only after the sample was read, in its own words (``INTERNAL:
    trainer_interface.cc(94) ...``), are refused first, naming the flag."""
    args = ["tokenizer", "train", "--input", str(corpus), "--vocab-size", "400", "--output", str(tmp_path / "t.model")]
    if flag == "--vocab-size":
        args[args.index("--vocab-size") + 1] = value
    else:
        args += [flag, value]
    assert pretrain_main(args) == 2
    err = capsys.readouterr().err
    assert f"{flag} " in err and "INTERNAL" not in err and "Traceback" not in err
    assert not (tmp_path / "t.model").exists()


@pytest.mark.parametrize("path", ["/dev/zero", "folder"])
def test_a_tokenizer_path_that_is_no_regular_file_is_refused(tmp_path, path):
    path = str(tmp_path) if path == "folder" else path
    with pytest.raises(ValueError, match="not a regular file"):
        load_tokenizer(path)


def test_a_model_with_a_piece_that_is_not_text_is_refused_at_load(bpe, tmp_path):
    """A damaged or crafted .model whose protobuf holds a piece of non-UTF-8 bytes loads in SentencePiece, and
    its decode then raised UnicodeDecodeError in whatever wrote a token out; it is refused at load, naming it."""
    tok = bpe
    data = Path(tok.model_path).read_bytes()
    piece = next(tok.id_to_piece(i) for i in range(tok.vocab_size - 1, 0, -1)
                 if len(tok.id_to_piece(i)) >= 4 and tok.id_to_piece(i).isascii() and
                 data.count(tok.id_to_piece(i).encode()) == 1)
    bad = tmp_path / "bad.model"
    bad.write_bytes(data.replace(piece.encode(), b"\xff" + piece.encode()[1:]))
    with pytest.raises(ValueError, match="is not UTF-8 text"):
        load_tokenizer(bad)


def test_a_model_file_larger_than_any_sentencepiece_model_is_not_read(tmp_path):
    big = tmp_path / "huge.model"
    with open(big, "wb") as f:
        f.truncate((1 << 30) + 1)  # sparse: no disk used, SentencePiece would read it all
    with pytest.raises(ValueError, match="more than any SentencePiece model"):
        load_tokenizer(big)


@pytest.mark.parametrize("argv", [["tokenizer", "train", "--seed", "-1"], ["blend", "build", "--seed", "4294967296"]])
def test_a_seed_numpy_cannot_take_is_refused_naming_the_flag(argv, tmp_path, capsys):
    """numpy said only "expected non-negative integer"; the stable blend order aliased -1 to 2**64 - 1."""
    rest = (["--input", str(tmp_path), "--vocab-size", "400", "--output", str(tmp_path / "t.model")]
            if argv[0] == "tokenizer" else [str(tmp_path / "b.toml"), "--seq-len", "8", "--samples", "4",
                                            "--out", str(tmp_path / "c")])
    with pytest.raises(SystemExit) as e:
        pretrain_main(argv + rest)
    assert e.value.code == 2 and "argument --seed:" in capsys.readouterr().err

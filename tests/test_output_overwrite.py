"""Outputs of the `pretrain` commands never replace a file Quarry did not write: `tokenizer train --output`
(the .model and its .json sidecar), `eval --output` and `--write-lm-eval-tasks`, `report --out`, `blend build
--out` and `ablate --output` refuse at start, naming --force, when what is there is not their own earlier output;
a rerun onto their own output goes on without --force. And `eval --write-lm-eval-tasks` prints an lm_eval line a
shell runs as printed, whatever the folder's name."""
from __future__ import annotations

import io
import json
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pretrain.cli import main as pretrain_main

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)

USER_JSON = '{"note": "my own settings, not written by Quarry"}\n'


def snapshot(folder: Path) -> dict:
    """{relative path: bytes} of every file below ``folder``."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- pretrain tokenizer train -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    docs = [d["text"] for d in curated.prose_docs(300)]
    return curated.make_curated(tmp_path_factory.mktemp("cur") / "curated", docs, shards=2)


def train_args(corpus, output, *extra):
    return ["tokenizer", "train", "--input", str(corpus), "--vocab-size", "400", "--max-bytes", "200K",
            "--threads", "1", "--output", str(output), *extra]


def pretrained_model_bytes() -> bytes:
    """A SentencePiece model trained with SentencePiece's own defaults (nmt_nfkc normalization, no pad, no "\\n"
    piece): what a user brings from elsewhere."""
    import sentencepiece as spm

    text = [d["text"][:2000] for d in curated.prose_docs(200)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.Train(sentence_iterator=iter(text), model_writer=model, vocab_size=200,
                                   num_threads=1, minloglevel=2)
    return model.getvalue()


def test_tokenizer_train_refuses_a_sidecar_it_did_not_write(corpus, tmp_path, capsys):
    side = tmp_path / "tok.json"
    side.write_text(USER_JSON)
    assert pretrain_main(train_args(corpus, tmp_path / "tok.model")) == 2
    err = capsys.readouterr().err
    assert str(side) in err and "--force" in err and "Traceback" not in err
    assert side.read_text() == USER_JSON and not (tmp_path / "tok.model").exists()
    # the ids alone, as a user writes beside a pretrained model, are not a sidecar Quarry wrote either
    ids = json.dumps({"unk_id": 0, "bos_id": 1, "eod_id": 2, "pad_id": -1}) + "\n"
    side.write_text(ids)
    assert pretrain_main(train_args(corpus, tmp_path / "tok.model")) == 2
    assert "--force" in capsys.readouterr().err and side.read_text() == ids
    # --force: written over
    assert pretrain_main(train_args(corpus, tmp_path / "tok.model", "--force")) == 0
    assert json.loads(side.read_text())["vocab_size"] == 400


def test_tokenizer_train_refuses_a_model_it_did_not_write(corpus, tmp_path, capsys):
    from pretrain.data.tokenizer import is_quarry_model, load_tokenizer

    model = tmp_path / "tok.model"
    for content in (pretrained_model_bytes(), b"my notes, in a file that happens to end in .model\n"):
        model.write_bytes(content)
        assert not is_quarry_model(model)
        assert pretrain_main(train_args(corpus, model)) == 2
        err = capsys.readouterr().err
        assert f"{model} exists and is not a tokenizer" in err and "--force" in err
        assert model.read_bytes() == content and not (tmp_path / "tok.json").exists()
    assert pretrain_main(train_args(corpus, model, "--force")) == 0
    assert load_tokenizer(model).vocab_size == 400 and is_quarry_model(model)
    # the library call refuses too (the ablation trains its tokenizer through it)
    from pretrain.data.tokenizer import train_tokenizer

    other = tmp_path / "other.model"
    other.write_bytes(b"not a model")
    with pytest.raises(ValueError, match="--force"):
        train_tokenizer(corpus, 400, other, max_bytes=200_000, threads=1)
    assert other.read_bytes() == b"not a model"


def test_tokenizer_train_reruns_onto_its_own_output(corpus, tmp_path):
    from pretrain.data.tokenizer import load_tokenizer

    model = tmp_path / "tok.model"
    assert pretrain_main(train_args(corpus, model)) == 0
    assert pretrain_main(train_args(corpus, model, "--model-type", "unigram")) == 0  # a redo: no --force
    assert json.loads((tmp_path / "tok.json").read_text())["model_type"] == "unigram"
    # a run killed between the .model and the .json: the model alone is still recognisably Quarry's
    (tmp_path / "tok.json").unlink()
    assert pretrain_main(train_args(corpus, model)) == 0
    assert load_tokenizer(model).vocab_size == 400


def test_tokenizer_train_output_that_is_a_folder_is_refused_at_start(corpus, tmp_path, capsys):
    (tmp_path / "tok.json").mkdir()
    assert pretrain_main(train_args(corpus, tmp_path / "tok.model", "--force")) == 2
    assert "is a folder" in capsys.readouterr().err and not (tmp_path / "tok.model").exists()


# --- pretrain eval ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def bpb_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("evals") / "prose.jsonl"
    path.write_text("".join(json.dumps({"text": d["text"][:600]}) + "\n" for d in curated.prose_docs(6)))
    return path


def test_eval_output_refuses_a_file_it_did_not_write(bpb_file, tmp_path, capsys):
    for content in (USER_JSON, "plain notes\n", json.dumps({"checkpoint": "x", "step": 1}) + "\n"):
        out = tmp_path / "results.json"
        out.write_text(content)
        # refused at start: before the (missing) checkpoint is even looked for
        assert pretrain_main(["eval", "--checkpoint", str(tmp_path / "no-ckpt"), "--task", f"bpb:{bpb_file}",
                              "--output", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"--output {out} exists and is not a results file" in err and "--force" in err
        assert out.read_text() == content


def test_eval_output_reruns_onto_its_own_file_and_force_overwrites(bpb_file, tmp_path, tmp_path_factory):
    from tests.test_eval import eval_checkpoint

    ckpt = eval_checkpoint(tmp_path_factory)
    out = tmp_path / "results.json"
    args = ["eval", "--checkpoint", ckpt, "--task", f"bpb:{bpb_file}:prose", "--output", str(out), "--quiet"]
    assert pretrain_main(args) == 0
    first = json.loads(out.read_text())
    assert pretrain_main(args) == 0  # its own earlier results: written over without --force
    assert json.loads(out.read_text())["tasks"] == first["tasks"]
    out.write_text(USER_JSON)
    assert pretrain_main(args) == 2 and out.read_text() == USER_JSON
    assert pretrain_main(args + ["--force"]) == 0
    assert json.loads(out.read_text())["tasks"] == first["tasks"]


def test_write_lm_eval_tasks_refuses_files_it_did_not_write(bpb_file, tmp_path, capsys):
    out = tmp_path / "tasks"
    out.mkdir()
    args = ["eval", "--write-lm-eval-tasks", str(out), "--task", f"bpb:{bpb_file}:prose"]
    for name, content in (("prose.yaml", "task: prose\n# my own lm-eval task\n"),
                          ("prose.jsonl", '{"text": "my own data"}\n')):
        (out / name).write_text(content)
        assert pretrain_main(args) == 2
        err = capsys.readouterr().err
        assert f"{out / name} exists and is not a task file" in err and "--force" in err
        assert snapshot(out) == {name: content.encode()}
        (out / name).unlink()
    # its own output: written again without --force (a YAML of the old code's, written after its .jsonl, too)
    assert pretrain_main(args) == 0
    first = snapshot(out)
    assert set(first) == {"prose.yaml", "prose.jsonl"}
    assert pretrain_main(args) == 0 and snapshot(out) == first
    (out / "prose.jsonl").unlink()  # a run killed after the YAML (written first)
    assert pretrain_main(args) == 0 and snapshot(out) == first
    # --force writes over a user's file
    (out / "prose.yaml").write_text("mine\n")
    assert pretrain_main(args) == 2
    assert pretrain_main(args + ["--force"]) == 0 and snapshot(out) == first


def test_lm_eval_command_is_printed_shell_quoted(bpb_file, tmp_path, capsys):
    """The printed line, run by a shell, passes the folder as one argument and runs nothing else."""
    out = tmp_path / "my tasks $(touch PWNED); echo `touch PWNED2` 'q\" & x"
    assert pretrain_main(["eval", "--write-lm-eval-tasks", str(out), "--task", f"bpb:{bpb_file}:prose"]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("run: ")]
    command = line[len("run: "):]
    expected = ["lm_eval", "--model", "hf", "--model_args", "pretrained=EXPORT", "--include_path", str(out),
                "--tasks", "prose"]
    assert shlex.split(command) == expected
    # a real shell, with lm_eval a function printing its arguments one per line
    run = subprocess.run(["sh", "-c", 'lm_eval() { printf "%s\\n" "$@"; }\n' + command], cwd=tmp_path,
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 0 and run.stdout.splitlines() == expected[1:]
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()


# --- pretrain report -------------------------------------------------------------------------------------

@pytest.fixture
def run_logs(tmp_path):
    from tests.test_report import BOOKS, write_metrics, write_stats

    return write_stats(tmp_path / "books", BOOKS), write_metrics(tmp_path / "logs", steps=12, eval_every=4)


def report_args(out, run_logs, *extra):
    books, logs = run_logs
    return ["report", "--out", str(out), "--curated", str(books), "--logs", str(logs), *extra]


@pytest.mark.parametrize("files", [
    {"notes.md": b"my notes\n"},
    {"index.md": b"# My own index\n"},  # a file of a name the report writes, not the report's
    {"funnel.png": b"\x89PNG my own plot"},
    {"index.md": b"# Quarry run report\n", "notes.md": b"mine\n"},  # a report, and a file of the user's in it
])
def test_report_refuses_a_folder_it_did_not_write(files, run_logs, tmp_path, capsys):
    out = tmp_path / "report"
    out.mkdir()
    for name, content in files.items():
        (out / name).write_bytes(content)
    assert pretrain_main(report_args(out, run_logs)) == 2
    err = capsys.readouterr().err
    assert f"{out} is not empty and is not an earlier report" in err and "--force" in err
    assert "Traceback" not in err and snapshot(out) == files


def test_report_reruns_onto_its_own_folder_and_force_keeps_other_files(run_logs, tmp_path, capsys):
    from pretrain.report import MARKER

    out = tmp_path / "report"
    assert pretrain_main(report_args(out, run_logs)) == 0
    names = set(snapshot(out))
    assert names == {"index.md", "funnel.png", "loss.png", MARKER}
    assert pretrain_main(report_args(out, run_logs)) == 0  # its own folder: no --force
    # a report written before the marker existed (recognised by its index.md), with a killed write's temp file
    (out / MARKER).unlink()
    (out / ".loss.png.abc123.tmp").write_bytes(b"partial")
    assert pretrain_main(report_args(out, run_logs)) == 0
    # --force: the report's files written into a user's folder, the user's own files kept
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.md").write_text("my notes\n")
    assert pretrain_main(report_args(mine, run_logs)) == 2
    assert pretrain_main(report_args(mine, run_logs, "--force")) == 0
    assert (mine / "notes.md").read_text() == "my notes\n" and (mine / "index.md").is_file()


def test_report_out_that_is_a_file_is_refused(run_logs, tmp_path, capsys):
    out = tmp_path / "report.md"
    out.write_text("mine\n")
    assert pretrain_main(report_args(out, run_logs, "--force")) == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "Traceback" not in err and out.read_text() == "mine\n"


# --- pretrain blend build --------------------------------------------------------------------------------

from tests.test_blend import two_datasets  # noqa: E402,F401 - the blend tests' fixture: a spec of two datasets


def blend_args(spec, out, *extra):
    return ["blend", "build", str(spec), "--seq-len", "16", "--samples", "200", "--valid-samples", "10",
            "--out", str(out), *extra]


def test_blend_build_refuses_files_it_did_not_write(two_datasets, tmp_path, capsys):
    out = tmp_path / "cache"
    user_npy = io.BytesIO()
    np.save(user_npy, np.arange(5))
    for rel, content in (("index.json", USER_JSON.encode()),  # e.g. the sidecar of a dataset prefixed out/index
                         ("web/document_index.npy", user_npy.getvalue()),  # a user's array, no cache beside it
                         ("valid/books/index.json", b"[1, 2, 3]\n")):
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(content)
        before = snapshot(out)
        assert pretrain_main(blend_args(two_datasets, out)) == 2
        err = capsys.readouterr().err
        assert f"{out / rel} exists and is not" in err and "--force" in err and "Traceback" not in err
        assert snapshot(out) == before
        (out / rel).unlink()
    # --force builds over them
    (out / "index.json").write_text(USER_JSON)
    assert pretrain_main(blend_args(two_datasets, out, "--force")) == 0
    assert json.loads((out / "index.json").read_text())["description"]["class"] == "BlendedDataset"


def test_blend_build_reruns_onto_its_own_cache(two_datasets, tmp_path):
    out = tmp_path / "cache"
    assert pretrain_main(blend_args(two_datasets, out)) == 0
    first = np.load(out / "dataset_index.npy")
    # another sample count: another key, rebuilt into the same folders without --force
    assert pretrain_main(["blend", "build", str(two_datasets), "--seq-len", "16", "--samples", "150",
                          "--out", str(out)]) == 0
    # a build killed between its arrays and its index.json (the index.json is removed first, the .lock stays)
    (out / "web" / "index.json").unlink()
    assert pretrain_main(blend_args(two_datasets, out)) == 0
    assert np.array_equal(np.load(out / "dataset_index.npy"), first)


def test_blend_build_cache_below_a_file_is_refused(two_datasets, tmp_path, capsys):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "web").write_text("mine\n")
    assert pretrain_main(blend_args(two_datasets, tmp_path / "cache", "--force")) == 2
    err = capsys.readouterr().err
    assert "is a file, where the index cache needs a folder" in err and "Traceback" not in err
    assert (tmp_path / "cache" / "web").read_text() == "mine\n"


# --- pretrain ablate -------------------------------------------------------------------------------------

@pytest.fixture
def ablate_spec(tmp_path):
    from tests.test_ablate import curated_folder, sample_prose, spec_table, write_spec

    docs = sample_prose()
    data = {"prose": curated_folder(tmp_path / "a", docs[:6]), "shuffled": curated_folder(tmp_path / "b", docs[6:12]),
            "eval": tmp_path / "ev.jsonl", "tmp": tmp_path}
    data["eval"].write_text(json.dumps({"text": "a held out text"}) + "\n")
    return write_spec(tmp_path / "spec.toml", spec_table(data, tokens=8 * 1024))


def test_ablate_refuses_a_folder_it_did_not_write(ablate_spec, tmp_path, capsys, monkeypatch):
    import pretrain.ablate.ablation as ablation

    def no_run(*a, **k):
        raise AssertionError("the ablation started in a folder it must refuse")

    monkeypatch.setattr(ablation, "run_ablation", no_run)
    out = tmp_path / "out"
    out.mkdir()
    files = {"results.json": USER_JSON.encode(), "run.lock": b"my lock\n", "notes.md": b"mine\n"}
    for name, content in files.items():
        (out / name).write_bytes(content)
    assert pretrain_main(["ablate", str(ablate_spec), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--output {out} is not empty and is not an earlier ablation's folder" in err and "--force" in err
    assert snapshot(out) == files


def test_ablate_output_of_its_own_is_taken(ablate_spec, tmp_path):
    from pretrain.ablate.ablation import claim, fingerprint, load_tasks
    from pretrain.ablate.spec import load_spec
    from pretrain.commands.ablate import output_dir_problem

    out = tmp_path / "out"
    assert output_dir_problem(out) is None  # new
    out.mkdir()
    assert output_dir_problem(out) is None  # empty
    spec = load_spec(ablate_spec)
    claim(out, fingerprint(spec, load_tasks(spec, log=lambda _: None)[0]))  # what a first run writes
    (out / "results.json").write_text("{}\n")
    assert output_dir_problem(out) is None
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("mine\n")
    assert "--force" in output_dir_problem(mine) and output_dir_problem(mine, force=True) is None
    (tmp_path / "file").write_text("x")
    assert "is a file" in output_dir_problem(tmp_path / "file", force=True)

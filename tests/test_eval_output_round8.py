"""``pretrain eval --output``: strict JSON (an overflowing perplexity is null, not ``Infinity``), and one eval at
a time per output file (two onto one file had both printed their tables and left one's results)."""
import json
import math

from curate.lock import OutputLock
from curate.shards import write_json
from pretrain.cli import main as pretrain_main
from test_eval import eval_checkpoint, eval_files  # noqa: F401  (the fixture)


def test_results_json_is_strict_json(tmp_path, tmp_path_factory, eval_files):  # noqa: F811
    ckpt = eval_checkpoint(tmp_path_factory)
    long_word = tmp_path / "one_word.jsonl"
    long_word.write_text(json.dumps({"text": "x" * 100_000}) + "\n")  # word perplexity past e^709
    out = tmp_path / "r.json"
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{long_word}:blob", "--output", str(out),
                          "--quiet"]) == 0
    text = out.read_text()
    assert "Infinity" not in text and "NaN" not in text
    metrics = json.loads(text)["tasks"]["blob"]["metrics"]
    assert metrics["word_perplexity"] is None and math.isfinite(metrics["bits_per_byte"])


def test_write_json_writes_non_finite_floats_as_null(tmp_path):
    path = write_json({"a": math.inf, "b": [1.5, -math.inf, float("nan")], "c": {"d": (2.0, math.nan)}},
                      tmp_path / "x.json")
    assert json.loads(path.read_text()) == {"a": None, "b": [1.5, None, None], "c": {"d": [2.0, None]}}


def test_a_second_eval_onto_the_same_output_is_refused(tmp_path, tmp_path_factory, eval_files, capsys):  # noqa: F811
    ckpt = eval_checkpoint(tmp_path_factory)
    out = tmp_path / "r.json"
    with OutputLock(tmp_path, "r.json.lock"):  # as a first eval holds it
        assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{eval_files['bpb']}:prose",
                              "--output", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert "in use by another run" in err and str(out) in err and not out.exists()
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{eval_files['bpb']}:prose",
                          "--output", str(out), "--quiet"]) == 0
    assert json.loads(out.read_text())["tasks"]["prose"]["n"] == 8 and not (tmp_path / "r.json.lock").exists()

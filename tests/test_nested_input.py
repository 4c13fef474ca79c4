"""JSON and TOML nested thousands deep, and files that never end, in every file a user hands Quarry: a message
naming the file, never a ``RecursionError`` traceback (``json.loads`` and ``tomllib`` recurse once per level, and
``RecursionError`` is not the ``ValueError`` their callers handle). Also: a perplexity past ``e^709`` is
infinite, not an ``OverflowError``. Hostile checkpoints: tests/test_poisoned_checkpoint.py."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from curate import json_files
from curate.cli import main as curate_main
from curate.config import ConfigError, load_toml

DEEP_JSON = "[" * 100_000 + "]" * 100_000
DEEP_TOML = "a = " + "[" * 50_000 + "]" * 50_000


def test_json_files_refuses_deep_nesting_devices_and_oversized_files(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP_JSON)
    with pytest.raises(ValueError, match="deep.json: not JSON .nested too deep"):
        json_files.read_json(deep)
    with pytest.raises(ValueError, match="line 3: not JSON"):
        json_files.loads("{bad", "line 3")
    with pytest.raises(ValueError, match="not a regular file"):
        json_files.read_json("/dev/zero")  # would read until memory runs out
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"x": "y" * 5000}))
    with pytest.raises(ValueError, match="more than the 1,000 read"):
        json_files.read_json(big, max_bytes=1000)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        json_files.read_json(fifo)  # opening it would wait for a writer forever
    with pytest.raises(FileNotFoundError):
        json_files.read_json(tmp_path / "missing.json")
    assert json_files.read_json(big)["x"] == "y" * 5000


def test_toml_nested_too_deep_is_a_config_error(tmp_path):
    from pretrain.config import parse_override
    from pretrain.data.blend_spec import BlendSpecError, parse_toml_spec

    path = tmp_path / "deep.toml"
    path.write_text(DEEP_TOML)
    with pytest.raises(ConfigError, match="deep.toml: not valid TOML: nested too deep"):
        load_toml(path)
    with pytest.raises(BlendSpecError, match="nested too deep"):
        parse_toml_spec(DEEP_TOML, "spec.toml")
    assert parse_override("train.steps=" + "[" * 50_000)[2] == "[" * 50_000  # taken as text, refused by its type


def test_an_eval_task_line_nested_too_deep_is_set_aside(tmp_path):
    from pretrain.eval.tasks import TaskSpec, read_items

    f = tmp_path / "choice.jsonl"
    ok = {"context": "The sky is", "choices": ["blue", "green"], "label": 0}
    f.write_text(json.dumps(ok) + "\n" + DEEP_JSON + "\n" + json.dumps(ok) + "\n")
    items = read_items(TaskSpec("choice", "choice", str(f)))
    assert len(items.items) == 2 and items.skipped == 1
    assert items.problems == [f"{f}:2: not JSON (nested too deep to read)"]


def test_a_perplexity_past_the_float_range_is_infinite():
    from pretrain.eval.metrics import task_metrics
    from pretrain.eval.request_lists import Request

    text = "字" * 5000  # one "word" (no spaces): 5,000 characters of log-likelihood over one word
    items = [{"text": text}]
    requests = [Request(tokens=[1] * 10, n_cont=5000, item=0)]
    n, m = task_metrics("bpb", items, requests, [(-5000 * 8.0, False)])
    assert n == 1 and m["word_perplexity"] == math.inf
    assert m["bits_per_byte"] == pytest.approx(5000 * 8.0 / len(text.encode()) / math.log(2))
    assert math.isfinite(m["byte_perplexity"])
    n, m = task_metrics("cloze", [{"text": "a b"}], [Request([1, 2], 1, 0)], [(-1000.0, False)])
    assert m["perplexity"] == math.inf


def _decontaminate_pipeline(tmp_path: Path, eval_text: str) -> Path:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": str(i), "text": f"document {i} " * 30}) + "\n" for i in range(5)))
    ev = tmp_path / "eval.jsonl"
    ev.write_text(eval_text)
    cfg = tmp_path / "p.toml"
    cfg.write_text(f'[pipeline]\nname = "d"\noutput = "{tmp_path / "out"}"\nworkers = 1\n'
                   f'[[sources]]\npath = "{src}"\n[[stages]]\ntype = "decontaminate"\neval_files = ["{ev}"]\n')
    return cfg


@pytest.mark.parametrize("eval_text, message", [
    ('{"text": "an eval passage"}\n' + DEEP_JSON + "\n", "eval.jsonl:2: not JSON (nested too deep to read)"),
    ('{"text": "an eval passage"}\n{bad\n', "eval.jsonl:2: not JSON"),
    ('{"x": 1}\n', "no text in it"),
    # texts, none long enough to give an n-gram: the stage would remove nothing
    ('[1, 2]\n5\n{"label": 3}\n{"text": "yes"}\n', "no example of min_ngram = 8 words or more"),
])
def test_a_bad_decontamination_eval_file_fails_at_start(eval_text, message, tmp_path, capsys):
    cfg = _decontaminate_pipeline(tmp_path, eval_text)
    assert curate_main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "traceback in" not in err, err
    assert not (tmp_path / "out").exists()  # refused before any work: no output folder


def test_a_good_decontamination_eval_file_still_runs(tmp_path):
    cfg = _decontaminate_pipeline(tmp_path, '{"text": "short"}\n{"text": "an eval passage of eight words or more"}\n')
    assert curate_main(["run", str(cfg)]) == 0


def test_curate_stats_and_tokenizer_sidecar_nested_too_deep(tmp_path, capsys):
    from pretrain.data.tokenizer import load_tokenizer

    (tmp_path / "stats.json").write_text(DEEP_JSON)
    assert curate_main(["stats", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "stats.json" in err and "nested too deep" in err and "Traceback" not in err
    model = tmp_path / "tok.model"
    model.write_bytes(b"")
    (tmp_path / "tok.json").write_text(DEEP_JSON)
    with pytest.raises(ValueError, match="tok.json: not JSON .nested too deep"):
        load_tokenizer(model)

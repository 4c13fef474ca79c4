"""`pretrain eval` and in-training evaluation: lm-evaluation-harness 0.4's windows and definitions, the same
figures at every layout, bad task files named (never a traceback), and the training losses unchanged by
evaluation. The parity test with lm-eval itself (on `pretrain export-hf`'s folder) is in test_eval_parity.py."""
from __future__ import annotations

import json
import re
import math

import pytest

from pretrain.cli import main as pretrain_main
from pretrain.eval.metrics import task_metrics
from pretrain.eval.request_lists import Request
from pretrain.eval.requests import build_requests, cloze_pair, encode_pair, rolling_windows
from pretrain.eval.tasks import EvalDataError, TaskSpec, parse_task_arg, read_items, task_specs_from_tables
from curate.config import ConfigError
from tests.conftest import DATA
from tests.distributed_helpers import config_dict, run_distributed, tiny_config
from tests.test_export_hf import cached, quarry_tokenizer

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

AUSTEN = DATA / "hf" / "austen_emma.jsonl"


def paragraphs() -> list[str]:
    docs = [json.loads(line)["text"] for line in AUSTEN.read_text().splitlines()]
    return [p.strip() for d in docs for p in d.split("\n\n") if len(p.strip()) > 200]


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def eval_files(tmp_path_factory):
    """Small bpb / cloze / choice files from Austen's prose."""
    d = tmp_path_factory.mktemp("evals")
    paras = paragraphs()
    sents = [s.strip() + "." for p in paras for s in p.split(".") if 4 < len(s.split()) < 14]
    choice = []
    for i in range(0, 3 * 16, 3):
        right = sents[i + 1]
        options = [right] + [sents[(i * 7 + 13 * k) % len(sents)] for k in (1, 2, 3)]
        options = sorted(set(options), key=options.index)
        choice.append({"context": sents[i], "choices": options, "label": 0 if i % 2 else len(options) - 1})
        if choice[-1]["label"]:
            choice[-1]["choices"] = options[1:] + options[:1]
    return {"bpb": write_jsonl(d / "prose.jsonl", [{"text": p} for p in paras[:8]]),
            "cloze": write_jsonl(d / "cloze.jsonl", [{"text": " ".join(p.split()[:30])} for p in paras[8:28]]),
            "choice": write_jsonl(d / "choice.jsonl", choice)}


TRAIN_TOML = """
[model]
hidden_size = 32
num_layers = 2
num_heads = 2
[train]
steps = 6
micro_batch = 2
global_batch = 4
lr = 1e-2
device = "cpu"
[data]
kind = "synthetic"
tokenizer = "{tokenizer}"
seq_len = 64
[checkpoint]
dir = "{folder}/ckpt"
[log]
dir = "{folder}/logs"
tensorboard = false
"""


def eval_checkpoint(tmp_path_factory):
    """A 6-step checkpoint (GPT-2 style, seq 64) with the Austen tokenizer recorded in its config."""
    tok = quarry_tokenizer(tmp_path_factory)

    def make(folder):
        (folder / "train.toml").write_text(TRAIN_TOML.format(tokenizer=tok, folder=folder))
        assert pretrain_main(["train", "--config", str(folder / "train.toml")]) == 0
        return str(folder / "ckpt")

    return cached(tmp_path_factory, "ckpt_eval", make)


# ------------------------------------------------------------------------------------- lm-eval's windows


@pytest.mark.parametrize("n,window,stride", [(1, 4, 0), (4, 4, 0), (5, 4, 0), (37, 8, 0), (37, 8, 3), (37, 8, 8),
                                             (100, 16, 1), (9, 16, 5)])
def test_rolling_windows_equal_lm_eval(n, window, stride):
    utils = pytest.importorskip("lm_eval.utils")
    tokens = list(range(100, 100 + n))
    context_len = 1 if stride == 0 else window - stride + 1
    theirs = [utils.make_disjoint_window(w) for w in utils.get_rolling_token_windows(
        token_list=tokens, prefix_token=7, max_seq_len=window, context_len=context_len)]
    ours = list(rolling_windows(tokens, 7, window, stride))
    assert ours == theirs
    assert [t for _, cont in ours for t in cont] == tokens  # every token predicted once


def test_encode_pair_moves_trailing_space_and_splits_after_the_context():
    def encode(text):  # a toy tokenizer: one id per character
        return [ord(c) for c in text]
    assert encode_pair(encode, "ab ", "c", 1) == ([97, 98], [32, 99])
    assert encode_pair(encode, "", "xy", 1) == ([1], [120, 121])
    assert cloze_pair("the cat sat on the mat") == ("the cat sat on the", " mat")


def test_fewshot_examples_are_other_items_fixed_by_seed():
    from pretrain.eval.requests import fewshot_prefix

    items = [{"context": f"q{i}", "choices": [f"a{i}", f"b{i}"], "label": i % 2} for i in range(6)]
    for i in range(6):
        prefix = fewshot_prefix(items, i, 3)
        assert prefix == fewshot_prefix(items, i, 3)  # fixed
        shots = prefix.split("\n\n")[:-1]
        assert len(shots) == 3 and f"q{i} " not in prefix
        assert all(s == f"q{j} {items[j]['choices'][items[j]['label']]}" for s in shots
                   for j in [int(s.split()[0][1:])])
    reqs, _ = build_requests("choice", items, lambda t: [ord(c) for c in t], 1, window=512, shots=2)
    assert len(reqs) == 12 and all(len(q.tokens) == 2 * 7 + 5 for q in reqs)  # two "qj aj\\n\\n" first


def test_metrics_follow_lm_eval_definitions():
    items = [{"text": "a b  c"}, {"text": "dé"}]
    reqs = [Request([0, 1, 2], 2, 0, 0), Request([2, 3], 1, 0, 1), Request([0, 5], 1, 1, 0)]
    n, m = task_metrics("bpb", items, reqs, [(-1.0, True), (-2.0, False), (-3.0, True)])
    n_bytes, words, tokens = 6 + 3, 3 + 1, 4  # re.split(r"\s+") counts "a b  c" as 3 words
    assert n == 2
    assert m["bits_per_byte"] == pytest.approx(6.0 / n_bytes / math.log(2))
    assert m["word_perplexity"] == pytest.approx(math.exp(6.0 / words))
    assert m["byte_perplexity"] == pytest.approx(math.exp(6.0 / n_bytes))
    assert m["token_perplexity"] == pytest.approx(math.exp(6.0 / tokens))
    choice = [{"context": "c", "choices": ["a", "bbbb"], "label": 1}]
    reqs = [Request([1], 1, 0, 0), Request([1], 1, 0, 1)]
    n, m = task_metrics("choice", choice, reqs, [(-1.0, True), (-2.0, False)])
    assert m == {"acc": 0.0, "acc_norm": 1.0}  # -2/4 > -1/1


# ------------------------------------------------------------------------------------- task files


def test_task_arguments_and_tables(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"text": "x y"}\n')
    spec = parse_task_arg(f"cloze:{f}:mine")
    assert (spec.kind, spec.path, spec.name) == ("cloze", str(f), "mine")
    assert parse_task_arg(f"bpb:{f}").name == "p"
    with pytest.raises(ConfigError, match="KIND:PATH"):
        parse_task_arg("nothing")
    with pytest.raises(ConfigError, match="kind = 'ppl'"):
        parse_task_arg(f"ppl:{f}")
    with pytest.raises(ConfigError, match="not found"):
        parse_task_arg(f"bpb:{tmp_path / 'missing.jsonl'}")
    with pytest.raises(ConfigError, match="unknown key"):
        task_specs_from_tables([{"kind": "bpb", "path": str(f), "shot": 1}], "[[tasks]]")
    with pytest.raises(ConfigError, match="shots is for kind 'choice'"):
        task_specs_from_tables([{"kind": "bpb", "path": str(f), "shots": 1}], "[[tasks]]")
    with pytest.raises(ConfigError, match="repeated: p"):
        task_specs_from_tables([{"kind": "bpb", "path": str(f)}, {"kind": "cloze", "path": str(f)}], "[[tasks]]")


def test_bad_items_are_set_aside_and_named(tmp_path):
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join([
        json.dumps({"context": "a", "choices": ["x", "y"], "label": 1}),
        "{not json",
        json.dumps({"context": "a", "choices": ["x", "y"]}),
        json.dumps({"context": "a", "choices": ["x", "y"], "label": 2}),
        json.dumps({"context": "a", "choices": ["x", ""], "label": 0}),
        json.dumps({"context": "a", "choices": ["x", "y"], "label": True}),
        json.dumps(["a list"]),
    ]) + "\n")
    items = read_items(TaskSpec("c", "choice", str(f)))
    assert len(items.items) == 1 and items.skipped == 6
    assert items.problems[0].startswith(f"{f}:2: not JSON")
    assert any(":3: no 'label'" in p for p in items.problems)
    assert any(":4: label 2 is not an index" in p for p in items.problems)


@pytest.mark.parametrize("kind, line", [
    ("choice", r'{"context": "The sky is", "choices": [" blue", " \ud800"], "label": 0}'),
    ("choice", r'{"context": "\udfff", "choices": [" blue", " red"], "label": 0}'),
    ("bpb", r'{"text": "a text with a lone \ud83d surrogate"}'),
])
def test_a_lone_surrogate_escape_sets_the_item_aside(tmp_path, kind, line):
    """JSON's "\\ud800" is a str that is not valid Unicode: SentencePiece failed on it with a pybind11 cast
    error (a traceback, the whole evaluation lost)."""
    good = {"choice": '{"context": "The sky is", "choices": [" blue", " red"], "label": 0}',
            "bpb": '{"text": "a good text"}'}[kind]
    f = tmp_path / "t.jsonl"
    f.write_text(good + "\n" + line + "\n")
    items = read_items(TaskSpec("t", kind, str(f)))
    assert len(items.items) == 1 and items.skipped == 1 and "lone surrogate" in items.problems[0]


@pytest.mark.parametrize("content,kind,match", [
    ("", "bpb", "empty"),
    ('{"context": "a", "choices": ["x", "y"], "label": 0}\n', "bpb", "is this a choice file"),
    ('{"text": "a b c"}\n', "choice", "is this a bpb/cloze file"),
    ('{"text": "oneword"}\n', "cloze", "needs a context, a space and a last word"),
])
def test_a_file_with_no_valid_item_is_an_error_naming_it(tmp_path, content, kind, match):
    f = tmp_path / "t.jsonl"
    f.write_text(content)
    with pytest.raises(EvalDataError, match=match) as e:
        read_items(TaskSpec("t", kind, str(f)))
    assert str(f) in str(e.value)


def test_long_texts_and_compressed_files(tmp_path):
    import gzip

    import zstandard

    text = " ".join(f"w{i}" for i in range(5000))
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(json.dumps({"text": text}).encode() + b"\n"))
    (tmp_path / "b.jsonl.zst").write_bytes(zstandard.compress(json.dumps({"text": text}).encode() + b"\n"))
    (tmp_path / "c.txt").write_text(text)
    for name in ("a.jsonl.gz", "b.jsonl.zst", "c.txt"):
        items = read_items(TaskSpec("x", "bpb", str(tmp_path / name)))
        assert items.items == [{"text": text}]
    encode = lambda s: [len(w) for w in s.split(" ")]  # noqa: E731
    reqs, problems = build_requests("bpb", items.items, encode, 1, window=64)
    assert not problems and sum(q.n_cont for q in reqs) == 5000 and max(len(q.tokens) for q in reqs) <= 65
    reqs, problems = build_requests("cloze", items.items, encode, 1, window=64)  # context left-truncated later
    assert not problems and reqs[0].n_cont == 1


def test_command_reports_bad_input_in_one_line(tmp_path, tmp_path_factory, capsys):
    ckpt = eval_checkpoint(tmp_path_factory)
    f = tmp_path / "bad.jsonl"
    f.write_text('{"text": "a b"}\n')
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"choice:{f}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(f) in err and "Traceback" not in err
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{tmp_path / 'nope.jsonl'}"]) == 2
    assert "not found" in capsys.readouterr().err
    assert pretrain_main(["eval", "--checkpoint", str(tmp_path), "--task", f"bpb:{f}"]) == 2
    assert "no checkpoint" in capsys.readouterr().err


# ------------------------------------------------------------------------------------- the command


def test_eval_command_writes_the_contract_json(tmp_path, tmp_path_factory, eval_files, capsys):
    ckpt = eval_checkpoint(tmp_path_factory)
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(f'[[tasks]]\nname = "mc"\nkind = "choice"\npath = "{eval_files["choice"]}"\n'
                     f'[[tasks]]\nname = "mc3"\nkind = "choice"\npath = "{eval_files["choice"]}"\nshots = 1\n')
    out = tmp_path / "r.json"
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{eval_files['bpb']}:prose",
                          "--task", f"cloze:{eval_files['cloze']}", "--tasks", str(tasks), "--output", str(out),
                          "--quiet"]) == 0
    res = json.loads(out.read_text())
    assert res["step"] == 6 and res["tokens_seen"] == 6 * 4 * 64
    assert set(res["tasks"]) == {"prose", "cloze", "mc", "mc3"}
    prose = res["tasks"]["prose"]
    assert prose["kind"] == "bpb" and prose["n"] == 8
    assert set(prose["metrics"]) == {"bits_per_byte", "byte_perplexity", "word_perplexity", "token_perplexity"}
    assert prose["metrics"]["byte_perplexity"] == pytest.approx(2 ** prose["metrics"]["bits_per_byte"])
    assert set(res["tasks"]["cloze"]["metrics"]) == {"acc", "perplexity"}
    assert set(res["tasks"]["mc"]["metrics"]) == {"acc", "acc_norm"}
    assert res["tasks"]["mc"]["n"] == res["tasks"]["mc3"]["n"] == 16
    table = capsys.readouterr().out
    assert "prose" in table and "bits_per_byte" in table
    # a rerun gives the same figures
    out2 = tmp_path / "r2.json"
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{eval_files['bpb']}:prose",
                          "--output", str(out2), "--quiet"]) == 0
    assert json.loads(out2.read_text())["tasks"]["prose"]["metrics"] == prose["metrics"]
    # a batch size larger than there are requests scores the same (was a MemoryError padding 10^12 rows)
    out3 = tmp_path / "r3.json"
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{eval_files['bpb']}:prose",
                          "--output", str(out3), "--quiet", "--batch-size", str(10 ** 12)]) == 0
    assert json.loads(out3.read_text())["tasks"]["prose"]["metrics"] == pytest.approx(prose["metrics"], rel=1e-6)
    # a batch whose logits cannot fit the device's memory is refused before the first forward, naming one that fits
    from pretrain import fits

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fits, "device_bytes", lambda device: 2 * 2**20)
        assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{eval_files['bpb']}", "--quiet",
                              "--batch-size", "10000"]) == 2
    err = capsys.readouterr().err
    assert "--batch-size" in err and "cannot fit" in err and "Traceback" not in err
    fit = int(re.search(r"pass --batch-size (\d+)", err).group(1))
    assert 1 <= fit < 10000
    # a negative step is no checkpoint's
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"bpb:{eval_files['bpb']}", "--step", "-1"]) == 2
    assert "--step -1" in capsys.readouterr().err


def _eval_at_layout(ckpt, files, tp, pp):
    from pretrain.eval.run import evaluate_checkpoint

    specs = [TaskSpec("bpb", "bpb", files["bpb"]), TaskSpec("cloze", "cloze", files["cloze"]),
             TaskSpec("choice", "choice", files["choice"])]
    return evaluate_checkpoint(ckpt, specs, tp=tp, pp=pp, batch_size=3, device="cpu", show_progress=False)


@pytest.mark.slow
@pytest.mark.parametrize("tp,pp", [(1, 1), (2, 1), (1, 2)])  # 2 processes: dp 2, tp 2, pp 2
def test_same_figures_at_every_layout(tmp_path_factory, eval_files, tp, pp):
    ckpt = eval_checkpoint(tmp_path_factory)
    one = _eval_at_layout(ckpt, eval_files, 1, 1)["tasks"]
    ranks = run_distributed(2, _eval_at_layout, ckpt, eval_files, tp, pp)
    assert ranks[0] == ranks[1]
    for name, r in one.items():
        assert ranks[0]["tasks"][name]["n"] == r["n"]
        for metric, v in r["metrics"].items():
            assert ranks[0]["tasks"][name]["metrics"][metric] == pytest.approx(v, rel=1e-5), (name, metric)


# ------------------------------------------------------------------------------------- during training


def _losses_and_evals(raw):
    from tests.distributed_helpers import train_losses

    res = train_losses(raw)
    return res["losses"], res["evals"]


def _train_raw(tmp_path_factory, eval_files, with_tasks: bool, **parallel):
    tok = quarry_tokenizer(tmp_path_factory)
    cfg = tiny_config({"model.vocab_size": None, "data.tokenizer": str(tok), "train.steps": 4}, parallel=parallel)
    raw = config_dict(cfg)
    if with_tasks:
        raw["eval"] = {"interval": 2, "tasks": [{"name": "prose", "kind": "bpb", "path": eval_files["bpb"]},
                                                {"kind": "cloze", "path": eval_files["cloze"]}]}
    return raw


def test_evaluation_during_training_leaves_the_losses_unchanged(tmp_path, tmp_path_factory, eval_files):
    base = _losses_and_evals(_train_raw(tmp_path_factory, eval_files, False))
    raw = _train_raw(tmp_path_factory, eval_files, True)
    raw["log"] = {"dir": str(tmp_path / "logs"), "tensorboard": False}
    losses, evals = _losses_and_evals(raw)
    assert losses == base[0] and not base[1]
    assert sorted(evals) == [2, 4]
    assert set(evals[4]) == {"eval/prose/bits_per_byte", "eval/prose/byte_perplexity", "eval/prose/word_perplexity",
                             "eval/prose/token_perplexity", "eval/cloze/acc", "eval/cloze/perplexity"}
    rows = [json.loads(line) for line in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
    ev = [r for r in rows if "loss" not in r]
    assert [(r["step"], r["tokens"]) for r in ev] == [(2, 2 * 8 * 16), (4, 4 * 8 * 16)]
    assert ev[-1]["eval/prose/bits_per_byte"] == evals[4]["eval/prose/bits_per_byte"]
    # the report plots them against tokens
    from pretrain.report import eval_series, read_metrics

    series = eval_series(read_metrics(tmp_path / "logs"))
    assert series["prose/bits_per_byte"] == [(256, evals[2]["eval/prose/bits_per_byte"]),
                                             (512, evals[4]["eval/prose/bits_per_byte"])]


@pytest.mark.slow
def test_evaluation_during_pipeline_parallel_training(tmp_path_factory, eval_files):
    one = _losses_and_evals(_train_raw(tmp_path_factory, eval_files, True))
    base = run_distributed(2, _losses_and_evals, _train_raw(tmp_path_factory, eval_files, False, pp=2))
    with_eval = run_distributed(2, _losses_and_evals, _train_raw(tmp_path_factory, eval_files, True, pp=2))
    assert with_eval[0][0] == base[0][0]  # same losses with and without evaluation
    assert with_eval[0][1] == with_eval[1][1]  # every rank knows the figures
    for step, figures in one[1].items():
        for k, v in figures.items():
            assert with_eval[0][1][step][k] == pytest.approx(v, rel=1e-4), (step, k)


def test_bad_eval_config_fails_at_start(tmp_path, tmp_path_factory):
    from pretrain.config import check

    cfg = tiny_config({"eval.tasks": [{"kind": "bpb", "path": str(tmp_path / "missing.jsonl")}],
                       "eval.interval": -1})
    with pytest.raises(ConfigError) as e:
        check(cfg, 1)
    msg = str(e.value)
    assert "eval.interval = -1" in msg and "missing.jsonl not found" in msg and "needs data.tokenizer" in msg

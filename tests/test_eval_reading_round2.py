"""How `pretrain eval` reads its task files and holds its requests (a hostile probe's findings, round 2):

- JSONL lines end at "\\n" only (``str.splitlines`` also cut at U+2028, U+2029, U+0085, \\x0c ... that a JSON
  line may hold unescaped: one item became two "not JSON" ones, and every line number after it was wrong), and a
  UTF-8 BOM at the start is dropped: the items are the rows lm-eval's ``json`` loader reads;
- a task's ``limit`` counts the items the model scores (``--limit 5`` scored 1 item when 4 of the first 5 had a
  choice longer than the window), and every reason names the file and its line (not "item 1");
- files are read as a stream (a 100 MB file with ``--limit 3`` was read, decoded and split whole), a line or a
  ``.txt`` document past ``MAX_ITEM_BYTES`` is set aside unread, and a document's rolling windows are worked out
  when scored (a 10 MB document was 125,000 request lists at once; with ``stride = 1``, a list per token);
- a path that is not a regular file (/dev/zero, a FIFO, a folder, a link to /dev/zero) says what it is (it said
  "not found").
"""
from __future__ import annotations

import gzip
import inspect
import json
import os
import random
import tracemalloc

import pytest

from curate.config import ConfigError
from pretrain.eval import tasks as tasks_mod
from pretrain.eval.metrics import task_metrics
from pretrain.eval.request_lists import DocumentRequests, PairRequests, Request
from pretrain.eval.requests import build_requests, encode_pair, item_pairs, prepare_task, rolling_windows
from pretrain.eval.tasks import EvalDataError, TaskSpec, parse_task_arg, read_items, task_specs_from_tables

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


def chars(text: str) -> list[int]:
    """A toy tokenizer: one token per character (ids from 3, the prefix token is 1)."""
    return [3 + ord(c) % 200 for c in text]


def choice_item(context: str, choices: list[str], label: int = 0) -> dict:
    return {"context": context, "choices": choices, "label": label}


def write_lines(path, lines: list[str], newline: str = "\n", encoding: str = "utf-8") -> str:
    path.write_bytes("".join(line + newline for line in lines).encode(encoding))
    return str(path)


# ------------------------------------------------------------------------------- lines, BOM, line numbers

SEPARATORS = ["\u2028", "\u2029", "\u0085"]  # legal unescaped in a JSON string; str.splitlines cuts there


def test_a_line_holding_u2028_u2029_or_u0085_is_one_item(tmp_path):
    rows = [{"text": f"The king spoke{sep}to the people of the land"} for sep in SEPARATORS]
    rows.append({"text": "The queen answered him with a smile"})
    f = write_lines(tmp_path / "seps.jsonl", [json.dumps(r, ensure_ascii=False) for r in rows] + ["{bad"])
    got = read_items(TaskSpec("seps", "cloze", f))
    assert got.items == rows and got.lines == [1, 2, 3, 4]
    assert got.skipped == 1 and got.problems == [f"{f}:5: not JSON (Expecting property name enclosed in double "
                                                 f"quotes: line 1 column 2 (char 1))"]


def test_a_form_feed_in_a_line_makes_one_bad_item_and_later_lines_keep_their_numbers(tmp_path):
    good = json.dumps({"text": "a b c"})
    f = write_lines(tmp_path / "ff.jsonl", [good, '{"text": "x\x0cy z"}', '{"text": "p\x1cq r"}', good])
    got = read_items(TaskSpec("ff", "cloze", f))
    assert got.lines == [1, 4] and got.skipped == 2  # (a raw control character is not JSON: set aside, once)
    assert [p.split(": ")[0] for p in got.problems] == [f"{f}:2", f"{f}:3"]


def test_a_utf8_bom_is_dropped_in_jsonl_gz_and_txt(tmp_path):
    rows = [{"text": "The king spoke to the people"}, {"text": "The queen answered"}]
    body = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (tmp_path / "b.jsonl").write_bytes(b"\xef\xbb\xbf" + body)
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(b"\xef\xbb\xbf" + body))
    (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbfOne document.\n")
    for name in ("b.jsonl", "b.jsonl.gz"):
        got = read_items(TaskSpec("b", "cloze", str(tmp_path / name)))
        assert got.items == rows and got.skipped == 0, name
    assert read_items(TaskSpec("b", "bpb", str(tmp_path / "b.txt"))).items == [{"text": "One document.\n"}]


def test_crlf_lines_blank_lines_and_a_last_line_without_newline(tmp_path):
    f = tmp_path / "crlf.jsonl"
    f.write_bytes(b'{"text": "a b"}\r\n\r\n   \r\n{"text": "c d"}\r\n["x"]\r\n{"text": "e f"}')
    got = read_items(TaskSpec("crlf", "cloze", str(f)))
    assert got.items == [{"text": "a b"}, {"text": "c d"}, {"text": "e f"}] and got.lines == [1, 4, 6]
    assert got.problems == [f"{f}:5: not a JSON object"]


def test_items_are_the_rows_lm_evals_json_loader_reads(tmp_path):
    """The same file through HF datasets' ``json`` builder (what lm-eval's ``dataset_path: json`` uses)."""
    datasets = pytest.importorskip("datasets")
    rows = [{"text": f"line {i}{sep}with a separator"} for i, sep in enumerate(SEPARATORS)]
    rows += [{"text": "a plain one"}, {"text": "\ufeffa BOM inside a text is kept"}]
    f = tmp_path / "same.jsonl"
    f.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows).encode())
    theirs = datasets.load_dataset("json", data_files={"test": str(f)}, split="test",
                                   cache_dir=str(tmp_path / "hf_cache"))
    ours = read_items(TaskSpec("same", "bpb", str(f)))
    assert ours.items == [{"text": r["text"]} for r in theirs] == rows


# ------------------------------------------------------------------------------- not a regular file

def _fifo(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("what", ["char device", "fifo", "folder", "link to /dev/zero", "link to nothing"])
def test_a_path_that_is_not_a_regular_file_says_what_it_is(tmp_path, what):
    if what == "char device":
        path, says = "/dev/zero", "is not a regular file (a character device)"
    elif what == "fifo":
        path, says = _fifo(tmp_path), "is not a regular file (a named pipe)"
    elif what == "folder":
        path, says = tmp_path / "dir.jsonl", "is not a regular file (a folder)"
        path.mkdir()
    elif what == "link to /dev/zero":
        path, says = tmp_path / "zero.jsonl", "is not a regular file (a character device, through a link)"
        path.symlink_to("/dev/zero")
    else:
        path, says = tmp_path / "gone.jsonl", "not found (a link to nothing)"
        path.symlink_to(tmp_path / "missing.jsonl")
    with pytest.raises(ConfigError) as e:
        parse_task_arg(f"bpb:{path}")
    assert f"eval file {path} {says}" in str(e.value)
    with pytest.raises(ConfigError, match="not a regular file|not found"):
        task_specs_from_tables([{"kind": "bpb", "path": str(path)}], "[[tasks]]")
    with pytest.raises(EvalDataError) as e:  # a spec made directly: read_items says it too, and never blocks
        read_items(TaskSpec("x", "bpb", str(path)))
    assert says in str(e.value)


# ------------------------------------------------------------------------------- limit counts items scored

def test_limit_counts_the_items_the_model_can_score_and_reasons_name_file_and_line(tmp_path):
    long = "x" * 40  # 41 tokens with its space: longer than the 16-token window
    lines = [json.dumps(choice_item("Q1", ["a", long])),    # 1: not scorable
             json.dumps(choice_item("Q2", ["b", "c"])),     # 2
             "",                                            # 3: blank
             json.dumps(choice_item("Q4", [long, "d"])),    # 4: not scorable
             json.dumps(choice_item("Q5", ["e", "f"])),     # 5
             json.dumps(choice_item("Q6", ["g", "h"])),     # 6
             json.dumps(choice_item("Q7", ["i", "j"])),     # 7: past the limit
             "{not json"]                                   # 8: past the limit: never read
    f = write_lines(tmp_path / "c.jsonl", lines)
    items, reqs, problems = prepare_task(TaskSpec("c", "choice", f, limit=3), chars, 1, window=16)
    assert [it["context"] for it in items.items] == ["Q2", "Q5", "Q6"] and items.lines == [2, 5, 6]
    assert items.skipped == 2 and not problems
    assert items.problems == [f"{f}:1: choice 1 is 41 tokens, longer than the model's 16-token window",
                              f"{f}:4: choice 0 is 41 tokens, longer than the model's 16-token window"]
    assert sorted({q.item for q in reqs}) == [0, 1, 2] and len(reqs) == 6
    # without a model (lm-eval task files without --checkpoint, an ablation's contamination check): the first N valid
    assert read_items(TaskSpec("c", "choice", f, limit=3)).lines == [1, 2, 4]


def test_limit_counts_scorable_cloze_items_and_unscorable_ones_are_named(tmp_path):
    lines = [json.dumps({"text": "a context " + "y" * 30}),  # a 31-token target: longer than 16
             json.dumps({"text": "   lonely"}),              # a context of only spaces: nothing to predict from
             json.dumps({"text": "the cat sat on the mat"}),
             json.dumps({"text": "the dog sat on the log"})]
    f = write_lines(tmp_path / "z.jsonl", lines)
    items, reqs, problems = prepare_task(TaskSpec("z", "cloze", f, limit=1), chars, 1, window=16)
    assert items.lines == [3] and len(reqs) == 1 and reqs[0].n_cont == 4  # " mat"
    assert items.problems[0] == f"{f}:1: the target is 31 tokens, longer than the model's 16-token window"
    assert items.problems[1].startswith(f"{f}:2: the context encodes to no token")


def test_no_scorable_item_is_an_error_naming_file_and_line(tmp_path):
    f = write_lines(tmp_path / "long.jsonl", [json.dumps(choice_item("Q", ["a" * 50, "b"]))])
    with pytest.raises(EvalDataError, match=f"first problem: {f}:1: choice 0 is 51 tokens"):
        prepare_task(TaskSpec("long", "choice", f), chars, 1, window=16)


def test_a_document_that_encodes_to_no_token_is_set_aside_not_silently_dropped(tmp_path):
    f = write_lines(tmp_path / "d.jsonl", [json.dumps({"text": "kept"}), json.dumps({"text": "\u200b"})])
    encode = lambda t: chars(t.replace("\u200b", ""))  # noqa: E731  (a normaliser that deletes it)
    items, reqs, _ = prepare_task(TaskSpec("d", "bpb", f), encode, 1, window=8)
    assert items.lines == [1] and items.problems == [f"{f}:2: the text encodes to no token"]
    n, _ = task_metrics("bpb", items.items, reqs, [(-1.0, False)] * len(reqs))
    assert n == 1


def test_build_requests_names_file_and_line_given_task_items(tmp_path):
    f = write_lines(tmp_path / "c.jsonl", ["", json.dumps(choice_item("Q", ["a", "b" * 30]))] +
                    [json.dumps(choice_item(f"Q{i}", ["a", "b"])) for i in range(3)])
    items = read_items(TaskSpec("c", "choice", f))
    _, problems = build_requests("choice", items, chars, 1, window=16)
    assert problems == [f"{f}:2: choice 1 is 31 tokens, longer than the model's 16-token window"]
    _, problems = build_requests("choice", items.items, chars, 1, window=16)  # a bare list: its 1-based index
    assert problems == ["item 1: choice 1 is 31 tokens, longer than the model's 16-token window"]


def test_few_shot_tasks_draw_their_examples_from_the_items_scored(tmp_path):
    lines = [json.dumps(choice_item(f"Q{i}", ["a", "b" * (40 if i % 3 == 0 else 1)])) for i in range(12)]
    f = write_lines(tmp_path / "c.jsonl", lines)
    items, reqs, problems = prepare_task(TaskSpec("c", "choice", f, shots=2, limit=5), chars, 1, window=16)
    assert items.lines == [2, 3, 5, 6, 8] and not problems
    for q in reqs:  # every example is one of the five items scored
        text = "".join(chr(t - 3) for t in q.tokens)
        assert all(int(w[1:]) in (1, 2, 4, 5, 7) for w in text.split() if w.startswith("Q"))


# ------------------------------------------------------------------------------- streaming, bounded memory

def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_reading_with_a_limit_streams_and_stops(tmp_path):
    f = tmp_path / "many.jsonl"
    f.write_bytes(b'{"text": "a b"}\n' * 1_500_000)  # 24 MB: read, decoded and split whole before
    got = {}
    peak = _peak(lambda: got.update(r=read_items(TaskSpec("many", "bpb", str(f), limit=3))))
    assert len(got["r"].items) == 3 and peak < 6 << 20, peak


def test_a_file_that_goes_bad_after_the_limit_is_read_up_to_it(tmp_path):
    good = "".join(json.dumps({"text": f"item {i} here"}) + "\n" for i in range(100_000)).encode()  # 2.8 MB
    f = tmp_path / "cut.jsonl.gz"
    f.write_bytes(gzip.compress(good)[:-12] + b"garbage!")  # a damaged end
    assert len(read_items(TaskSpec("cut", "bpb", str(f), limit=5)).items) == 5
    with pytest.raises(EvalDataError, match="cannot be decompressed"):  # an error, not a traceback
        read_items(TaskSpec("cut", "bpb", str(f)))


def test_a_line_over_the_item_cap_is_set_aside_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks_mod, "MAX_ITEM_BYTES", 1 << 20)
    big = json.dumps({"text": "word " * 1_000_000})  # 5 MB
    f = write_lines(tmp_path / "big.jsonl", [json.dumps({"text": "small one"}), big, json.dumps({"text": "last"})])
    got = {}
    peak = _peak(lambda: got.update(r=read_items(TaskSpec("big", "bpb", f))))
    r = got["r"]
    assert r.items == [{"text": "small one"}, {"text": "last"}] and r.lines == [1, 3]
    assert r.problems == [f"{f}:2: a line of {len(big):,} bytes or more: one item may hold at most 1,048,576 bytes "
                          f"(MAX_ITEM_BYTES; split a longer document into several)"]
    assert peak < 6 << 20, peak
    (tmp_path / "big.txt").write_text("word " * 300_000)
    with pytest.raises(EvalDataError, match=r"big.txt:1: a document of [\d,]+ bytes or more"):
        read_items(TaskSpec("big", "bpb", str(tmp_path / "big.txt")))


def test_a_task_holds_at_most_max_items(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks_mod, "MAX_ITEMS", 5)
    f = write_lines(tmp_path / "n.jsonl", [json.dumps({"text": f"t {i}"}) for i in range(8)])
    with pytest.raises(EvalDataError, match="more than 5 items, the most one task reads"):
        read_items(TaskSpec("n", "bpb", f))
    assert len(read_items(TaskSpec("n", "bpb", f, limit=5)).items) == 5


@pytest.mark.parametrize("n,window,stride", [(1, 4, 0), (4, 4, 0), (5, 4, 0), (37, 8, 0), (37, 8, 3), (37, 8, 8),
                                             (100, 16, 1), (9, 16, 5), (64, 16, 40), (33, 1, 0), (33, 2, 1)])
def test_document_windows_worked_out_from_their_index_equal_lm_evals(n, window, stride):
    tokens = list(range(100, 100 + n))
    docs = DocumentRequests(7, window, stride)
    docs.add(0, tokens)
    docs.add(1, tokens[: n // 2 + 1])
    ours = [(q.tokens[:len(q.tokens) - q.n_cont], q.tokens[len(q.tokens) - q.n_cont:]) for q in docs if q.item == 0]
    reference = [(a[:len(a)], b) for a, b in rolling_windows(tokens, 7, window, stride)]
    assert ours == reference
    utils = pytest.importorskip("lm_eval.utils")
    context_len = 1 if stride == 0 else window - min(stride, window) + 1
    theirs = [utils.make_disjoint_window(w) for w in utils.get_rolling_token_windows(
        token_list=tokens, prefix_token=7, max_seq_len=window, context_len=context_len)]
    assert [(a + b, len(b)) for a, b in theirs] == [(q.tokens, q.n_cont) for q in docs if q.item == 0]
    items, choices, n_cont = docs.columns()
    assert items.tolist() == [q.item for q in docs] and choices.tolist() == [q.choice for q in docs]
    assert n_cont.tolist() == [q.n_cont for q in docs] and docs.lengths().tolist() == [len(q.tokens) for q in docs]
    assert docs[-1] == list(docs)[-1] and docs[1:3] == list(docs)[1:3]


def test_a_long_document_with_a_small_stride_holds_its_tokens_once():
    """300,000 tokens, window 32, stride 1: 300,000 windows of 33 tokens, which were 300,000 lists (~150 MB)."""
    text = "".join(random.Random(0).choice("abcdefgh ") for _ in range(300_000))
    got = {}
    peak = _peak(lambda: got.update(r=build_requests("bpb", [{"text": text}], chars, 1, window=32, stride=1)))
    reqs, problems = got["r"]
    assert not problems and len(reqs) == 300_000 - 32 + 1 and peak < 12 << 20, peak
    assert sum(reqs.columns()[2]) == 300_000  # every token predicted once
    q = reqs[12345]
    assert len(q.tokens) == 33 and q.n_cont == 1 and q.tokens == [1, *chars(text)][12345 + 32 - 32:12345 + 32 + 1][-33:]


def test_pair_requests_show_the_model_what_whole_pairs_show_it():
    """A pair keeps the last ``window + 1`` tokens of context and continuation: the rows the model reads
    (``score.pack_rows``) are those of the whole pair."""
    from pretrain.eval.score import pack_rows

    rng = random.Random(1)
    words = ["a", "bb", "ccc", "dddd"]
    items = [choice_item(" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))),
                         [" ".join(rng.choice(words) for _ in range(rng.randint(1, 2))) for _ in range(3)])
             for _ in range(40)]
    window = 12
    reqs, problems = build_requests("choice", items, chars, 1, window=window)
    whole = [Request(ctx + cont, len(cont), i, c) for i, it in enumerate(items)
             for c, (ctx, cont) in enumerate(encode_pair(chars, a, b, 1) for a, b in item_pairs("choice", it))]
    assert not problems and isinstance(reqs, PairRequests) and len(reqs) == len(whole)
    for mine, full in zip(reqs, whole):
        assert (mine.n_cont, mine.item, mine.choice) == (full.n_cont, full.item, full.choice)
        assert len(mine.tokens) <= window + 1
        for a, b in zip(pack_rows([mine], window, window), pack_rows([full], window, window)):
            assert a.tolist() == b.tolist()


def test_metrics_from_request_lists_and_score_arrays_equal_the_plain_ones():
    import numpy as np

    from pretrain.eval.score import Scores

    rng = random.Random(2)
    docs = [{"text": " ".join("x" * rng.randint(1, 6) for _ in range(rng.randint(1, 40)))} for _ in range(20)]
    reqs, _ = build_requests("bpb", docs, chars, 1, window=8)
    lls = [(-rng.random() * 5, rng.random() < 0.5) for _ in range(len(reqs))]
    plain = [Request(q.tokens, q.n_cont, q.item, q.choice) for q in reqs]
    assert task_metrics("bpb", docs, reqs, Scores(np.array(lls, dtype=float))) == task_metrics("bpb", docs, plain, lls)
    items = [choice_item(f"q{i}", ["a", "bb", "ccc"], i % 3) for i in range(15)]
    reqs, _ = build_requests("choice", items, chars, 1, window=8)
    lls = [(-rng.random() * 5, False) for _ in range(len(reqs))]
    plain = [Request(q.tokens, q.n_cont, q.item, q.choice) for q in reqs]
    order = list(range(len(plain)))
    rng.shuffle(order)  # the plain requests in any order: an item's choices are told by their index
    assert task_metrics("choice", items, reqs, lls) == task_metrics(
        "choice", items, [plain[i] for i in order], [lls[i] for i in order])


def test_scoring_a_request_list_equals_scoring_its_requests():
    import torch

    from pretrain.eval.run import _single_process_parts
    from pretrain.eval.score import score_requests

    class Bigram(torch.nn.Module):  # a deterministic causal "model": logits from the current token
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(210, 210)

        def forward(self, x):
            return self.emb(x)

    torch.manual_seed(0)
    parts = _single_process_parts(Bigram(), torch.device("cpu"))
    docs = [{"text": "the quick brown fox " * k} for k in (1, 3, 7)]
    reqs, _ = build_requests("bpb", docs, chars, 1, window=16)
    kw = dict(window=16, vocab_size=210, micro_batch=4, n_micro=1, device=torch.device("cpu"))
    lazy = score_requests(parts, reqs, **kw)
    plain = score_requests(parts, list(reqs), **kw)
    assert list(lazy) == list(plain) and len(lazy) == len(reqs)
    n, m = task_metrics("bpb", docs, reqs, lazy)
    assert n == 3 and m == task_metrics("bpb", docs, list(reqs), list(plain))[1]


# ------------------------------------------------------------------------------- the command (needs run.py's
# prepare_tasks to call requests.prepare_task, and --write-lm-eval-tasks to write the items scored)

def _run_py_prepares_in_one_pass() -> bool:
    from pretrain.eval import run

    return "prepare_task(" in inspect.getsource(run.prepare_tasks)


needs_run_py = pytest.mark.skipif(not _run_py_prepares_in_one_pass(),
                                  reason="pretrain/eval/run.py's prepare_tasks does not call prepare_task yet")


@needs_run_py
def test_command_limit_scores_n_items_and_lm_eval_tasks_hold_the_same(tmp_path, tmp_path_factory, capsys):
    from pretrain.cli import main as pretrain_main
    from tests.test_eval import eval_checkpoint

    ckpt = eval_checkpoint(tmp_path_factory)  # a 64-token window
    long = " ".join(["and then the long road went on"] * 20)
    lines = [json.dumps(choice_item(f"Question {i}: the weather is", ["fine", long] if i % 2 else ["fine", "bad"]))
             for i in range(1, 11)]
    f = write_lines(tmp_path / "c.jsonl", lines)
    out = tmp_path / "r.json"
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"choice:{f}:c", "--limit", "3", "--output",
                          str(out), "--quiet"]) == 0
    res = json.loads(out.read_text())["tasks"]["c"]
    assert res["n"] == 3 and res["skipped"] == 3  # lines 1, 3, 5 set aside; 2, 4, 6 scored
    err = capsys.readouterr().err
    assert f"{f}:1: choice 1 is" in err and "item 1" not in err
    lm = tmp_path / "lm"
    assert pretrain_main(["eval", "--checkpoint", ckpt, "--task", f"choice:{f}:c", "--limit", "3",
                          "--write-lm-eval-tasks", str(lm)]) == 0
    written = [json.loads(line) for line in (lm / "c.jsonl").read_text().splitlines()]
    assert written == [json.loads(lines[i - 1]) for i in (2, 4, 6)]

"""Every per-document cost bounded: the map stages' CPU limit holds inside C code (a watched child process),
extract's time limit cannot be swallowed by an ``except Exception``, page shapes the parsers take super-linear
time on are bounded before them, and spaCy's tokenizer never sees a run it is quadratic on."""
from __future__ import annotations

import time

import pyarrow as pa
import pytest

import curate.stages
from curate.stages.normalize import Normalize
from curate.chain import STAGE_TIMEOUT, StageChain, apply_isolated
from curate.stage_watch import Sandbox, available
from curate.stages.base import BatchContext
from tests.hostile import cost_inputs
from curate.extract.depth import parsed_depth
from tests.cost_stages import Spin, SpinUnmarked

needs_fork = pytest.mark.skipif(not available(), reason="needs os.fork")


def _table(texts):
    return pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts})


@needs_fork
@pytest.mark.parametrize("cls", [Spin, SpinUnmarked])
def test_a_document_stuck_in_c_code_is_set_aside_as_stage_timeout(cls):
    texts = [f"document {i} with words" for i in range(8)]
    texts[5] += " SPIN"
    box = Sandbox(lambda t, name, params: cls(name))
    try:
        start = time.monotonic()
        kept, dropped, errors, _ = apply_isolated("spin", cls("spin"), _table(texts), BatchContext(),
                                                  lambda table, ctx: box.apply(("spin", "spin", "{}"), table, 0.3))
        took = time.monotonic() - start
    finally:
        box.close()
    assert kept.column("id").to_pylist() == [f"d{i}" for i in range(8) if i != 5]
    assert dropped.column("id").to_pylist() == ["d5"]
    assert dropped.column("reason").to_pylist() == [STAGE_TIMEOUT]
    assert "CPU seconds" in dropped.column("error")[0].as_py()
    assert errors == {}  # a timeout is not an error of the stage
    assert took < 60


@needs_fork
def test_stage_chain_runs_map_stages_under_the_limit(tmp_path, monkeypatch):
    """Through ``StageChain`` as a task runs it: the stage named in the pipeline, the limit from its spec."""
    from curate.contracts import StepOutput
    from curate.pipeline import StageSpec

    monkeypatch.setitem(curate.stages.STAGES, "spin", "tests.cost_stages:Spin")
    spec = StageSpec("spin", "spin", {}, stage_timeout_s=0.3)
    step = StepOutput(stages=(spec,), root=str(tmp_path), out_dir=str(tmp_path / "data"),
                      drop_dir=str(tmp_path / "dropped"), format="arrow", keep_dropped="full")
    chain = StageChain(step, "t0")
    texts = ["fine text"] * 3 + ["SPIN here"] + ["fine text"] * 2
    chain.run(_table(texts), "b0")
    marker = chain.marker("k", [], docs=len(texts))
    counts = chain.counts["spin"]
    assert counts.kept == 5 and counts.dropped == {STAGE_TIMEOUT: 1}
    assert chain.sandbox is None and marker.outputs


def test_pipeline_key_checked():
    from curate.config import ConfigError
    from curate.pipeline import parse_pipeline

    raw = {"pipeline": {"output": "o", "stage_timeout_s": -1}, "sources": [{"path": "x.jsonl"}],
           "stages": [{"type": "normalize"}]}
    with pytest.raises(ConfigError, match="stage_timeout_s"):
        parse_pipeline(raw)
    raw["pipeline"]["stage_timeout_s"] = 1e-7  # under what the watcher measures: a limit that did not hold
    with pytest.raises(ConfigError, match="at least 0.05"):
        parse_pipeline(raw)
    raw["pipeline"]["stage_timeout_s"] = 7
    assert parse_pipeline(raw).stages[0].stage_timeout_s == 7.0


@pytest.mark.parametrize("value", [1e-320, 1e-7, -1.0, float("nan"), 1e9])
def test_an_extract_timeout_the_timer_cannot_hold_is_refused(value):
    """setitimer rounds to microseconds: 1e-320 s was a timer of 0, which disarms it, so every page ran
    unlimited; such a value is refused at start, naming the key."""
    from curate.extract.stage import Params

    with pytest.raises(ValueError, match="timeout_s"):
        Params(timeout_s=value)
    assert Params(timeout_s=0).timeout_s == 0 and Params(timeout_s=0.01).timeout_s == 0.01


# --- extract ------------------------------------------------------------------------------------------

def _extract_table(pages):
    return pa.table({"id": [f"p{i}" for i in range(len(pages))], "url": [""] * len(pages),
                     "content_type": ["text/html"] * len(pages), "text": pages})


def test_extract_timeout_is_not_swallowed_by_an_engine(monkeypatch):
    """An engine (a parser wrapper) catching ``Exception`` around a call that runs out of time: the page is
    still set aside as extract_timeout, and not handed to another engine without a limit."""
    from curate.extract import blocks, rules
    from curate.extract.stage import Extract

    calls = []

    def swallowing(data, url="", **kw):  # the engine passes model= and comments=
        try:
            while True:  # the time runs out in here
                sum(range(1000))
        except Exception:  # noqa: BLE001 - what a library may do
            pass
        calls.append("after")
        return rules.extract_resiliparse(data.decode())

    blocks.warm_blocks("")  # the stage warms the engine before it arms the limit: done here, with the real one
    monkeypatch.setattr(blocks, "extract_blocks_utf8", swallowing)
    stage = Extract("extract", Extract.Params(timeout_s=0.3))
    result = stage.apply(_extract_table(["<html><body><p>" + "words " * 50 + "</p></body></html>"]))
    assert result.dropped.column("reason").to_pylist() == ["extract_timeout"]
    assert calls == []


@pytest.mark.parametrize("name", sorted(cost_inputs.HTML))
def test_hostile_pages_parse_in_bounded_time(name):
    """Each hostile page shape goes through the extract stage well inside its time limit (the raw shapes take
    lexbor seconds to minutes): the bound is applied before any parser."""
    from curate.extract.shape import bound_shape, deepest_open
    from curate.extract.stage import Extract

    page = cost_inputs.HTML[name]()
    out, _, _ = bound_shape(page.encode())
    assert deepest_open(out) <= 256
    # the tree lexbor builds (html, body, a text node), not the scan's model; a table's implied tbody and tr are
    # not in the scan's model: at most one more element per table or row
    assert parsed_depth(out) <= (256 if b"<table" not in out else 2 * 256) + 3
    stage = Extract("extract", Extract.Params(timeout_s=20))
    start = time.process_time()
    result = stage.apply(_extract_table([page]))
    assert time.process_time() - start < 15  # without the bound: 12 s to minutes (benchmarks/worst_case_cost.py)
    assert result.kept.num_rows + result.dropped.num_rows == 1
    assert "extract_timeout" not in result.dropped.column("reason").to_pylist()


def test_a_page_of_more_blocks_than_any_real_page_goes_to_the_rules_engine():
    """The feature matrix grows with the blocks (400,000 one-letter paragraphs took 2.3 GB and 8 s); past
    ``MAX_BLOCKS`` the page is read by the rules engine, whose cost does not."""
    from curate.extract.blocks import extract_blocks_utf8
    from curate.extract.features import MAX_BLOCKS, features
    from curate.extract.rules import extract_resiliparse

    page = "<html><body><p>" + "real words of the page " * 20 + "</p>" + "<p>a" * (MAX_BLOCKS + 1) + "</body></html>"
    assert features(page, stripped=True) is None
    assert extract_blocks_utf8(page.encode()) == extract_resiliparse(page)
    fewer = page.replace("<p>a", "", 2)  # MAX_BLOCKS blocks in all: classified
    assert features(fewer, stripped=True).features.shape[0] == MAX_BLOCKS


def test_a_selects_tags_are_left_out_only_past_its_bound():
    from curate.extract.shape import MAX_SELECT_TAGS, bound_shape

    select = "<SeLeCt name=c>" + "<option>o" * MAX_SELECT_TAGS + "</select>"
    page = f"<html><body><p>text</p>{select}<p>after</p></body></html>".encode()
    assert bound_shape(page) == (page, 0, 0)  # a long country list stays
    big = page.replace(b"<option>o</select>", b"<option>o<option>o<OPTION>o</select>")
    assert bound_shape(big) == (page.replace(b"<option>o</select>", b"<option>ooo</select>"), 2, 0)
    # what ends a select for the tree builder ends the count: an input, a textarea, another select
    for end in (b"<input name=q>", b"<textarea>", b"<select>"):
        ended = page.replace(b"<option>o" * 10, b"<option>o" * 5 + end + b"<option>o" * 5, 1)
        assert bound_shape(ended.replace(b"<option>o</select>", b"<option>o<option>o</select>"))[1] == 0


@pytest.mark.parametrize("name", ["html", "body", "HTML", "Body"])
def test_attributes_merged_across_repeated_html_or_body_tags_are_bounded(name):
    """A second ``<html>`` / ``<body>`` start tag opens nothing: the tree builder adds its attributes to the
    element already open, so all such tags count as one element's attributes (40,000 merged took lexbor 2.7 s,
    growing with their square)."""
    import re

    from curate.extract.shape import MAX_ATTRIBUTES, bound_shape

    tags = "".join(f"<{name} " + " ".join(f"a{i}_{j}=v" for j in range(100)) + f"></{name}>" for i in range(50))
    page = f"<html lang=en><body class=post><p>text</p>{tags}<p>after</p></body></html>".encode()
    out, left_out, cut = bound_shape(page)
    merged = re.findall(rb"<" + name.encode() + rb"( [^>]*)?>", out)
    kept = sum(m.count(b"=") for m in merged)
    assert kept <= MAX_ATTRIBUTES and cut >= 40 and left_out == 0
    assert b"<p>text</p>" in out and b"<p>after</p>" in out and b"<html lang=en><body class=post>" in out
    # a real page's pair of tags (a template that writes <body> twice) stays as it is
    real = b"<html lang=en><head><title>t</title></head><body class=a><body class=b id=c><p>x</p>" + b"<br>" * 20
    assert bound_shape(real) == (real, 0, 0)


def test_real_page_shapes_are_left_alone():
    from curate.extract.shape import bound_shape

    page = ("<html><body>" + "<div class=x><ul>" + "<li><a href=/a>x</a>" * 300 + "</ul>"
            + "<p>unclosed paragraph " * 400 + "<table>" + "<tr><td>a<td>b" * 300 + "</table>"
            + "<p>" + "<ruby>漢<rp>(<rt>kan<rp>)<rb>字<rt>ji</ruby>" * 300  # ruby annotations, ends left out
            + "<select>" + "<optgroup label=g><option>a<option>b" * 300 + "</select></div></body></html>")
    assert bound_shape(page.encode())[0] == page.encode()


# --- words ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(cost_inputs.TEXT))
def test_hostile_texts_through_the_heuristic_filters(name):
    from curate.stages.c4_quality import C4Quality
    from curate.stages.gopher_quality import GopherQuality
    from curate.stages.gopher_repetition import GopherRepetition

    text = cost_inputs.TEXT[name]()
    for stage in (GopherQuality("x"), GopherRepetition("x"),
                  C4Quality("x", C4Quality.Params(words="regex", split_paragraph=False)),
                  C4Quality("x", C4Quality.Params(split_paragraph=False))):  # spaCy's sentences
        start = time.process_time()
        stage.check(text, {})
        # "。" * 100000 never finished before; "." * 100000 + "x" took the regex splitter minutes
        assert time.process_time() - start < 15
    start = time.process_time()
    Normalize("x").apply(pa.table({"id": ["t"], "text": [text]}))
    assert time.process_time() - start < 15  # one run of 100,000 combining marks: 19 s of NFC before


def test_a_long_run_of_combining_marks_is_made_stream_safe():
    """UAX #15's Stream-Safe Text Format: U+034F after every 30 non-starters of a longer run, nothing else
    changed; the normalizations then take linear time."""
    import unicodedata

    from curate.stages.normalize import normalize_text
    from curate.text.stream_safe import CGJ, stream_safe

    real = ["Tiếng Việt có dấu", "ཧཱུྃ བཀྲ་ཤིས", "Ä ä u\u0308 e\u0301", "Zalgo-ish ḁ̸̢̛͎̯̮͔̈́̎̂͐", "plain ascii"]
    for text in real:
        assert stream_safe(text) is text
    run = "x" + "\u0301\u0316" * 40 + "y"  # 80 marks
    safe = stream_safe(run)
    assert safe.replace(CGJ, "") == run and safe.count(CGJ) == 2  # after the 30th and the 60th
    assert [len(part) for part in safe[1:-1].split(CGJ)] == [30, 30, 20]
    assert stream_safe("a" + "\u0301" * 30) == "a" + "\u0301" * 30  # 30 is within the limit
    # its NFC is the NFC of each 30-mark piece: every mark kept, canonically ordered within the piece
    nfc = unicodedata.normalize("NFC", safe)
    assert sorted(nfc.replace(CGJ, "")) == sorted(unicodedata.normalize("NFC", run))
    big = "a" + "\u0301\u0316" * 200_000
    start = time.process_time()
    out = normalize_text(big)
    assert time.process_time() - start < 5 and len(out) > 400_000 and out.count(CGJ) == 400_000 // 30
    # characters that become marks only under NFKC/NFKD (the half-width voiced sound mark U+FF9E -> U+3099)
    from curate.stages.normalize import Params

    kana = "a" + "\uff9e\u0334" * 100_000
    for form in ("NFKC", "NFKD"):
        start = time.process_time()
        normalize_text(kana, Params(normalization=form))
        assert time.process_time() - start < 5, form  # 80,000 such characters took 5 s


def test_long_chunks_keep_their_tokens_where_spacy_is_linear():
    from curate.text.spacy_words import SpacyWords

    words = SpacyWords("en")
    text = "plain words " * 50 + "https://example.com/" + "a" * 300 + " end."
    assert words.tokens(text)[:100] == ("plain words " * 50).split()
    assert words.tokens("。" * 1000) == ["。"] * 1000


@needs_fork
def test_a_document_that_crashes_the_stage_process_is_set_aside():
    """A segfault in C code on one document no longer takes the task (and its retries) down: the watched child
    dies, the document is found by halving and set aside as stage_error saying how the process ended."""
    import os

    from tests.cost_stages import Crash

    texts = [f"fine {i}" for i in range(6)]
    texts[2] += " CRASH"
    box = Sandbox(lambda t, name, params: Crash(name))
    try:
        kept, dropped, errors, _ = apply_isolated("crash", Crash("crash"), _table(texts), BatchContext(),
                                                  lambda table, ctx: box.apply(("crash", "crash", "{}"), table, 30))
        pid = box.pid
    finally:
        box.close()
    assert dropped.column("id").to_pylist() == ["d2"] and kept.num_rows == 5
    assert dropped.column("reason").to_pylist() == ["stage_error"]
    assert "signal 11" in dropped.column("error")[0].as_py()
    assert pid is None or not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"


@needs_fork
def test_the_child_ends_with_its_sandbox():
    import gc
    import os

    box = Sandbox(lambda t, name, params: Spin(name))
    box.apply(("spin", "spin", "{}"), _table(["a", "b"]), 5)
    pid = box.pid
    del box
    gc.collect()
    assert not os.path.exists(f"/proc/{pid}")  # killed and reaped


@needs_fork
def test_the_watched_child_runs_one_blas_thread():
    """A map stage works one document at a time and its limit is the child's CPU time: BLAS threads spinning
    beside it would count there, so the child runs numpy's BLAS on one thread whatever the machine has."""
    from tests.cost_stages import BlasThreads

    box = Sandbox(lambda t, name, params: BlasThreads(name))
    try:
        result = box.apply(("blas", "blas", "{}"), _table(["a", "b"]), 30)
    finally:
        box.close()
    assert result.kept.num_rows == 2
    assert result.counters["blas_threads"] == 1

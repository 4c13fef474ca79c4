"""``curate extractor train`` on hostile gold files: fields of the wrong JSON type (tracebacks after training),
gold whose main content is empty or matches nothing (a model that keeps nothing, written with status 0), and
``--out``, which defaulted to the shipped model every run loads."""
from __future__ import annotations

import hashlib
import html as H
import json
import re
from pathlib import Path

import numpy as np
import pytest

from curate.cli import main as curate_main
from curate.extract.training import train as T

ROOT = Path(__file__).resolve().parents[1]
WARC = ROOT / "pipelines" / "sample" / "web-pages-87.warc.gz"
SHIPPED = ROOT / "curate" / "extract" / "models" / "extract_blocks.json"
QUICK = ["--folds", "0", "--epochs", "1", "--hidden", "4,4", "--limit", "4"]


def _strip(h: str) -> str:
    h = re.sub(r"(?s)<(script|style).*?</\1>", " ", h)
    return re.sub(r"\s+", " ", H.unescape(re.sub(r"<[^>]+>", " ", h))).strip()


@pytest.fixture(scope="module")
def pages():
    from curate.readers import read_file

    return [(d["url"], d["text"] or "") for kind, d, *_ in read_file(str(WARC), "warc") if kind == "doc"][:12]


@pytest.fixture(scope="module")
def shipped_digest():
    digest = hashlib.sha256(SHIPPED.read_bytes()).hexdigest()
    yield digest
    assert hashlib.sha256(SHIPPED.read_bytes()).hexdigest() == digest, "the shipped model was written"


def write_gold(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def good_records(pages) -> list[dict]:
    return [{"id": str(i), "url": u, "main_content": _strip(h)[:3000], "page_type": "article"}
            for i, (u, h) in enumerate(pages)]


def run_train(tmp_path, gold: Path, *extra: str) -> int:
    return curate_main(["extractor", "train", "--warc", str(WARC), "--gold", str(gold), *extra])


def assert_refused(capsys, rc: int, *messages: str) -> str:
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    for m in messages:
        assert m in err, err
    return err


@pytest.mark.parametrize("change, message", [
    ({"page_type": 5}, "field page_type must be a string or null, not an integer"),
    ({"lang": ["x"]}, "field lang must be a string or null, not a list"),
    ({"id": [1]}, "field id must be a string or an integer, not a list"),
    ({"id": True}, "field id must be a string or an integer, not true/false"),
    ({"id": ""}, "field id is empty"),
    ({"url": 5}, "field url must be a string, not an integer"),
    ({"url": " "}, "field url is empty"),
    ({"main_content": None}, "field main_content must be a string, not null"),
    ({"main_content": {"text": "x"}}, "field main_content must be a string, not an object"),
    ({"source_url": 3}, "field source_url must be a string or null, not an integer"),
    ({"source_url": "http://[::1"}, "field source_url 'http://[::1' is not a URL"),
    ({"page_type": "all"}, 'page_type "all" is the name of the overall figure'),
])
def test_gold_field_of_the_wrong_type_is_named_with_its_line(tmp_path, capsys, pages, shipped_digest, change,
                                                              message):
    records = good_records(pages)
    records[2] = {**records[2], **change}
    gold = write_gold(tmp_path / "gold.jsonl", records)
    out = tmp_path / "m.json"
    assert_refused(capsys, run_train(tmp_path, gold, "--out", str(out), *QUICK), f"{gold}:3: ", message)
    assert not out.exists()


def test_gold_line_that_is_not_a_record_or_lacks_fields(tmp_path, capsys, pages):
    records = good_records(pages)
    for bad, message in [([1, 2], "not a gold record: a list, not an object"),
                         ({"id": "x", "url": "u"}, "not a gold record: no main_content")]:
        gold = write_gold(tmp_path / "gold.jsonl", records[:1] + [bad] + records[1:])
        assert_refused(capsys, run_train(tmp_path, gold, "--out", str(tmp_path / "m.json"), *QUICK),
                       f"{gold}:2: {message}")


def test_the_same_url_twice_in_a_gold_file_is_refused(tmp_path, capsys, pages):
    records = good_records(pages)
    gold = write_gold(tmp_path / "gold.jsonl", records + [{**records[1], "main_content": "other text"}])
    assert_refused(capsys, run_train(tmp_path, gold, "--out", str(tmp_path / "m.json"), *QUICK),
                   f"{gold}:{len(records) + 1}: url", "has a record already, on line 2")


def test_wrong_types_are_found_before_any_page_is_cut_into_blocks(tmp_path, pages, monkeypatch):
    """The type errors were tracebacks after the whole training had run."""
    def no_build(*a, **k):
        raise AssertionError("build reached")

    monkeypatch.setattr(T, "build", no_build)
    records = good_records(pages)
    records[-1]["lang"] = ["x"]
    with pytest.raises(ValueError, match=r"gold\.jsonl:12: not a gold record: field lang"):
        T.load_pages(str(WARC), str(write_gold(tmp_path / "gold.jsonl", records)))


def test_gold_with_empty_main_content_everywhere_writes_no_model(tmp_path, capsys, pages, shipped_digest):
    gold = write_gold(tmp_path / "gold.jsonl", [{**r, "main_content": ""} for r in good_records(pages)])
    out = tmp_path / "m.json"
    assert_refused(capsys, run_train(tmp_path, gold, "--out", str(out), *QUICK),
                   "main_content holds no word for any of the 12 pages", "no main content to learn from")
    assert not out.exists()


def test_gold_that_covers_no_block_of_its_pages_writes_no_model(tmp_path, capsys, pages, shipped_digest):
    """Gold text with words, but not the pages' (the gold file of another WARC): every block labelled 0."""
    gold = write_gold(tmp_path / "other_gold.jsonl",
                      [{**r, "main_content": "zyxw qwert plonk " * 20} for r in good_records(pages)])
    out = tmp_path / "m.json"
    assert_refused(capsys, run_train(tmp_path, gold, "--out", str(out), *QUICK),
                   f"{gold}: no block of its", "is main content", "no model written")
    assert not out.exists()


def test_too_few_blocks_of_either_class_is_refused():
    with __import__("gzip").open(ROOT / "tests" / "data" / "extract" / "wcxb_pages.jsonl.gz", "rt") as f:
        pages = [T.Page(d["id"], d["page_type"], d["html"], d["gold"], "wcxb:" + d["id"])
                 for d in map(json.loads, f)][:3]
    ds = T.build(pages, log=lambda *_: None)
    assert T.label_problem(ds, ["some/wcxb.jsonl"]) is None
    all_content = T.Dataset(**{**ds.__dict__, "y": np.ones_like(ds.y)})
    assert "0 labelled the rest: at least 10 of each" in T.label_problem(all_content)
    none = T.Dataset(**{**ds.__dict__, "y": np.zeros_like(ds.y)})
    assert T.label_problem(none, ["some/wcxb.jsonl"]).startswith("some/wcxb.jsonl: no block of its")
    few = np.zeros_like(ds.y)
    few[np.flatnonzero(ds.tokens > 0)[:3]] = 1.0
    assert "3 blocks labelled main content" in T.label_problem(T.Dataset(**{**ds.__dict__, "y": few}))


def test_out_is_required_and_never_defaults_to_the_shipped_model(tmp_path, capsys, pages, shipped_digest):
    gold = write_gold(tmp_path / "gold.jsonl", good_records(pages))
    with pytest.raises(SystemExit) as e:
        run_train(tmp_path, gold, *QUICK)
    assert e.value.code == 2 and "the following arguments are required: --out" in capsys.readouterr().err
    # the shipped model is written only when --out names it; here a good quick run writes where it is told
    out = tmp_path / "mine.json"
    assert run_train(tmp_path, gold, "--out", str(out), *QUICK) == 0
    from curate.extract import model as em

    assert em.load(out).meta["trained_on"].startswith("4 pages of gold.jsonl")


def test_outputs_that_clash_are_refused_at_start(tmp_path, capsys, pages, shipped_digest):
    gold = write_gold(tmp_path / "gold.jsonl", good_records(pages))
    same = tmp_path / "m.json"
    assert_refused(capsys, run_train(tmp_path, gold, "--out", str(same), "--report", str(same), *QUICK),
                   "--out and --report are the same file")
    assert_refused(capsys, run_train(tmp_path, gold, "--out", str(same), "--folds", "2", "--oof", str(gold)),
                   "is an input of this command")
    assert_refused(capsys, run_train(tmp_path, gold, "--out", str(tmp_path), *QUICK), "--out", "is a folder")
    assert not same.exists()


def test_two_gold_files_of_the_same_set_name_are_refused(tmp_path, capsys, pages):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ga = write_gold(tmp_path / "a" / "gold.jsonl", good_records(pages[:6]))
    gb = write_gold(tmp_path / "b" / "gold.jsonl", good_records(pages[6:]))
    rc = curate_main(["extractor", "train", "--warc", str(WARC), "--gold", str(ga), "--warc", str(WARC),
                      "--gold", str(gb), "--out", str(tmp_path / "m.json"), *QUICK])
    assert_refused(capsys, rc, "the same set name 'gold'")

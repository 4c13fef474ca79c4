"""The ``extract`` stage: quality on real pages against trafilatura, pass-through, drop reasons, timeout."""
import time
from pathlib import Path

import pyarrow as pa
import pytest

from curate.readers import read_file
from curate.schema import BASE_SCHEMA, HTML, PLAIN, documents_to_table
from curate.stages import extract as ex
from curate.stages import stage_class
from curate.stages.boilerplate import _PHRASE_RE, _core, _phrase_match, clean, normalize_chars
from curate.stages.extract import REASONS, Extract, Params
from curate.stages.extract_eval import load_pages, reference_engines, score

DATA = Path(__file__).resolve().parent / "data" / "extract"
WARC = DATA / "web-pages-87.warc.gz"
EXPECTED = DATA / "expected_snippets.json"

# The goal from the issue: precision and recall each no more than this below trafilatura's.
GOAL_MARGIN = 0.03


@pytest.fixture(scope="module")
def pages():
    return load_pages(WARC, EXPECTED)


@pytest.fixture(scope="module")
def scores(pages):
    out = {name: score(name, fn, pages) for name, fn in reference_engines().items()}
    print("\nextraction quality on trafilatura 1.1.0's real-world pages (83 pages, 198 must / 193 must-not snippets)")
    for s in out.values():
        print("  " + s.row())
    return out


@pytest.fixture(scope="module")
def warc_table():
    rows = [item[1] for item in read_file(str(WARC), "warc") if item[0] == "doc"]
    return documents_to_table(rows)


def _table(rows):
    return documents_to_table([{"id": r[0], "text": r[1], "source": "t", "url": "", "content_type": r[2]} for r in rows])


# ------------------------------------------------------------------------------------ quality

def test_default_engine_quality_on_real_pages(scores):
    traf, plain, ours = scores.values()
    table = "\n".join(s.row() for s in scores.values())
    # the line cleanup and pre-pass must be worth their cost over plain resiliparse main-content extraction
    assert ours.precision >= plain.precision + 0.15, table
    assert ours.recall >= plain.recall + 0.05, table
    # the distance to trafilatura that the current default engine holds (the goal is GOAL_MARGIN,
    # see the xfail test below)
    assert ours.precision >= traf.precision - 0.10, table
    assert ours.recall >= traf.recall - 0.05, table
    assert ours.empty_pages == 0, table


@pytest.mark.xfail(strict=True, reason="known gap: precision ~0.08 and recall ~0.035 below trafilatura on "
                                       "trafilatura's own regression pages; see curate/stages/extract.py")
def test_default_engine_within_goal_margin_of_trafilatura(scores):
    traf, _, ours = scores.values()
    assert ours.precision >= traf.precision - GOAL_MARGIN
    assert ours.recall >= traf.recall - GOAL_MARGIN


def test_phrase_index_gives_the_same_answers_as_the_full_regex(pages):
    from resiliparse.extract.html2text import extract_plain_text

    checked = 0
    for p in pages[::3]:
        for line in normalize_chars(extract_plain_text(p.html)).split("\n"):
            s = _core(line)
            if s and len(s) <= 100:
                checked += 1
                assert _phrase_match(s, True) == (_PHRASE_RE.fullmatch(s) is not None), s
    assert checked > 1000


# ------------------------------------------------------------------------------------ line cleanup

def test_cleanup_drops_comment_form_share_and_related_blocks_but_keeps_content():
    article = ("The committee met on Tuesday to discuss the new budget, which raises spending on schools.\n\n"
               "Finding a Fix\n\n"
               "Members agreed that the proposal needs more work before the vote next month.")
    code = "def tearDownClass(cls):\n    cls.browser.quit()\n    super().tearDownClass()\n\ndef test_qunit(self):\n    pass"
    page = (article + "\n\nShare this:\n\nTwitter\n\nFacebook\n\nTags: budget, schools\n\n"
            + code + "\n\nRelated Posts\n\nBudget talks stall\n\nSchools face cuts\n\nMayor responds\n\n"
            "Leave a Reply\n\nYour email address will not be published. Required fields are marked *\n\n"
            "This site uses Akismet to reduce spam. Learn how your comment data is processed.\n\n"
            "© 2019 Example News. All rights reserved.")
    out = clean(page)
    assert out.startswith(article)
    assert "cls.browser.quit()" in out and "def test_qunit(self):" in out
    for junk in ("Share this", "Twitter", "Tags:", "Related Posts", "Budget talks stall", "Leave a Reply",
                 "Required fields", "Akismet", "All rights reserved"):
        assert junk not in out, junk


def test_cleanup_menu_runs_go_short_lists_stay():
    menu = "\n".join(["Home", "News", "Sport", "Culture", "Travel", "Weather", "Podcasts", "Contact"])
    body = "A long enough sentence that is plainly the content of this page, and it ends here."
    ingredients = "\n".join(["  • 200 g Zucker", "  • 3 Eier", "  • 1 Prise Salz"])
    out = clean(menu + "\n\n" + body + "\n\n" + ingredients)
    assert "Sport" not in out and "Culture" not in out
    assert body in out and "200 g Zucker" in out and "1 Prise Salz" in out


def test_cleanup_normalises_invisible_characters():
    assert normalize_chars("Wäh\u00adrend Sie\u00a0über") == "Während Sie über"
    assert normalize_chars("geprüft") == "geprüft"  # decomposed u + U+0308 becomes NFC
    assert normalize_chars("plain ascii") == "plain ascii"


# ------------------------------------------------------------------------------------ the stage

def test_plain_text_rows_pass_through_untouched():
    text = "Already plain text.\n\nLeave a Reply\n\nShare this:"  # boilerplate-looking but not HTML: untouched
    t = _table([("a", text, PLAIN), ("b", "<html><body><p>" + "Real words here. " * 10 + "</p></body></html>", HTML)])
    res = Extract("extract", Params()).apply(t)
    kept = {r["id"]: r for r in res.kept.to_pylist()}
    assert kept["a"]["text"] == text and kept["a"]["content_type"] == PLAIN
    assert kept["b"]["content_type"] == PLAIN and "<p>" not in kept["b"]["text"]
    assert res.kept.schema.field("text").type == pa.large_string()


@pytest.mark.parametrize("engine", ["resiliparse", "trafilatura"])
def test_empty_page_is_dropped_with_no_main_text(engine):
    pages = ["<html><body></body></html>", "<html><head><title>x</title></head><body><nav><a href='/'>Home</a></nav></body></html>", ""]
    t = _table([(f"p{i}", h, HTML) for i, h in enumerate(pages)])
    res = Extract("extract", Params(engine=engine)).apply(t)
    assert res.kept.num_rows == 0
    assert res.dropped["reason"].to_pylist() == ["no_main_text"] * 3
    assert res.dropped["stage"].to_pylist() == ["extract"] * 3
    assert res.dropped["text"].to_pylist() == pages  # set-aside rows keep their HTML


def test_timeout_stops_a_slow_engine_and_the_shard_goes_on(monkeypatch):
    good = "<html><body><p>" + "Useful content sentence. " * 20 + "</p></body></html>"

    def slow(html, url="", cleanup=True, comments=True):
        if "SLOW" in html:
            while True:  # CPU-bound pure Python, never returns by itself
                pass
        return "x" * 100

    monkeypatch.setattr(ex, "extract_resiliparse", slow)
    t = _table([("slow", "<html><body>SLOW</body></html>", HTML), ("ok", good, HTML)])
    start = time.perf_counter()
    res = Extract("extract", Params(timeout_s=0.2)).apply(t)
    assert time.perf_counter() - start < 2.0
    assert res.dropped["id"].to_pylist() == ["slow"]
    assert res.dropped["reason"].to_pylist() == ["extract_timeout"]
    assert res.kept["id"].to_pylist() == ["ok"]
    time.sleep(0.3)  # the timer is disarmed: no stray alarm after apply()


def test_timeout_stops_trafilatura_on_a_pathological_page():
    huge = "<html><body>" + "".join(f"<div><p>Paragraph {i} with some words in it, quite a few words.</p></div>"
                                    for i in range(20000)) + "</body></html>"  # ~1.6 MB: trafilatura needs seconds
    t = _table([("huge", huge, HTML)])
    start = time.perf_counter()
    res = Extract("extract", Params(engine="trafilatura", timeout_s=0.25)).apply(t)
    assert time.perf_counter() - start < 1.5
    assert res.dropped["reason"].to_pylist() == ["extract_timeout"]


def test_deeply_nested_page_cannot_stall_the_c_extractor():
    # resiliparse's main-content rules are O(elements x depth) in C, where no signal reaches: 16,000
    # nested <div>s took 5 s before the depth guard, 150,000 take minutes.
    deep = "<html><body>" + "<div>" * 150_000 + "Some text at the bottom of a very deep page. " * 5 + "</body></html>"
    t = _table([("deep", deep, HTML)])
    start = time.perf_counter()
    res = Extract("extract", Params(timeout_s=0)).apply(t)
    assert time.perf_counter() - start < 3.0
    assert res.kept.num_rows == 1 and "very deep page" in res.kept["text"][0].as_py()


def test_extractor_exception_and_oversized_html_are_set_aside(monkeypatch):
    calls = []

    def flaky(html, url="", cleanup=True, comments=True):
        calls.append(html)
        if "BOOM" in html:
            raise RuntimeError("parser bug")
        return "fine main text " * 10

    monkeypatch.setattr(ex, "extract_resiliparse", flaky)
    big = "<html><body>" + "ü" * 600 + "</body></html>"  # 1,226 UTF-8 bytes but only 626 characters
    t = _table([("boom", "<p>BOOM</p>", HTML), ("big", big, HTML), ("ok", "<p>ok</p>", HTML)])
    res = Extract("extract", Params(max_html_bytes=1000)).apply(t)
    assert dict(zip(res.dropped["id"].to_pylist(), res.dropped["reason"].to_pylist())) == {
        "boom": "extract_error", "big": "html_too_large"}
    assert res.kept["id"].to_pylist() == ["ok"]
    assert big not in calls  # too large: never handed to the extractor


def test_iso_8859_1_page_decoded_by_the_reader_gives_correct_text(warc_table):
    rows = warc_table.filter(pa.compute.match_substring(warc_table["url"], "landwirt.com")).to_pylist()
    assert len(rows) == 1 and "Überwachung" in rows[0]["text"]  # the reader used the page's meta charset
    res = Extract("extract", Params()).apply(documents_to_table(rows))
    out = res.kept["text"].to_pylist()[0]
    for s in ("Überwachung der somatischen Zellen", "tragbaren Ultraschall-Geräten", "Kotkonsistenz"):
        assert s in out
    assert "\ufffd" not in out and "Ã" not in out and "Ã¼" not in out


def test_conservation_on_a_real_warc_with_mixed_rows(warc_table):
    extra = _table([("plain-1", "A plain text document that needs no extraction at all.", PLAIN),
                    ("empty-1", "<html><body><div></div></body></html>", HTML),
                    ("big-1", "<html><body>" + "<p>x</p>" * 400_000 + "</body></html>", HTML)])
    table = pa.concat_tables([warc_table.select(BASE_SCHEMA.names).cast(BASE_SCHEMA), extra])
    res = Extract("extract", Params()).apply(table)
    assert res.kept.num_rows + res.dropped.num_rows == table.num_rows
    ids_in = sorted(table["id"].to_pylist())
    assert sorted(res.kept["id"].to_pylist() + res.dropped["id"].to_pylist()) == ids_in
    assert set(res.dropped["reason"].to_pylist()) <= set(REASONS)
    assert {"empty-1": "no_main_text", "big-1": "html_too_large"}.items() <= dict(
        zip(res.dropped["id"].to_pylist(), res.dropped["reason"].to_pylist())).items()
    assert set(res.kept["content_type"].to_pylist()) == {PLAIN}
    assert res.kept.num_rows >= 85  # the real pages all have main text


def test_params_are_checked_and_the_stage_is_registered():
    assert stage_class("extract") is Extract
    with pytest.raises(ValueError, match="engine"):
        Params(engine="justext")
    with pytest.raises(ValueError, match="max_html_bytes"):
        Params(max_html_bytes=0)

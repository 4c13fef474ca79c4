"""The ``extract`` stage: quality on real pages against trafilatura, pass-through, drop reasons, timeout."""
import time
from pathlib import Path

import pyarrow as pa
import pytest

from curate.readers import read_file
from curate.schema import BASE_SCHEMA, HTML, PLAIN, documents_to_table
from curate.extract import blocks as ex
from curate.stages import stage_class
from curate.extract.boilerplate import _PHRASE_RE, _core, _phrase_match, clean, normalize_chars
from curate.extract.stage import REASONS, Extract, Params
from curate.extract.training.evaluate import load_pages, reference_engines, score

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
    traf, plain, ours, blocks = scores.values()
    table = "\n".join(s.row() for s in scores.values())
    # the learned default engine, never trained on these pages (mostly German and English news): far
    # cleaner than plain resiliparse, about as complete (0.886 / 0.894 with the model trained on WCXB and
    # Readability; 0.922 / 0.889 with the one before, trained on WCXB only)
    assert blocks.precision >= plain.precision + 0.15, table
    assert blocks.recall >= 0.85 and blocks.empty_pages <= 2, table
    # the line cleanup and pre-pass must be worth their cost over plain resiliparse main-content extraction
    assert ours.precision >= plain.precision + 0.15, table
    assert ours.recall >= plain.recall + 0.05, table
    # the distance to trafilatura that the current default engine holds (the goal is GOAL_MARGIN,
    # see the xfail test below)
    assert ours.precision >= traf.precision - 0.10, table
    assert ours.recall >= traf.recall - 0.05, table
    assert ours.empty_pages == 0, table


@pytest.mark.xfail(strict=True, reason="known gap: precision ~0.08 and recall ~0.035 below trafilatura on "
                                       "trafilatura's own regression pages; see curate/extract/")
def test_default_engine_within_goal_margin_of_trafilatura(scores):
    traf, _, ours, _ = scores.values()
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
    article = ("<html><head><title>Council approves budget</title></head><body><nav><a href='/'>Home</a> "
               "<a href='/news'>News</a></nav><article><h1>Council approves budget</h1>"
               + "<p>The council approved the new budget on Tuesday, raising spending on schools and roads. </p>" * 4
               + "</article></body></html>")
    t = _table([("a", text, PLAIN), ("b", article, HTML)])
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

    def slow(html, url="", **kw):  # the stage hands the engine the stripped page's UTF-8 bytes
        if b"SLOW" in html:
            while True:  # CPU-bound pure Python, never returns by itself
                pass
        return "x" * 100

    monkeypatch.setattr(ex, "extract_blocks_utf8", slow)
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


def _burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_deadline_holds_when_its_first_signal_is_swallowed():
    # CI saw the timer's exception land in a numba weakref finalizer, where Python prints and drops it:
    # trafilatura then ran on for seconds. The timer repeats, and a call that ran out of time is a timeout
    # even when it returns.
    from curate.extract.deadline import CpuDeadline, ExtractTimeout

    def swallow_once_then_burn():
        try:
            _burn(5)
        except ExtractTimeout:
            pass  # what a finalizer does with it
        _burn(5)
        return "finished"

    def swallow_and_return():
        try:
            _burn(5)
        except ExtractTimeout:
            return "partial"

    for fn in (swallow_once_then_burn, swallow_and_return):
        start = time.perf_counter()
        with CpuDeadline(0.1) as deadline, pytest.raises(ExtractTimeout):
            deadline.call(fn)
        assert time.perf_counter() - start < 2.0
    with CpuDeadline(0.5) as deadline:
        assert deadline.call(lambda: "quick") == "quick"  # the flag does not outlive its call


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

    def flaky(html, url="", **kw):
        calls.append(html.decode())
        if "BOOM" in calls[-1]:
            raise RuntimeError("parser bug")
        return "fine main text " * 10

    monkeypatch.setattr(ex, "extract_blocks_utf8", flaky)
    big = "<html><body>" + "ü" * 600 + "</body></html>"  # 1,226 UTF-8 bytes but only 626 characters
    t = _table([("boom", "<p>BOOM</p>", HTML), ("big", big, HTML), ("ok", "<p>ok</p>", HTML)])
    res = Extract("extract", Params(max_html_bytes=1000)).apply(t)
    assert dict(zip(res.dropped["id"].to_pylist(), res.dropped["reason"].to_pylist())) == {
        "boom": "extract_error", "big": "html_too_large"}
    assert res.kept["id"].to_pylist() == ["ok"]
    assert not any("ü" * 600 in c for c in calls)  # too large: never handed to the extractor


def test_iso_8859_1_page_decoded_by_the_reader_gives_correct_text(warc_table):
    rows = warc_table.filter(pa.compute.match_substring(warc_table["url"], "landwirt.com")).to_pylist()
    assert len(rows) == 1 and "Überwachung" in rows[0]["text"]  # the reader used the page's meta charset
    res = Extract("extract", Params()).apply(documents_to_table(rows))
    out = res.kept["text"].to_pylist()[0]
    # three kept passages with non-ASCII letters (the decoding is checked, not which paragraphs the model keeps)
    for s in ("Überwachung der somatischen Zellen", "Fett-Eiweiß-Verhältnis", "Kotkonsistenz"):
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


# ------------------------------------------------------------------------------------ the learned engine

import gzip
import json

from curate.extract import model as em
from curate.extract.blocks import extract_blocks
from curate.extract.features import features
from curate.extract.strip import strip_html
from curate.extract.training.labels import tokens, word_f1, word_prf

WCXB = DATA / "wcxb_pages.jsonl.gz"


@pytest.fixture(scope="module")
def wcxb_pages():
    with gzip.open(WCXB, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _has(text: str, snippet: str) -> bool:
    """The snippet's words, in order, in the text (punctuation, case and invisible characters aside: a gold
    text copied from the page keeps its soft hyphens, "avail\xadable", which the engines drop)."""
    snippet, text = normalize_chars(snippet), normalize_chars(text)
    return " " + " ".join(tokens(snippet)) + " " in " " + " ".join(tokens(text)) + " "


def test_word_f1_is_the_benchmark_definition():
    assert word_f1("The cat sat", "the CAT sat") == 1.0
    p, r, f = word_prf("a a b", "a b c")  # multisets: overlap {a, b} = 2
    assert (p, r) == (2 / 3, 2 / 3) and abs(f - 2 / 3) < 1e-9
    assert word_f1("", "gold words") == 0.0 and word_f1("", "") == 1.0
    assert word_f1("東京 は", "東京 は 晴れ") == pytest.approx(0.8)  # \w+ is Unicode: CJK runs are tokens


def test_shipped_model_loads_and_matches_the_features():
    m = em.load()
    assert m.mean.size == features("<html><body><p>Some text here.</p></body></html>").features.shape[1]
    assert 0 < m.threshold < 1
    assert "cv" in m.meta.get("report", {}) or m.meta  # training figures travel with the model


@pytest.mark.parametrize("damage", ["truncated", "not_json", "wrong_format", "wrong_features", "bad_shape", "nan"])
def test_damaged_model_file_is_refused_with_a_clear_error(tmp_path, damage):
    text = em.DEFAULT_MODEL.read_text(encoding="utf-8")
    d = json.loads(text)
    if damage == "truncated":
        bad = text[: len(text) // 2]
    elif damage == "not_json":
        bad = "\x80\x81 binary junk"
    elif damage == "wrong_format":
        bad = json.dumps({**d, "format": "something-else"})
    elif damage == "wrong_features":
        bad = json.dumps({**d, "features": "0123456789abcdef"})
    elif damage == "bad_shape":
        d["layers"][1]["w"] = d["layers"][1]["w"][:-1]
        bad = json.dumps(d)
    else:
        d["mean"][0] = float("nan")
        bad = json.dumps(d).replace("NaN", "NaN")
    path = tmp_path / "model.json"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(em.ModelError, match="model"):
        em.load(path)
    # a pipeline naming that model fails at config time, not on the first shard
    with pytest.raises(em.ModelError):
        Params(model=str(path))
    with pytest.raises(em.ModelError, match="not found"):
        em.load(tmp_path / "missing.json")


def test_real_pages_of_every_type_extract_well(wcxb_pages):
    """21 WCXB development pages (3 per page type): the default engine's text against the reviewed gold."""
    by_type = {}
    for p in wcxb_pages:
        out = extract_blocks(p["html"])
        # the gold text's soft hyphens aside (one service page keeps 60, copied from the page: "avail\xadable"
        # is two words to word F1, and the engines give "available")
        f = word_f1(out, normalize_chars(p["gold"]))
        by_type.setdefault(p["page_type"], []).append(f)
        found = sum(_has(out, s) for s in p["must"])
        if f > 0:  # one forum page (4607) comes out empty: its posts sit in a layout the model does not read
            assert found >= len(p["must"]) - 1, (p["id"], [s for s in p["must"] if not _has(out, s)])
    means = {k: sum(v) / len(v) for k, v in by_type.items()}
    print("word F1 by type on the test pages:", {k: round(v, 3) for k, v in sorted(means.items())})
    assert set(means) == {"article", "collection", "documentation", "forum", "listing", "product", "service"}
    assert sum(f < 0.5 for v in by_type.values() for f in v) <= 2, by_type
    assert sum(means.values()) / len(means) >= 0.8, means
    for t in ("article", "documentation", "service", "listing", "collection"):
        assert means[t] >= 0.85, means


def test_multi_megabyte_page_with_inline_scripts_extracts(wcxb_pages):
    """Real pages of several MB are mostly inline scripts and JSON: cut out before the size limit."""
    page = next(p for p in wcxb_pages if p["page_type"] == "article")
    blob = json.dumps({"state": [{"id": i, "body": "x" * 200} for i in range(10_000)]})  # ~2.4 MB of JSON
    script = "<script>window.__STATE__ = " + blob + ";</script><style>" + ".a{color:red}" * 20_000 + "</style>"
    html = page["html"].replace("</head>", script + "</head>", 1) if "</head>" in page["html"] else script + page["html"]
    assert len(html.encode()) > 2_500_000 and len(strip_html(html).encode()) < 200_000
    res = Extract("extract", Params()).apply(_table([("big", html, HTML)]))
    assert res.kept.num_rows == 1, res.dropped.to_pylist()
    out = res.kept["text"][0].as_py()
    assert word_f1(out, page["gold"]) >= 0.8 and "__STATE__" not in out and "color:red" not in out
    # still too large once scripts are gone: set aside, never parsed
    res = Extract("extract", Params(max_html_bytes=len(strip_html(html).encode()) - 1)).apply(_table([("big", html, HTML)]))
    assert res.dropped["reason"].to_pylist() == ["html_too_large"]


def test_headings_list_items_and_table_rows_are_lines_of_their_own():
    nav = "".join(f"<li><a href='/{i}'>Section {i}</a></li>" for i in range(12))
    html = ("<html><head><title>Growing tomatoes at home</title></head><body><nav><ul>" + nav + "</ul></nav>"
            "<main><article><h1>Growing tomatoes at home</h1>"
            "<p>Tomatoes need at least six hours of direct sun every day, and steady watering keeps the fruit from "
            "splitting. Plant them deep: roots grow along the buried stem, which makes the plant sturdier.</p>"
            "<h2>What you need</h2><ul><li>Seedlings from a nursery or your own seeds</li>"
            "<li>A pot of at least twenty litres</li><li>Stakes or a cage for support</li></ul>"
            "<table><tr><th>Variety</th><th>Days to harvest</th></tr><tr><td>Cherry</td><td>sixty five</td></tr>"
            "</table><p>Feed the plants every two weeks once the first flowers appear, and pick the fruit when it "
            "is fully coloured but still firm, which is when the flavour is best.</p></article></main>"
            "<footer><p>Copyright Example Gardens. All rights reserved.</p></footer></body></html>")
    out = extract_blocks(html)
    lines = out.split("\n")
    assert "Tomatoes need at least six hours" in out and "Feed the plants every two weeks" in out
    for line in ("What you need", "A pot of at least twenty litres", "Stakes or a cage for support",
                 "Variety | Days to harvest", "Cherry | sixty five"):  # a table's row on one line, cells joined
        assert line in lines, (line, lines)


@pytest.mark.parametrize("lang", ["zh", "ja", "th", "ar"])
def test_non_latin_pages_extract_like_english_ones(lang):
    para = {
        "zh": "番茄每天需要至少六个小时的直射阳光，稳定的浇水可以防止果实开裂。种植时要深埋，根会沿着埋在土里的茎生长，使植株更加结实。",
        "ja": "トマトは毎日少なくとも六時間の直射日光を必要とし、安定した水やりで実の割れを防ぐことができます。深く植えると、埋めた茎に沿って根が伸び、株が丈夫になります。",
        "th": "มะเขือเทศต้องการแสงแดดโดยตรงอย่างน้อยหกชั่วโมงทุกวัน และการรดน้ำอย่างสม่ำเสมอช่วยป้องกันไม่ให้ผลแตก ควรปลูกให้ลึกเพราะรากจะงอกตามลำต้นที่ถูกฝังไว้ ทำให้ต้นแข็งแรงขึ้น",
        "ar": "تحتاج الطماطم إلى ست ساعات على الأقل من أشعة الشمس المباشرة كل يوم، والري المنتظم يمنع تشقق الثمار. ازرعها بعمق، فالجذور تنمو على طول الساق المدفونة، مما يجعل النبات أقوى.",
    }[lang]
    nav = "".join(f"<li><a href='/{i}'>{para[i:i + 3]}</a></li>" for i in range(0, 30, 3))
    paras = [f"{k + 1}) {para}" for k in range(4)]  # four paragraphs, not repeats of one text
    body = "".join(f"<p>{x}</p>" for x in paras)
    html = (f"<html lang='{lang}'><head><meta charset='utf-8'><title>{para[:12]}</title></head><body><header><nav><ul>"
            f"{nav}</ul></nav></header><main><article><h1>{para[:12]}</h1>{body}</article></main>"
            f"<footer><a href='/a'>{para[:4]}</a> <a href='/b'>{para[4:8]}</a></footer></body></html>")
    out = extract_blocks(html)
    gold = para[:12] + "\n" + "\n".join(paras)
    assert word_f1(out, gold) >= 0.9, out
    # the same page in a legacy encoding, decoded by the reader from its meta charset: the same text
    from curate.readers.text import decode as _decode

    legacy = {"zh": "gbk", "ja": "shift_jis", "th": "tis-620", "ar": "cp1256"}[lang]
    decoded, ok = _decode(html.replace("utf-8", legacy).encode(legacy), b"text/html", True)
    assert ok and extract_blocks(decoded) == out


def _write_warc(path, pages):
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter
    import io

    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=True)
        for p in pages:
            body = p["html"].encode("utf-8")
            head = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
            w.write_record(w.create_warc_record(f"https://wcxb.example/{p['id']}", "response",
                                                payload=io.BytesIO(body), http_headers=head))


def test_training_is_one_reproducible_command(tmp_path, wcxb_pages, capsys):
    from curate.extract.training import train as extract_train

    warc, gold = tmp_path / "pages.warc.gz", tmp_path / "gold.jsonl"
    _write_warc(warc, wcxb_pages)
    gold.write_text("".join(json.dumps({"id": p["id"], "url": f"https://wcxb.example/{p['id']}",
                                        "page_type": p["page_type"], "main_content": p["gold"]}) + "\n"
                            for p in wcxb_pages), encoding="utf-8")
    outs = []
    for run in range(2):
        out = tmp_path / f"model{run}.json"
        assert extract_train.main(["--warc", str(warc), "--gold", str(gold), "--out", str(out), "--folds", "2",
                                   "--epochs", "2", "--hidden", "16,16,8"]) == 0
        outs.append(out.read_text(encoding="utf-8"))
    printed = capsys.readouterr().out
    assert "cross-validated" in printed and "in-sample" in printed
    assert outs[0] == outs[1]  # same command, same model
    m = em.load(tmp_path / "model0.json")
    assert set(m.meta["report"]["cv"]) >= {"all", "article", "forum"}
    with pytest.raises(SystemExit):
        extract_train.main(["--help"])


def test_training_on_two_sets_folds_by_site_and_reports_both(tmp_path, wcxb_pages):
    from curate.extract.training import train as extract_train

    first, second = wcxb_pages[:12], wcxb_pages[12:]
    args = []
    for k, pages in enumerate((first, second)):
        warc, gold = tmp_path / f"set{k}.warc.gz", tmp_path / f"set{k}_gold.jsonl"
        _write_warc(warc, pages)
        # the second set as Readability's gold is written: a language, no page type
        extra = (lambda p: {"page_type": p["page_type"]}) if k == 0 else (lambda p: {"lang": "de"})
        gold.write_text("".join(json.dumps({"id": p["id"], "url": f"https://wcxb.example/{p['id']}",
                                            "main_content": p["gold"], **extra(p)}) + "\n" for p in pages),
                        encoding="utf-8")
        args += ["--warc", str(warc), "--gold", str(gold)]
    out, oof = tmp_path / "model.json", tmp_path / "oof.jsonl"
    assert extract_train.main(args + ["--out", str(out), "--oof", str(oof), "--folds", "3", "--epochs", "1",
                                      "--hidden", "8,8,4"]) == 0
    m = em.load(out)
    assert m.meta["trained_on"] == "21 pages of set0_gold.jsonl + set1_gold.jsonl"
    assert "other" in m.meta["report"]["cv"] and "article" in m.meta["report"]["cv"]
    rows = [json.loads(line) for line in oof.read_text(encoding="utf-8").splitlines()]
    assert [r["set"] for r in rows] == ["set0_gold"] * 12 + ["set1_gold"] * 9
    with pytest.raises(SystemExit, match="one --gold per --warc"):
        extract_train.main(args[:-2] + ["--out", str(out)])


@pytest.mark.parametrize("flags, message", [
    (["--epochs", "0"], "--epochs 0"),  # was PyTorch's "Expected positive integer total_steps" after the features
    (["--hidden", "0"], "--hidden '0'"),  # was a model of 0-unit layers, written
    (["--hidden", "100000000"], "1 to 4096 units"),  # was a 150 GB allocation
    (["--hidden", "a,b"], "integers separated by commas"),
    (["--threshold", "2"], "--threshold 2.0"),  # was a model the stage refuses to load, written
    (["--dropout", "1"], "--dropout 1.0"),  # was a model trained on zeroed inputs, written
    (["--dropout", "nan"], "--dropout nan"),
    (["--weight-decay", "-1"], "--weight-decay -1.0"),
    (["--folds", "1"], "--folds 1"),
    (["--folds", "1000"], "more than the 21 sites"),  # was 1000 folds, most of them empty, for ever
    (["--folds", "0", "--oof", "x.jsonl"], "--oof"),
    (["--seed", "-1"], "--seed -1"),
    (["--limit", "-1"], "--limit -1"),
])
def test_training_flags_that_make_no_sense_stop_at_start(tmp_path, wcxb_pages, capsys, flags, message):
    from curate.extract.training import train as extract_train

    warc, gold = tmp_path / "pages.warc.gz", tmp_path / "gold.jsonl"
    _write_warc(warc, wcxb_pages)
    gold.write_text("".join(json.dumps({"id": p["id"], "url": f"https://wcxb.example/{p['id']}",
                                        "main_content": p["gold"]}) + "\n" for p in wcxb_pages), encoding="utf-8")
    out = tmp_path / "m.json"
    assert extract_train.main(["--warc", str(warc), "--gold", str(gold), "--out", str(out)] + flags) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("case, message", [
    ("gold_device", "not a regular file"),  # /dev/zero was read for ever
    ("gold_not_json", "gold.jsonl:1: not JSON"),
    ("gold_not_a_record", "gold.jsonl:2: not a gold record"),
    ("gold_not_utf8", "not UTF-8"),
    ("no_page_matches", "no page of"),  # was numpy's "need at least one array to concatenate"
    ("warc_missing", "No such file"),
])
def test_training_inputs_that_cannot_be_read_are_named(tmp_path, wcxb_pages, capsys, case, message):
    from curate.extract.training import train as extract_train

    warc, gold = tmp_path / "pages.warc.gz", tmp_path / "gold.jsonl"
    _write_warc(warc, wcxb_pages[:3])
    lines = [json.dumps({"id": p["id"], "url": f"https://wcxb.example/{p['id']}", "main_content": p["gold"]})
             for p in wcxb_pages[:3]]
    if case == "gold_not_json":
        lines[0] = lines[0][:-1]
    elif case == "gold_not_a_record":
        lines[1] = "[1, 2]"
    elif case == "no_page_matches":
        lines = [json.dumps({"id": "x", "url": "https://elsewhere.example/", "main_content": "text"})]
    gold.write_text("\n".join(lines) + "\n", encoding="utf-8")
    if case == "gold_not_utf8":
        gold.write_bytes(b"\xff\xfe" + gold.read_bytes())
    args = ["--warc", str(warc), "--gold", "/dev/zero" if case == "gold_device" else str(gold)]
    if case == "warc_missing":
        args[1] = str(tmp_path / "missing.warc.gz")
    assert extract_train.main(args + ["--out", str(tmp_path / "m.json"), "--folds", "0"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


# ------------------------------------------------------------------ pinned features, sizes of set-aside pages
import numpy as np  # noqa: E402

def test_block_features_of_real_pages_match_their_pins(wcxb_pages):
    # the shipped model reads these features: a faster feature code must give the same matrix
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_feature_pins", DATA / "make_feature_pins.py")
    pins_mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pins_mod)
    pins = json.loads((DATA / "feature_pins.json").read_text(encoding="utf-8"))
    assert len(pins) == len(wcxb_pages) == 21
    for p in wcxb_pages:
        got, want = pins_mod.digest(features(p["html"])), pins[p["id"]]
        assert {k: v for k, v in got.items() if k != "float_sums"} == \
            {k: v for k, v in want.items() if k != "float_sums"}, p["id"]
        if want["blocks"]:
            assert np.allclose(got["float_sums"], want["float_sums"], rtol=1e-5, atol=1e-5), p["id"]


def test_too_deep_counts_div_and_span_tags_like_the_regular_expression():
    import random
    import re

    from curate.extract.depth import too_deep, too_deep_utf8

    tag = re.compile(r"</?(?:div|span)\b", re.I)

    def by_regex(html, limit):
        marks = [m.group(0)[1] == "/" for m in tag.finditer(html)]
        exact = html.count("<div") + html.count("<span") + html.count("<DIV")
        return exact > limit and max(np.cumsum([-1 if c else 1 for c in marks]), default=0) > limit

    rng = random.Random(0)
    pieces = ["<div>", "</div>", "<DIV class=x>", "</Div >", "<span>", "</SPAN>", "<divx>", "<div-a>", "<spané>",
              "<dİv>", "<ſpan>", "</ſpan>", "<div\u00a0>", "x", "é", "<p>", "<", "</", "<divé", "<span", "<dIv>",
              "<SpAn>", "<DIV", "<div_", "<span1>", "</span\t>", "<Section>", "<s>", "<d", "<spanné>", "<sp"]
    for _ in range(300):
        html = "<div>" * rng.randint(0, 30) + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 120)))
        for limit in (3, 10, 25):
            assert too_deep(html, limit) == by_regex(html, limit), (html, limit)
            assert too_deep_utf8(html.encode("utf-8"), limit) == by_regex(html, limit), (html, limit)
    for f in (too_deep, lambda h, n: too_deep_utf8(h.encode("utf-8"), n)):
        assert f("<div>" * 300 + "x" + "</div>" * 300, 200)
        assert not f("<div>x</div>" * 300, 200)
        assert f("<div>é\U0001F600<dİv>" * 201, 200) and not f("<divé>" * 300, 200)


def test_the_shape_scans_div_and_span_counts_give_the_depth_scans_verdict():
    import random

    from curate.extract import depth
    from curate.extract.shape import bound_shape

    rng = random.Random(3)
    pieces = ["<div>", "</div>", "<DIV class=x>", "</Div >", "<span>", "</SPAN>", "<divx>", "<div-a>", "<spané>",
              "<dİv>", "<ſpan>", "</ſpan>", "<div\u00a0>", "x", "é", "<p>", "<", "</", "<divé", "<span", "<dIv>",
              "<SpAn>", "<div_", "<span1>", "</span\t>", "<Section>", "<s>", "<d", '<a title="<div>">', "<sp",
              "<b>", "</b>", "<img alt='</span>'>", "<!-- <div> -->", "<dıv>", " " * 50]
    # whole tags in ASCII, no "<" inside a tag: nothing to be unsure about
    plain = [p for p in pieces if p.isascii() and "=" not in p and "!" not in p and (p.count("<") == p.count(">"))]
    answered = 0
    for k in range(400):
        pool = plain if k % 2 else pieces
        html = "<div>" * rng.randint(0, 40) + "".join(rng.choice(pool) for _ in range(rng.randint(0, 300)))
        html += "<p>" + "text " * 250 + "</p>" + rng.choice(["", "<div", "<span", "<"])
        data = html.encode("utf-8")
        for limit in (3, 10, 25, 200):
            depth.remember_depth(b"", 0, 0, 0, 0, 0)  # forget: the verdict read from the page itself
            want = depth.too_deep_utf8(data, limit)
            out, left_out, cut = bound_shape(data)
            if out is data:
                answered += depth._KNOWN[0] is data
                assert depth.too_deep_utf8(data, limit) == want, (html, limit)
    assert answered >= 600  # most plain pages (4 limits each): the shape scan's counts were used


def test_pages_a_limit_sets_aside_have_their_size_in_the_stats(monkeypatch, tmp_path):
    script = "<script>" + "var a = 1;" * 3000 + "</script>"  # 30 kB cut before the size limit
    big = "<html><body>" + script + "<p>" + "word " * 400 + "</p></body></html>"
    slow_page = "<html><body><p>SLOW " + "text " * 50 + "</p></body></html>"
    t = _table([("big", big, HTML), ("small", "<p>" + "fine text " * 20 + "</p>", HTML)])
    res = Extract("extract", Params(max_html_bytes=1000)).apply(t)
    assert dict(zip(res.dropped["id"].to_pylist(), res.dropped["reason"].to_pylist()))["big"] == "html_too_large"
    assert res.counters == {"html_too_large_html_bytes": len(big),
                            "html_too_large_stripped_bytes": len(strip_html(big).encode())}
    assert len(strip_html(big)) < len(big) - 30000

    real = ex.extract_blocks_utf8

    def slow(html, url="", **kw):
        if b"SLOW" in html:
            while True:
                pass
        return real(html, url, **kw)

    monkeypatch.setattr(ex, "extract_blocks_utf8", slow)
    res = Extract("extract", Params(timeout_s=0.2)).apply(_table([("slow", slow_page, HTML)]))
    assert res.dropped["reason"].to_pylist() == ["extract_timeout"]
    assert res.counters == {"extract_timeout_html_bytes": len(slow_page),
                            "extract_timeout_stripped_bytes": len(slow_page)}


def test_stats_json_names_the_size_of_pages_set_aside_as_too_large(tmp_path):
    # a real run over real pages: stats.json's counters sum the sizes of the pages html_too_large set aside
    from curate.executors.local import LocalExecutor
    from curate.pipeline import load_pipeline
    from curate.runner import run_pipeline
    from curate.shards import read_shard

    out = tmp_path / "out"
    p = tmp_path / "p.toml"
    p.write_text(f'[pipeline]\noutput = "{out}"\nworkers = 1\n[[sources]]\npath = "{WARC}"\n'
                 f'[[stages]]\ntype = "extract"\nmax_html_bytes = 60000\n', encoding="utf-8")
    stats = run_pipeline(load_pipeline(p), LocalExecutor(1), progress=False)
    st = next(s for s in stats["stages"] if s["name"] == "extract")
    assert st["dropped"]["html_too_large"] >= 3
    manifest = json.loads((out / "manifest.json").read_text())
    rows = [r for e in manifest["dropped"] for r in read_shard(out / e["path"]).to_pylist()
            if r["reason"] == "html_too_large"]
    assert len(rows) == st["dropped"]["html_too_large"]
    assert st["counters"]["html_too_large_html_bytes"] == sum(len(r["text"].encode()) for r in rows)
    stripped = [len(strip_html(r["text"]).encode()) for r in rows]
    assert st["counters"]["html_too_large_stripped_bytes"] == sum(stripped) and min(stripped) > 60000
    assert json.loads((out / "stats.json").read_text())["stages"] == stats["stages"]


def test_title_overlap_counts_words_like_python_sets():
    import random
    import re

    from curate.extract.features import _title_overlap

    def by_sets(texts, title):
        tw = set(re.findall(r"\w+", title.lower()))
        out = np.zeros((len(texts), 2), dtype=np.float32)
        for i, t in enumerate(texts):
            bw = set(re.findall(r"\w+", t.lower()))
            if tw and bw and len(t) <= 300:
                out[i] = len(bw & tw) / len(bw), len(bw & tw) / len(tw)
        return out

    rng = random.Random(0)
    words = ["Hello", "hello", "WORLD", "wörld", "İstanbul", "ΣΑΣ", "σας", "东京", "_", "a_b", "12", "x" * 301, "",
             "\U0001F600", "-", "  ", "ﬁne", "Straße", "STRASSE", "a\x00b", "ǅemal", "Ａｂｃ", "ΑΒΓ"]
    # with and without the letters that lower-case in context or into two (counted in Python), a NUL in a
    # block, letters whose lower case the compiled scan meets for the first time (Cyrillic, Armenian, ...)
    for pool in (words, [w for w in words if w not in ("İstanbul", "ΣΑΣ")]):
        for _ in range(300):
            texts = [" ".join(rng.choice(pool) for _ in range(rng.randint(0, 8))) for _ in range(rng.randint(1, 12))]
            title = " ".join(rng.choice(pool) for _ in range(rng.randint(0, 5)))
            assert (_title_overlap(texts, title) == by_sets(texts, title)).all(), (texts, title)
    from curate.extract.features import _hashes, _word_hash
    some = ["hello", "東京", "\U0001F600x", "a" * 40]
    cps = np.frombuffer("\x00".join(some).encode("utf-32-le"), dtype=np.uint32)
    assert _hashes(cps, len(some)).tolist() == [_word_hash(w) for w in some]
    fresh = [chr(cp) + chr(cp + 1).upper() for cp in range(0x410, 0x44F, 2)] + ["Աբգ", "ԱԲԳ", "ⰀⰁ"]
    texts = [" ".join(fresh[i:i + 5]) for i in range(0, len(fresh), 3)] + ["y" * 299 + " Q", "z" * 300 + " Q"]
    title = " ".join(fresh[::2]) + " q"
    assert (_title_overlap(texts, title) == by_sets(texts, title)).all()


def test_lone_surrogates_parse_as_without_them():
    from curate.extract.blocks import extract_blocks
    from curate.extract.strip import utf8

    body = "<p>" + "A paragraph of main text that is long enough to be kept by the model. " * 4 + "</p>"
    html = f"<html><head><title>t</title></head><body><h1>Heading</h1>{body}{body}</body></html>"
    bad = html.replace("Heading", "Head\ud800ing")
    assert utf8(bad) is None and utf8(html) == html.encode()
    assert extract_blocks(bad) == extract_blocks(html) != ""


@pytest.mark.slow
def test_first_page_of_a_fresh_process_is_not_lost_to_numba_compiling(tmp_path):
    """An empty numba cache (a clean clone, a new machine): compiling the blocks engine's kernels takes
    seconds; the stage does it before arming the per-document timer, so the first page is kept."""
    import os
    import subprocess
    import sys

    script = f"""
import gzip, json
from curate.schema import HTML, documents_to_table
from curate.extract.stage import Extract, Params
with gzip.open({str(WCXB)!r}, "rt", encoding="utf-8") as f:
    page = json.loads(f.readline())
t = documents_to_table([{{"id": "a", "text": page["html"], "source": "s", "url": "", "content_type": HTML}}])
res = Extract("extract", Params(timeout_s=1.0)).apply(t)
print(res.kept.num_rows, res.dropped["reason"].to_pylist())
"""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "[]"], out.stdout


def test_both_stripping_scans_give_the_regular_expressions_text(wcxb_pages):
    import random

    from curate.extract.strip import strip_regex, strip_utf8

    rng = random.Random(1)
    pieces = ["<script>", "</script>", "<SCRIPT type=x>", "</Script >", "</script\t\n>", "<style>", "</style>", "<svg>",
              "</svg>", "<template>", "</TEMPLATE>", "<scripts>", "<script-x>", "<script", "</script", "<!--", "-->",
              "<!-->", "--", ">", "<", "x", "é", "中", "<ſcript>", "</ſcript>", "<scrİpt>", "</scrİpt>", "<scrıpt>",
              "</scrıpt>", "</SCRİPT>", "<ſtyle>", "</ſTYLE >", "</scr\x00ipt>", "\x00",
              "</script\u00a0>", "<scripté>", "<p>", "</", "<s", "<sv", "<tem", "\x1c", "</style\x1c>", "<!---->", " ",
              "\n", "<script/>", "\U0001F600", "<STYLE", "</svg\x0b>"]
    sure = 0
    for _ in range(20000):
        s = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 20)))
        want = strip_regex(s)
        assert strip_html(s) == want, s
        got = strip_utf8(s.encode())
        if got is not None:  # None: a non-ASCII character where re's Unicode rules decide; the caller uses str
            assert got == want.encode(), s
            sure += 1
    assert sure > 5000
    for p in wcxb_pages:
        want = strip_regex(p["html"])
        assert strip_html(p["html"]) == want, p["id"]
        assert strip_utf8(p["html"].encode()) == want.encode(), p["id"]
    assert strip_utf8(b"<p>\xff</p>") is None  # not UTF-8
    many = "".join(rng.choice(["<!---->", "<script>1</script>", "é", "<p>x</p>", " "]) for _ in range(30000))
    assert strip_utf8(many.encode()) == strip_regex(many).encode()  # thousands of matches: copied by a kernel


@pytest.mark.parametrize("unit", ["<template>", "<style>x<", "<!--", "<script ", "<script>a</scrip"])
def test_stripping_is_linear_in_unclosed_tags(unit):
    """Opening tags that are never closed: the regular expression reads to the end of the page at each one
    (20,000 ``<template>``: 84 s; 20,000 ``<!--``: 11 s); both scans read each byte a few times. The ``str``
    form is what a page whose "<" is followed by a non-ASCII letter takes in the stage."""
    import time

    from curate.extract.strip import strip_utf8

    page = "<html><body><ſ>" + unit * 20_000 + "</body></html>"
    strip_html("<p>warm</p>")
    strip_utf8(b"<p>warm</p>")
    start = time.process_time()
    assert strip_html(page) == page
    assert strip_utf8(page.encode()) is None  # the "<ſ": the stage takes the str form
    assert strip_utf8(page.replace("<ſ>", "").encode()) == page.replace("<ſ>", "").encode()
    assert time.process_time() - start < 5  # about 0.05 s; before: 11 s to minutes


def test_stage_reads_the_text_column_as_arrow_bytes(wcxb_pages):
    # a sliced table (Arrow offsets), string and large_string columns, several chunks, bytes that are not UTF-8
    page = next(p["html"] for p in wcxb_pages if "</head>" in p["html"] and "<p>" in p["html"])
    page = page.replace("<p>", "<p>Ünïcode ").replace("</head>", "<script>var x = '<p>not text</p>';</script></head>")
    want = Extract("extract", Params()).apply(_table([("a", page, HTML)])).kept["text"][0].as_py()
    assert want == extract_blocks(page) and "Ünïcode" in want and "not text" not in want
    t = _table([("x", "plain text", PLAIN), ("a", page, HTML), ("b", page.replace("<p", "<P"), HTML)])
    for table in (t.slice(1), pa.concat_tables([t.slice(0, 2), t.slice(2)]),
                  t.cast(t.schema.set(t.schema.get_field_index("text"), pa.field("text", pa.string(), False)))):
        res = Extract("extract", Params()).apply(table)
        assert res.kept["text"][res.kept["id"].to_pylist().index("a")].as_py() == want
        assert res.kept.schema == table.schema
    broken = pa.Array.from_buffers(pa.large_string(), 1, [None, pa.py_buffer(np.array([0, len(page.encode()) + 2]).tobytes()),
                                                           pa.py_buffer(b"\xff\xfe" + page.encode())])
    bad = _table([("bad", "", HTML)]).set_column(1, pa.field("text", pa.large_string(), False), broken)
    res = Extract("extract", Params()).apply(bad)  # decoded with replacement characters, not a crash
    assert res.kept["text"][0].as_py() == want


def test_open_graph_type_from_bytes_is_the_regular_expressions_on_the_text():
    import random

    from curate.extract.features import _og_type

    rng = random.Random(1)
    metas = ['<meta property="og:type" content="article">', "<META PROPERTY='OG:TYPE' CONTENT='Product'>",
             '<meta property="og:Type"\n\t content=website />', '"og:type": "video.movie"', "og:type content=",
             'og:type  content="blog" ', "oG:tYpE content=" + "x" * 600, "og:typ", "og:type\u00a0content=book",
             'og:type "content="profile"', "og:type " + " " * 700 + "content=article"]
    fill = ["<p>plain text</p>", "ünïcödé ", "東京の天気 ", "\U0001F600", "a" * 3000, "é" * 5000, ": :: og: type "]
    for _ in range(400):
        parts = [rng.choice(fill) for _ in range(rng.randint(0, 12))]
        for _ in range(rng.randint(0, 3)):
            parts.insert(rng.randint(0, len(parts)), rng.choice(metas))
        page = "".join(parts)
        assert _og_type(None, page.encode()) == _og_type(page, None), page[:200]
    # near the 20,000th character: a match that ends past it is not one
    for pad in range(19950, 20000, 3):
        page = "é" * pad + '<meta property="og:type" content="article">'
        assert _og_type(None, page.encode()) == _og_type(page, None)


def test_repeated_blocks_are_counted_as_a_counter_counts_them():
    import random
    from collections import Counter

    from curate.extract.features import _code_points, _repeats

    rng = random.Random(2)
    pool = ["Home", "home", "Share", "", "a\x00b", "東京", "\U0001F600", "x" * 500, "Read more", "Read more "]
    for _ in range(200):
        texts = [rng.choice(pool) for _ in range(rng.randint(1, 60))]
        counts = Counter(texts)
        n_chars, cps = _code_points(texts)
        assert _repeats(cps, n_chars).tolist() == [float(counts[t]) for t in texts]


def test_the_garbage_collector_is_paused_only_while_a_batch_is_extracted(monkeypatch):
    import gc

    seen = []

    def engine(html, url="", **kw):
        seen.append(gc.isenabled())
        if b"BOOM" in html:
            raise RuntimeError("parser bug")
        return "main text of the page " * 5

    monkeypatch.setattr(ex, "extract_blocks_utf8", engine)
    t = _table([("a", "<p>one</p>", HTML), ("b", "<p>BOOM</p>", HTML)])
    assert gc.isenabled()
    res = Extract("extract", Params()).apply(t)
    assert seen[-2:] == [False, False] and gc.isenabled()  # back on after the batch, an engine error or not
    assert res.dropped["reason"].to_pylist() == ["extract_error"]
    gc.disable()
    try:
        Extract("extract", Params()).apply(t)
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()


# ------------------------------------------------------------------ <br> line breaks in the blocks engine
def test_br_line_breaks_are_lines_of_the_blocks_engines_text():
    """A ``<br>`` inside a block is a line break of the output (as trafilatura and resiliparse write it): the
    line rules downstream (C4, FineWeb, Gopher's duplicate lines) read a poem or an address as its lines.
    Several ``<br>`` in a row make one break; one at a block's start or end none; in ``<pre>`` it stays."""
    from curate.extract.blocks import extract_blocks
    from curate.extract.dom_scan import compiled_walk, from_walk
    from curate.extract.dom_walk import parse, walk

    lines = [f"Line number {i} of the poem, where the river runs down to the sea" for i in range(12)]
    poem = ("<html><body><article><h1>A poem</h1><p><br>" + "<br>\n".join(lines[:6]) + "<br><br> <br>"
            + "<br><i>".join(lines[6:]) + "</i><br></p><pre>a<br>b</pre></article></body></html>")
    text = extract_blocks(poem)
    assert text.split("\n")[:13] == ["A poem"] + lines
    tree = parse(None, poem.encode("utf-8"))
    got, want = compiled_walk(tree), from_walk(*walk(tree))
    assert got.texts == want.texts and any(t == "a\nb" for t in got.texts)


@pytest.mark.parametrize("page", [
    "<p>one\x00two three</p>", "<table>a\x00b<tr><td>c\x00d</td></tr></table>", "<math><mi>a\x00b</mi></math>",
    "<svg><text>a\x00b</text></svg>", "<textarea>a\x00b</textarea>", "<pre>a\x00b</pre>",
    "<select><option>a\x00b</option></select>", "<p>&#0;x &#x0; y</p>", "<svg><![CDATA[a\x00b]]></svg>",
    "<p title='a\x00b'>words\x00<br>more\x00words</p>"])
def test_a_nul_in_the_page_is_never_read_as_a_br(page):
    """The Python walk marks a ``<br>`` with NUL (``dom_walk.BR_MARK``): that is sound only because lexbor
    never leaves a NUL in a text node (the tree builder drops it, or writes U+FFFD). Checked where HTML lets
    a NUL through: body, table, foreign content, RCDATA, <pre>, <select>, character references, CDATA."""
    from curate.extract.dom_scan import compiled_walk, from_walk
    from curate.extract.dom_walk import BR_MARK, parse, walk

    tree = parse(None, f"<html><body>{page}</body></html>".encode("utf-8"))
    want = from_walk(*walk(tree))
    assert not any(BR_MARK in t or ("\n" in t and "<br>" not in page) for t in want.texts), want.texts
    got = compiled_walk(tree)
    assert got is None or got.texts == want.texts


def test_a_block_repeated_with_and_without_br_is_written_once():
    from curate.extract.blocks import assemble
    from curate.extract.features import _code_points, _repeats

    texts = ["One two three four five", "One two\nthree four five", "Other words here"]
    assert assemble(texts, ["p", "div", "p"], [0.9, 0.9, 0.9], 0.5, [0, 1, 2]) == \
        "One two three four five\nOther words here"
    n_chars, cps = _code_points(texts)
    assert _repeats(cps, n_chars).tolist() == [2.0, 2.0, 1.0]

"""Hostile probe, round 6, on the text stages: languages whose spaCy tokenizer is a segmenter (a traceback at
config load), C4's sentence mode (quadratic in a run of marks), C4 keeping documents it emptied, punctuation
lists that set every document aside, and ``normalize``'s undocumented reason and glued lines."""
from __future__ import annotations

import json
import pkgutil
import time
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from curate.cli import main as curate_main
from curate.config import ConfigError
from curate.pipeline import parse_stage

FILTERS = ("gopher_quality", "gopher_repetition", "c4_quality", "fineweb_quality")
DATA = Path(__file__).parent / "data" / "filters"


def _docs() -> list[tuple[str, str]]:
    out = []
    for name, lang in (("parity.jsonl", None), ("fortunes.jsonl", None), ("prose.jsonl", "en"),
                       ("boilerplate.jsonl", "en")):
        with open(DATA / name, encoding="utf-8") as f:
            out += [(lang or r["lang"], r["text"]) for r in map(json.loads, f)]
    return out


def _run(tmp_path: Path, docs: list[dict], stages: str) -> tuple[int, str]:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "r6"\noutput = "{tmp_path / "out"}"\nworkers = 1\n'
                    f'[[sources]]\npath = "{src}"\n{stages}')
    return curate_main(["run", str(toml), "--quiet"]), str(toml)


def _rows(folder: Path) -> list[dict]:
    return [r for p in sorted(folder.glob("**/*.arrow")) for r in ipc.open_file(p).read_all().to_pylist()]


# --- 1. languages whose blank spaCy tokenizer is not the rule-based one ------------------------------------

def test_every_spacy_language_is_either_rule_based_or_refused_at_start():
    """Each language spaCy ships: built where its blank tokenizer is spaCy's rule-based ``Tokenizer`` (and then
    its tokens are that tokenizer's), refused with a ValueError saying what to set otherwise: zh (a segmenter
    class) used to raise AttributeError ('ChineseTokenizer' object has no attribute 'rules')."""
    import spacy
    import spacy.lang
    from spacy.tokenizer import Tokenizer

    from curate.text.spacy_words import SpacyWords

    sample = 'Hello, world! (This is) a "test"... 3.5 km, e.g. don\'t stop - now. Привет, мир! नमस्ते। 你好。'
    names = sorted(m.name for m in pkgutil.iter_modules(spacy.lang.__path__) if m.ispkg)
    assert len(names) > 60 and "en" in names and "zh" in names
    refused = []
    for name in names:
        try:
            words = SpacyWords(name)
        except ValueError as e:
            assert f"language = {name!r}" in str(e) and "words = 'regex'" in str(e), str(e)
            try:
                nlp = spacy.blank(name)
            except ImportError:  # a segmenter from another package (ja, ko, th, vi)
                refused.append(name)
                continue
            assert type(nlp.tokenizer) is not Tokenizer, name  # refused only where not rule-based
            refused.append(name)
            continue
        assert type(words._nlp.tokenizer) is Tokenizer, name
        want = [t.text for t in words._tokenizer(sample) if not t.is_space]
        assert words.tokens(sample) == want, name
    assert "zh" in refused and not {"en", "de", "fr", "ru", "xx"} & set(refused)


@pytest.mark.parametrize("type_", FILTERS)
def test_language_zh_is_a_config_error_naming_the_key(type_):
    with pytest.raises(ConfigError, match=r"language = 'zh'.*ChineseTokenizer.*set words = 'regex'"):
        parse_stage({"type": type_, "language": "zh"}, "p.toml: [[stages]] #1")
    # the regex splitter needs no spaCy tokenizer: accepted
    assert parse_stage({"type": type_, "language": "zh", "words": "regex"}, "p.toml").params["language"] == "zh"


def test_language_zh_stops_the_run_at_start_without_a_traceback(tmp_path, capsys):
    rc, _ = _run(tmp_path, [{"id": "a", "text": "The cat sat on the mat."}],
                 '[[stages]]\ntype = "gopher_quality"\nlanguage = "zh"\n')
    err = capsys.readouterr().err
    assert rc == 2 and "language = 'zh'" in err and "Traceback" not in err and "AttributeError" not in err


# --- 2. C4's sentence mode: linear, the same sentences as spaCy's sentencizer -------------------------------

@lru_cache(maxsize=None)
def _sentencizer(language: str):
    import spacy

    nlp = spacy.blank(language)
    nlp.add_pipe("sentencizer")
    return nlp


def _spacy_reference(text: str, language: str = "en") -> list[str]:
    """DataTrove's ``split_into_sentences``: spaCy's tokenizer and sentencizer over the whole text."""
    nlp = _sentencizer(language)
    nlp.max_length = max(nlp.max_length, len(text) + 10)
    with nlp.memory_zone():
        ends = [s.end_char for s in nlp(text).sents]
    return [text[a:b] for a, b in zip([0] + ends[:-1], ends[:-1] + [len(text)])]


def test_sentence_pieces_equal_spacys_on_real_prose_of_seven_languages():
    from curate.text.sentences import spacy_sentences

    docs = _docs()
    assert len(docs) > 1500
    for lang, text in docs:
        assert spacy_sentences(text, lang) == _spacy_reference(text, lang), (lang, text[:200])


@pytest.mark.parametrize("text", [
    "", "   ", " a", "\n\nFirst. Second", "One. \n\nTwo.", "One.\u3000\u3000Two.", "One.\xa0Two.",
    "One. \u2028 Two.", "One.  ", "One. \n", "One.\t\n two", 'He said "Hi." Then left.', "Wait... what?! No.",
    "(Yes.) (No.) Maybe.", "e.g. this. U.S. that. Mr. Smith.", "。你好。再见。", "Дом. Кот! Пёс?", "x" * 300 + ". y",
    "end.)\" Next", "a.\n", "a. ", "a.\r\nb.",
])
def test_sentence_pieces_equal_spacys_on_whitespace_and_marks(text):
    from curate.text.sentences import spacy_sentences

    assert spacy_sentences(text) == _spacy_reference(text)


def test_sentence_mode_decisions_and_text_equal_datatrove():
    datatrove_filters = pytest.importorskip("datatrove.pipeline.filters", reason="pip install -e .[test]")
    from datatrove.data import Document

    from curate.stages.c4_quality import C4Quality

    docs = _docs()[::3]
    langs = sorted({lang for lang, _ in docs})
    theirs = {lang: datatrove_filters.C4QualityFilter(split_paragraph=False, language=lang) for lang in langs}
    ours = {lang: C4Quality("c4", C4Quality.Params(split_paragraph=False, language=lang)) for lang in langs}
    kept = 0
    for lang, text in docs:
        doc = Document(text=text, id="x")
        out = theirs[lang].filter(doc)
        want = None if out is True else "c4_" + out[1]
        got, got_text = ours[lang].clean(text)
        assert got == want and (want is not None or got_text == doc.text), (lang, want, got, text[:200])
        kept += want is None
    assert 0 < kept < len(docs)


def test_sentence_mode_is_linear_in_a_run_of_parentheses():
    """``(((...word...)))``: 16 KB took 18.8 s (spaCy's tokenizer over the whole text, quadratic); 2 MB now well
    under a second."""
    from curate.stages.c4_quality import C4Quality

    stage = C4Quality("c4", C4Quality.Params(split_paragraph=False))
    stage.apply(pa.table({"id": ["w"], "text": ["Warm up the tokenizer. Second sentence here."]}))
    for n in (8_000, 1_000_000):
        text = "(" * n + "word" + ")" * n
        start = time.process_time()
        res = stage.apply(pa.table({"id": ["x"], "text": [text]}))
        assert time.process_time() - start < 5, n
        assert res.dropped.num_rows == 1


_BOUNDED = """
import sys, time
from curate.stages.c4_quality import C4Quality
from tests.hostile import cost_inputs
stage = C4Quality("c4", C4Quality.Params(split_paragraph=False))
shapes = dict(cost_inputs.TEXT, nested_parentheses=lambda: "(" * 500_000 + "word" + ")" * 500_000,
              bangs_between_sentences=lambda: ("Hello there. " + "!" * 50 + " ") * 20_000)
for name, make in shapes.items():
    text = make()
    start = time.process_time()
    stage.check(text, {})
    print(name, round(time.process_time() - start, 2), flush=True)
"""


def test_sentence_mode_is_bounded_on_every_hostile_text():
    """Each hostile text of tests/hostile/cost_inputs.py (and a run of parentheses), in a child process: spaCy's
    tokenizer over a whole text does not return to Python for hours on some, so a time limit in this process
    would never fire."""
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    try:
        out = subprocess.run([sys.executable, "-c", _BOUNDED], cwd=root, capture_output=True, text=True,
                             timeout=300, check=True).stdout
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"still running after 300 s; finished: {e.stdout!r}")
    times = {name: float(t) for name, t in (line.split() for line in out.splitlines())}
    from tests.hostile import cost_inputs

    assert set(times) == {*cost_inputs.TEXT, "nested_parentheses", "bangs_between_sentences"}
    assert max(times.values()) < 15, times


# --- 3. C4 never keeps a document it emptied ----------------------------------------------------------------

_EMPTIED = {"nopunct": "no punctuation here at all\nanother line without end",
            "js": "Please enable javascript to view this page.\nYou need JavaScript enabled to continue here.",
            "short": "Too short.\nAlso.", "blank": "\n\n  \n"}
_GOOD = "This is a fine line with words.\nAnd another fine line here."


@pytest.mark.parametrize("params", [
    {"min_num_sentences": -1}, {"min_num_sentences": 0}, {"skip": ["c4_too_few_sentences"]},
    {"min_num_sentences": 0, "split_paragraph": False},
    # every line kept, all of them blank: DataTrove counts a blank line as a sentence, so 3 >= 1
    {"min_num_sentences": 1, "min_words_per_line": -1, "filter_no_terminal_punct": False},
])
def test_c4_sets_an_emptied_document_aside_whatever_min_num_sentences_is(params):
    from curate.stages.c4_quality import C4Quality

    stage = C4Quality("c4", C4Quality.Params(**params))
    texts = dict(_EMPTIED, ok=_GOOD)
    if params.get("min_words_per_line") == -1:  # only the blank lines' document is left empty
        texts = {"blank": _EMPTIED["blank"], "ok": _GOOD}
    res = stage.apply(pa.table({"id": list(texts), "text": list(texts.values())}))
    assert res.kept.column("id").to_pylist() == ["ok"]
    assert all(t.strip() for t in res.kept.column("text").to_pylist())
    assert set(res.dropped.column("reason").to_pylist()) == {"c4_empty_after_filter"}
    # the document set aside keeps its text
    assert sorted(res.dropped.column("text").to_pylist()) == sorted(t for k, t in texts.items() if k != "ok")


def test_c4_default_reason_for_an_emptied_document_is_still_too_few_sentences():
    from curate.stages.c4_quality import C4Quality

    assert C4Quality("c4").clean(_EMPTIED["nopunct"])[0] == "c4_too_few_sentences"  # DataTrove's reason


def test_c4_empty_reason_is_listed_and_cannot_be_skipped(capsys):
    from curate.commands import stages as stages_command

    assert "c4_empty_after_filter" in dict(stages_command.reasons("c4_quality"))
    with pytest.raises(ConfigError, match="skip = 'c4_empty_after_filter'.*take"):
        parse_stage({"type": "c4_quality", "skip": ["c4_empty_after_filter"]}, "t")


def test_c4_emptied_documents_no_longer_become_exact_duplicates(tmp_path):
    docs = [{"id": k, "text": v} for k, v in _EMPTIED.items()] + [{"id": "ok", "text": _GOOD}]
    rc, _ = _run(tmp_path, docs, '[[stages]]\ntype = "c4_quality"\nmin_num_sentences = -1\n'
                                 '[[stages]]\ntype = "exact_dedup"\n')
    assert rc == 0
    kept = _rows(tmp_path / "out" / "data")
    assert [(r["id"], r["text"]) for r in kept] == [("ok", _GOOD)]
    dropped = _rows(tmp_path / "out" / "dropped")
    want = dict.fromkeys(_EMPTIED, "c4_empty_after_filter")
    want["blank"] = "empty_document"  # the reader's
    assert {r["id"]: r["reason"] for r in dropped} == want


# --- 4. lists and numbers that set every document aside -----------------------------------------------------

@pytest.mark.parametrize("type_, params, says", [
    ("c4_quality", {"end_punctuation": []}, "end_punctuation = []: no line could end in one"),
    ("c4_quality", {"end_punctuation": ["...", "...."]}, "a line ending in '...' is removed"),
    ("fineweb_quality", {"stop_chars": []}, "stop_chars = []: no line could end in one"),
    ("gopher_quality", {"stop_words": []}, "more than the 0 distinct stop_words"),
    ("gopher_quality", {"stop_words": ["of the", "and", " "]}, "'of the': empty or holding whitespace"),
    ("gopher_quality", {"min_doc_words": 0, "max_doc_words": 0}, "max_doc_words = 0: every document with a word"),
    ("gopher_quality", {"min_avg_word_length": 0, "max_avg_word_length": 0.5}, "max_avg_word_length = 0.5"),
])
def test_settings_that_set_every_document_aside_are_refused(type_, params, says):
    with pytest.raises(ConfigError) as e:
        parse_stage({"type": type_, **params}, "p.toml: [[stages]] #1")
    assert says in str(e.value) and "set aside" in str(e.value)


@pytest.mark.parametrize("type_, params", [
    ("c4_quality", {"end_punctuation": [], "filter_no_terminal_punct": False}),  # the rule is off
    ("c4_quality", {"end_punctuation": ["...", "."]}),
    ("fineweb_quality", {"stop_chars": [], "line_punct_exclude_zero": True}),
    ("fineweb_quality", {"stop_chars": [], "line_punct_thr": 0}),
    ("fineweb_quality", {"stop_chars": [], "skip": ["fineweb_line_punct_ratio"]}),
    ("gopher_quality", {"stop_words": [], "min_stop_words": 0}),
    ("gopher_quality", {"stop_words": [], "skip": ["gopher_stop_words"]}),
    ("gopher_quality", {"min_doc_words": 0, "max_doc_words": 0, "skip": ["gopher_long_doc"]}),
    ("gopher_quality", {"max_doc_words": 50}),
    ("gopher_quality", {"min_avg_word_length": 0, "max_avg_word_length": 1}),
])
def test_the_same_keys_with_their_rule_off_or_reachable_are_accepted(type_, params):
    assert parse_stage({"type": type_, **params}, "p.toml").params.items() >= params.items()


@pytest.mark.parametrize("stage", ['type = "c4_quality"\nend_punctuation = []',
                                   'type = "fineweb_quality"\nstop_chars = []'])
def test_empty_punctuation_lists_stop_the_run_at_start(tmp_path, capsys, stage):
    rc, _ = _run(tmp_path, [{"id": "a", "text": _GOOD}], f"[[stages]]\n{stage}\n")
    err = capsys.readouterr().err
    assert rc == 2 and "= []" in err and "Traceback" not in err
    assert not (tmp_path / "out" / "data").exists()


# --- 5. normalize: its reason is listed; Unicode's line separators keep words apart -------------------------

def test_normalize_lists_its_reason():
    from curate.commands import stages as stages_command

    assert "empty_after_normalize" in dict(stages_command.reasons("normalize"))


@pytest.mark.parametrize("sep", ["\x0b", "\x0c", "\x85", "\u2028", "\u2029"])
@pytest.mark.parametrize("fix_encoding", [True, False])
def test_line_separators_become_line_breaks_not_glue(sep, fix_encoding):
    from curate.stages.normalize import Params, normalize_text

    text = f"First line ends here.{sep}Second line starts here."
    assert normalize_text(text, Params(fix_encoding=fix_encoding)) == "First line ends here.\nSecond line starts here."
    assert normalize_text(f"Cyrillic слово{sep}Next", Params(fix_encoding=fix_encoding)) == "Cyrillic слово\nNext"


def test_mojibake_holding_a_nel_byte_is_still_repaired():
    """UTF-8 read as latin-1 puts U+0085 inside "ą", "Å", Cyrillic "х": ftfy repairs those, untouched."""
    import ftfy

    from curate.stages.normalize import ftfy_config, normalize_text

    for good in ("zażółć gęślą jaźń", "Ångström", "хорошо и плохо", "U+2805 is \u2805"):
        bad = good.encode("utf-8").decode("latin-1")
        assert "\x85" in bad
        assert normalize_text(bad) == good == ftfy.fix_text(bad, ftfy_config())


def test_real_text_garbled_as_latin1_equals_fix_text():
    import ftfy

    from curate.stages.normalize import clean_whitespace, ftfy_config, normalize_text

    checked = 0
    for _, text in _docs()[::4]:
        bad = text[:600].encode("utf-8").decode("latin-1")
        if "\x85" in bad:
            assert normalize_text(bad) == clean_whitespace(ftfy.fix_text(bad, ftfy_config())), bad[:200]
            checked += 1
    assert checked > 20


def test_clean_whitespace_false_is_still_fix_text_exactly():
    import ftfy

    from curate.stages.normalize import Params, ftfy_config, normalize_text

    for text in ("a.\x0bb", "a.\x0cb", "a.\x85b", "a\u2028b"):
        assert normalize_text(text, Params(clean_whitespace=False)) == ftfy.fix_text(text, ftfy_config())


def test_a_text_of_spaces_is_set_aside_without_clean_whitespace():
    from curate.stages.normalize import Normalize

    stage = Normalize("n", Normalize.Params(clean_whitespace=False))
    # the reader keeps "&nbsp; &nbsp;" (not blank); ftfy makes it "\xa0 \xa0", which the old code kept
    res = stage.apply(pa.table({"id": ["sp", "ok"], "text": ["&nbsp; &nbsp;\n", "Some words."]}))
    assert res.kept.column("id").to_pylist() == ["ok"]
    assert res.dropped.column("reason").to_pylist() == ["empty_after_normalize"]


def test_normalize_run_keeps_the_lines_apart(tmp_path):
    docs = [{"id": "vt", "text": "First line ends here.\x0bSecond line starts here."},
            {"id": "nel", "text": "First line ends here.\x85Second line starts here."},
            {"id": "zw", "text": "\u200b" * 100}]
    rc, _ = _run(tmp_path, docs, '[[stages]]\ntype = "normalize"\n')
    assert rc == 0
    kept = {r["id"]: r["text"] for r in _rows(tmp_path / "out" / "data")}
    assert kept == dict.fromkeys(["vt", "nel"], "First line ends here.\nSecond line starts here.")
    assert [r["reason"] for r in _rows(tmp_path / "out" / "dropped")] == ["empty_after_normalize"]

"""Quarry's four heuristic stages beside DataTrove 0.10.1's filters of the same name, on real
documents of seven languages (tests/data/filters, see SOURCES.md there): the same keep/drop
decision with the same reason on at least 99.9% of documents, and for C4 the same text after line
removal. DataTrove is a test dependency (the ``test`` extra); no model or data is downloaded."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

datatrove_filters = pytest.importorskip("datatrove.pipeline.filters", reason="pip install -e .[test] (datatrove)")
from datatrove.data import Document  # noqa: E402

from curate.stages.c4_quality import C4Quality  # noqa: E402
from curate.stages.fineweb_quality import FineWebQuality  # noqa: E402
from curate.stages.gopher_quality import GopherQuality  # noqa: E402
from curate.stages.gopher_repetition import GopherRepetition  # noqa: E402

DATA = Path(__file__).parent / "data" / "filters"
MIN_AGREEMENT = 0.999


def _load(name: str, lang: str | None = None) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [{"lang": lang or r["lang"], "id": r["id"], "text": r["text"]} for r in rows]


DOCS = (_load("parity.jsonl") + _load("fortunes.jsonl") + _load("prose.jsonl", "en")
        + _load("boilerplate.jsonl", "en"))
LANGS = sorted({d["lang"] for d in DOCS})

# DataTrove's reason -> Quarry's reason code (the codes are Quarry's contract, see the filters' REASONS)
_GOPHER_QUALITY = {
    "gopher_below_avg_threshold": "gopher_mean_word_length_low",
    "gopher_above_avg_threshold": "gopher_mean_word_length_high",
    "gopher_too_many_hashes": "gopher_symbol_ratio",
    "gopher_too_many_ellipsis": "gopher_symbol_ratio",
    "gopher_too_many_bullets": "gopher_bullet_lines",
    "gopher_too_many_end_ellipsis": "gopher_ellipsis_lines",
    "gopher_below_alpha_threshold": "gopher_alpha_words",
    "gopher_enough_stop_words": "gopher_stop_words",
}


def quarry_reason(stage: str, reason: str) -> str:
    if stage == "gopher_quality":
        return _GOPHER_QUALITY.get(reason, reason)
    if stage == "gopher_repetition":
        if reason == "empty":
            return "gopher_empty_doc"
        if m := re.fullmatch(r"top_(\d+)_gram", reason):
            return f"gopher_top_{m[1]}gram"
        if m := re.fullmatch(r"duplicated_(\d+)_n_grams", reason):
            return f"gopher_dup_{m[1]}gram"
        return f"gopher_{reason}"
    if stage == "c4_quality":
        return f"c4_{reason}"
    return f"fineweb_{reason}"


PAIRS = {
    "gopher_quality": (datatrove_filters.GopherQualityFilter, GopherQuality),
    "gopher_repetition": (datatrove_filters.GopherRepetitionFilter, GopherRepetition),
    "c4_quality": (datatrove_filters.C4QualityFilter, C4Quality),
    "fineweb_quality": (datatrove_filters.FineWebQualityFilter, FineWebQuality),
}


def datatrove_decision(filt, text: str) -> tuple[str | None, str]:
    doc = Document(text=text, id="x")
    out = filt.filter(doc)
    return (None if out is True else out[1]), doc.text


def test_the_parity_corpus_is_real_and_multilingual():
    assert len(DOCS) > 1500
    assert {"en", "de", "es", "it", "pl", "ru", "cs"} <= set(LANGS)
    assert sum(len(d["text"]) for d in DOCS) > 1_000_000


@pytest.mark.slow
@pytest.mark.parametrize("stage_type", sorted(PAIRS))
def test_same_decision_and_reason_as_datatrove(stage_type):
    dt_cls, ours_cls = PAIRS[stage_type]
    dt = {lang: dt_cls(language=lang) for lang in LANGS}
    ours = {lang: ours_cls(stage_type, ours_cls.Params(language=lang)) for lang in LANGS}
    disagree, dropped = [], 0
    for d in DOCS:
        text, lang = d["text"], d["lang"]
        reason, dt_text = datatrove_decision(dt[lang], text)
        want = None if reason is None else quarry_reason(stage_type, reason)
        assert want is None or want in ours_cls.REASONS, (reason, want)
        if stage_type == "c4_quality":
            got, got_text = ours[lang].clean(text)
            same = got == want and (want is not None or got_text == dt_text)
        else:
            got = ours[lang].check(text)
            same = got == want
        dropped += want is not None
        if not same:
            disagree.append((d["id"], want, got))
    agreement = 1 - len(disagree) / len(DOCS)
    assert agreement >= MIN_AGREEMENT, (stage_type, agreement, disagree[:10])
    # the corpus exercises the filter: both decisions occur
    assert 0 < dropped < len(DOCS), (stage_type, dropped)


@pytest.mark.slow
def test_every_reason_datatrove_gives_on_the_corpus_maps_to_a_quarry_code():
    seen = set()
    for stage_type, (dt_cls, ours_cls) in PAIRS.items():
        filt = dt_cls()
        for d in DOCS[::7]:
            reason, _ = datatrove_decision(filt, d["text"])
            if reason is not None:
                seen.add(stage_type)
                assert quarry_reason(stage_type, reason) in ours_cls.REASONS, reason
    assert seen == set(PAIRS)


# --- where Quarry differs on purpose: named options, off by default ---------------------------

def test_regex_words_are_a_faster_approximation_not_the_default():
    texts = [d["text"] for d in DOCS if d["lang"] == "en"][:300]
    spacy_stage = GopherQuality("gq")
    regex_stage = GopherQuality("gq", GopherQuality.Params(words="regex"))
    filt = datatrove_filters.GopherQualityFilter()
    want = [datatrove_decision(filt, t)[0] for t in texts]
    want = [None if r is None else quarry_reason("gopher_quality", r) for r in want]
    assert [spacy_stage.check(t) for t in texts] == want
    regex_agree = sum(a == b for a, b in zip((regex_stage.check(t) for t in texts), want)) / len(texts)
    assert 0.8 < regex_agree < 1.0


def test_top_ngram_needs_repeat_keeps_short_texts_datatrove_drops():
    text = "Hello there."  # every 2-gram occurs once: DataTrove counts it anyway
    assert datatrove_decision(datatrove_filters.GopherRepetitionFilter(), text)[0] == "top_2_gram"
    assert GopherRepetition("gr").check(text) == "gopher_top_2gram"
    assert GopherRepetition("gr", GopherRepetition.Params(top_ngram_needs_repeat=True)).check(text) is None


def test_exact_ngrams_do_not_confuse_differently_split_words():
    # "ab c d e f" and "a bc d e f" glue to the same 5-gram: DataTrove counts it as a repeat
    unique = " ".join(f"w{i}x" for i in range(30))
    text = f"{unique} ab c d e f {unique[::-1]} a bc d e f"
    params = dict(skip=[f"gopher_top_{n}gram" for n in (2, 3, 4)], dup_5gram_frac=0.01)
    glued = GopherRepetition("gr", GopherRepetition.Params(**params)).check(text)
    exact = GopherRepetition("gr", GopherRepetition.Params(exact_ngrams=True, **params)).check(text)
    dt = datatrove_filters.GopherRepetitionFilter(top_n_grams=(), dup_n_grams=((5, 0.01),))
    assert datatrove_decision(dt, text)[0] == "duplicated_5_n_grams"
    assert glued == "gopher_dup_5gram"
    assert exact is None

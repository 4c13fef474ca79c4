"""``langid``: fastText lid.176 on real labelled text (Debian fortunes in seven languages)."""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from curate.pipeline import ConfigError, parse_stage
from curate.schema import documents_to_table
from curate.stages.langid import LangId, default_model_path, load_fasttext_model
from curate.stages.quality_train import train_fasttext

DATA = Path(__file__).parent / "data" / "filters"

with open(DATA / "fortunes.jsonl", encoding="utf-8") as f:
    FORTUNES = [json.loads(line) for line in f]


def table(rows: list[dict]):
    return documents_to_table([
        {"id": r["id"], "text": r["text"], "source": "fortunes", "url": "", "content_type": "text/plain"} for r in rows
    ])


@pytest.fixture(scope="module")
def tagged():
    res = LangId("langid", LangId.Params(tag_only=True)).apply(table(FORTUNES))
    assert res.dropped.num_rows == 0
    return res.kept


def test_accuracy_per_language(tagged):
    assert tagged.column("id").to_pylist() == [r["id"] for r in FORTUNES]
    hits = defaultdict(list)
    for r, lang in zip(FORTUNES, tagged.column("lang").to_pylist()):
        hits[r["lang"]].append(lang == r["lang"])
    accuracy = {lang: sum(v) / len(v) for lang, v in hits.items()}
    assert set(accuracy) == {"cs", "de", "en", "es", "it", "pl", "ru"}
    for lang in ("en", "de", "ru"):
        assert accuracy[lang] >= 0.95, accuracy
    # the Polish set holds some English jokes, the Czech set some Slovak (see SOURCES.md)
    assert min(accuracy.values()) >= 0.9, accuracy
    scores = tagged.column("lang_score").to_pylist()
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert sum(s >= 0.65 for s in scores) / len(scores) > 0.8


def test_keeps_english_and_says_why_the_rest_went(tagged):
    res = LangId("langid", LangId.Params(languages=["en"])).apply(table(FORTUNES))
    assert res.kept.num_rows + res.dropped.num_rows == len(FORTUNES)
    truth = {r["id"]: r["lang"] for r in FORTUNES}
    kept = res.kept.column("id").to_pylist()
    n_en = sum(1 for r in FORTUNES if r["lang"] == "en")
    precision = sum(truth[i] == "en" for i in kept) / len(kept)
    recall = sum(truth[i] == "en" for i in kept) / n_en
    assert precision >= 0.95 and recall >= 0.85, (precision, recall)
    assert set(res.dropped.column("reason").to_pylist()) == {"language"}
    assert set(res.dropped.column("stage").to_pylist()) == {"langid"}
    # the rule, row by row: kept means English at or above the threshold, dropped means not
    for t, keep in ((res.kept, True), (res.dropped, False)):
        for lang, score in zip(t.column("lang").to_pylist(), t.column("lang_score").to_pylist()):
            assert (lang == "en" and score >= 0.65) == keep
    # the same annotations as tag-only mode
    tagged_by_id = dict(zip(tagged.column("id").to_pylist(), tagged.column("lang").to_pylist()))
    assert all(tagged_by_id[i] == lang for i, lang in zip(kept, res.kept.column("lang").to_pylist()))


def test_threshold_and_several_languages(tagged):
    rows = [r for r in FORTUNES if r["lang"] in ("de", "ru", "en")][:200]
    loose = LangId("l", LangId.Params(languages=["de", "ru"], threshold=0.0)).apply(table(rows))
    strict = LangId("l", LangId.Params(languages=["de", "ru"], threshold=0.99)).apply(table(rows))
    assert set(loose.kept.column("lang").to_pylist()) <= {"de", "ru"}
    assert 0 < strict.kept.num_rows < loose.kept.num_rows
    assert min(strict.kept.column("lang_score").to_pylist()) >= 0.99
    anything = LangId("l", LangId.Params(languages=[], threshold=0.0)).apply(table(rows))
    assert anything.dropped.num_rows == 0


def test_newlines_batches_and_model_cache():
    rows = FORTUNES[::25]
    a = LangId("l", LangId.Params(tag_only=True)).apply(table(rows)).kept
    b = LangId("l", LangId.Params(tag_only=True, batch_size=3)).apply(table(rows)).kept
    assert a.column("lang").to_pylist() == b.column("lang").to_pylist()
    assert a.column("lang_score").to_pylist() == b.column("lang_score").to_pylist()
    crlf = [{"id": "x", "text": "Das ist ein Satz.\r\nUnd noch einer\rmit Zeilenumbruch."}]
    assert LangId("l", LangId.Params(tag_only=True)).apply(table(crlf)).kept.column("lang").to_pylist() == ["de"]
    assert load_fasttext_model(default_model_path()) is load_fasttext_model(default_model_path())


def test_other_fasttext_model(tmp_path):
    """``model_path`` takes any fastText LID model: train a small one on half of the fortunes."""
    rows = [r for r in FORTUNES if r["lang"] in ("en", "de", "ru")]
    train, test = rows[::2], rows[1::2]
    path = tmp_path / "train.txt"
    path.write_text("".join(f"__label__{r['lang']} {' '.join(r['text'].split())}\n" for r in train), encoding="utf-8")
    train_fasttext(path, tmp_path / "lid3.bin", dim=16, minn=2, maxn=4, epoch=25, lr=0.5, bucket=50_000, thread=1)
    stage = LangId("l", LangId.Params(model_path=str(tmp_path / "lid3.bin"), languages=["de"], threshold=0.5))
    res = stage.apply(table(test))
    assert set(res.kept.column("lang").to_pylist() + res.dropped.column("lang").to_pylist()) <= {"en", "de", "ru"}
    truth = {r["id"]: r["lang"] for r in test}
    labelled = dict(zip(res.kept.column("id").to_pylist() + res.dropped.column("id").to_pylist(),
                        res.kept.column("lang").to_pylist() + res.dropped.column("lang").to_pylist()))
    assert sum(labelled[i] == truth[i] for i in truth) / len(truth) >= 0.8
    assert Counter(truth[i] for i in res.kept.column("id").to_pylist()).most_common(1)[0][0] == "de"


def test_pipeline_keys():
    spec = parse_stage({"type": "langid", "languages": ["en", "de"], "threshold": 0.5}, "t")
    assert spec.build().params.languages == ["en", "de"]
    with pytest.raises(ConfigError, match="threshold"):
        parse_stage({"type": "langid", "threshold": "high"}, "t")
    with pytest.raises(ConfigError, match="languages"):
        parse_stage({"type": "langid", "languages": "en"}, "t")
    with pytest.raises(ConfigError, match="model_path"):
        parse_stage({"type": "langid", "model_path": "/nonexistent/lid.bin"}, "t")
    with pytest.raises(ConfigError, match="threshold"):
        parse_stage({"type": "langid", "threshold": 1.5}, "t")

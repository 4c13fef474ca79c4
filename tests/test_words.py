"""Word splitting: the spaCy splitter's memo and shortcut give spaCy's own tokens."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("spacy")

from curate.stages import words  # noqa: E402

DATA = Path(__file__).parent / "data" / "filters"


def _texts_by_lang() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name in ("parity.jsonl", "fortunes.jsonl", "prose.jsonl"):
        with open(DATA / name, encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                out.setdefault(d.get("lang", "en"), []).append(d["text"])
    return out


def spacy_tokens(nlp, text: str) -> list[str]:
    return [t.text for t in nlp.tokenizer(text) if not t.is_space]


@pytest.mark.parametrize("lang", sorted(words.SHORTCUT_LANGUAGES))
def test_shortcut_and_memo_equal_spacy_chunk_by_chunk(lang):
    import spacy

    nlp = spacy.blank(lang)
    texts = _texts_by_lang().get(lang) or _texts_by_lang()["en"]
    chunks = sorted({c for t in texts for c in t.split()})
    extra = ["A.", "US.", "cannot", "cannot,", "dont", "etc.", "e.g.", "Mr.", "word.", "ab.", "x,", "Hello!", "über;",
             "aB.", "McD.", "I.", "(I.)", '"A."', "Straße.", "écolE.", "ÉCOLE.", '"cannot"', "(etc.)", '"e.g.,"',
             '"word', 'word."', '(word)', '"Word!"', "(dont", 'etc."', '"Mr.', "WoRD.", "xY.", "(a)", '""', "()"]
    chunks += extra
    splitter = words.SpacyWords(lang)
    got = splitter.chunk_tokens(chunks)
    bad = [(c, g, tuple(spacy_tokens(nlp, c))) for c, g in zip(chunks, got) if g != tuple(spacy_tokens(nlp, c))]
    assert not bad, bad[:10]
    assert splitter._shortcuts(["plain", "words,", "Xx.", '"quoted."', "(aside)"]) == []  # they took the shortcut


def test_tokens_equal_spacy_on_whole_documents():
    import spacy

    nlp = spacy.blank("en")
    splitter = words.SpacyWords("en")
    texts = _texts_by_lang()["en"]
    same = sum(splitter.tokens(t) == spacy_tokens(nlp, t) for t in texts)
    assert same / len(texts) >= 0.995  # spaCy looks at the neighbouring chunk in about 1 chunk in 10^6


def test_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(words, "MEMO_SIZE", 50)
    splitter = words.SpacyWords("en")
    text = " ".join(f"w{i}x, (y{i})" for i in range(200))
    assert splitter.tokens(text)[:6] == ["w0x", ",", "(", "y0", ")", "w1x"]
    assert len(splitter._memo) <= 400


def test_sentences_follow_spacys_sentencizer():
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    lines = ["One. Two! Three?", "He said \"stop.\" She did.", "A.  B", "Wait... what?!", "A.\t. b", "No end mark",
             "Mr. Smith went to Washington. He left."]
    for texts in _texts_by_lang().values():
        lines += [ln.strip() for t in texts[:40] for ln in t.splitlines() if ln.strip()]
    for line in lines:
        want = len(list(nlp(line).sents))
        assert words.count_sentences(line) == want, line


def test_bad_settings_fail_at_start():
    with pytest.raises(ValueError, match="words"):
        words.check_splitter("nltk", "en")
    with pytest.raises(ValueError, match="language"):
        words.check_splitter("spacy", "not-a-language")

"""Word splitting: the spaCy splitter's memo and shortcut give spaCy's own tokens."""
from __future__ import annotations

import json
from itertools import chain
from pathlib import Path

import pytest

pytest.importorskip("spacy")

from curate.text import spacy_words as words  # noqa: E402
from curate.text.sentence_codes import line_sentences  # noqa: E402
from curate.text.sentences import count_sentences  # noqa: E402
from curate.text.spacy_shortcuts import COMPOUND_CLOSERS, COMPOUND_OPENERS  # noqa: E402
from curate.text.token_stats import token_stats  # noqa: E402
from curate.text.words import check_splitter  # noqa: E402

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


COMPOUND_ADVERSARIAL = [
    "Peter's", "Peter’s", "PETER'S", "PETER'S.", "Peter's.", "it's", "Let's", "can't", "cannot's", "'em", "'tis",
    "'cause", "o'clock", "O'Brien", "rock'n'roll", "well-known", "Well-Known,", "e-mail", "x-ray.", "A-B.",
    "state-of-the-art", "well--known", "well—known", "—word", "word—", "—word.", "word—.", "word..", "word...",
    "word....", "A.", "US.", "(A.)", "a.)", "a).", '"a."', "“word”", "‘word’", "word.’”", "1:2.", "1:2;", "5-6",
    "5-6.", "5--6", "1,000", "1,000.", "1.5", "10%", "1:2-3)", "3:16,17;", "1990's", "5km", "1st", "10-", "a-5",
    ":)", ";)", "(:", "word:)", "word;)", "(-:", "_word_", "[word]", "'word'", "''word''", "word''", "``word",
    "http://example.com", "e.g.", "U.S.", "Mr.", "etc.", "😀", "word😀", "a--b--c", "(word),", "word)),", "2-for-1",
    "O'Brien's", "Peter's-house", "y'all", "'twas", "’twas", "it'sa", "we'll", "I'd've", "o'er", "ne'er-do-well",
]


def _compound_combinations(n: int, seed: int = 0) -> list[str]:
    """``n`` random chunks of the shape ``compound_tokens`` handles: openers, a core of words or
    numbers (some of them spaCy's special cases), a possessive, closers."""
    import random

    rng = random.Random(seed)
    cores = ["well-known", "Well-Known", "e-mail", "A-B", "state-of-the-art", "well--known", "well\u2014known",
             "Peter", "a", "I", "US", "cannot", "it", "Let", "dont", "don", "can", "etc", "e", "g", "Mr", "s", "S",
             "twenty-one", "X-Men", "vs", "St", "o", "em", "tis", "cause", "n", "1", "5", "1:2", "3:16,17", "5,000",
             "1-2", "1:2-3", "12-14", "1990", "0", "a-b--c", "O'Brien", "rock'n'roll", "don't", "y'all", "it'sa",
             "Peter'll", "a'b-c'd", "O\u2019Brien", "can\u2019t", "I'm", "we're", "Ma'am", "o'clock", "n't", "s's"]
    opens = list(COMPOUND_OPENERS)
    closes = list(COMPOUND_CLOSERS)
    def run(chars, most):
        return "".join(rng.choice(chars) for _ in range(rng.randint(0, most)))
    return [run(opens, 2) + rng.choice(cores) + rng.choice(["", "", "'s", "\u2019s", "'S", "\u2019S"]) + run(closes, 3)
            for _ in range(n)]


def test_compound_tokens_equal_spacy():
    """Every chunk that ``compound_tokens`` tokenizes gets spaCy's English tokens: random
    combinations of its shape, adversarial strings, and every chunk of the real texts of all
    languages here."""
    import spacy

    nlp = spacy.blank("en")
    rules = nlp.tokenizer.rules
    real = sorted({c for ts in _texts_by_lang().values() for t in ts for c in t.split()})
    combos = _compound_combinations(20_000)
    checked = 0
    for c in combos + COMPOUND_ADVERSARIAL + real:
        got = words.compound_tokens(c, rules)
        if got is not None:
            assert got == tuple(spacy_tokens(nlp, c)), c
            checked += 1
    assert checked > 15_000
    # the shapes it is for are taken; the ones it is not for are left to spaCy
    for c in ["Peter's,", "well-known.", "“Yes,”", "1:2.", "—word", "5-6", "O'Brien", "rock'n'roll,"]:
        assert words.compound_tokens(c, rules) is not None, c
    for c in ["can't", ":)", "word;)", "A.", "word—.", "word..", "5km", "1.5", "'em", "e.g.", "y'all"]:
        assert words.compound_tokens(c, rules) is None, c


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
        assert count_sentences(line) == want, line


def test_bad_settings_fail_at_start():
    with pytest.raises(ValueError, match="words"):
        check_splitter("nltk", "en")
    with pytest.raises(ValueError, match="language"):
        check_splitter("spacy", "not-a-language")


@pytest.mark.parametrize("lang", ["cs", "de", "en", "es", "it", "pl", "ru"])
def test_cheap_pipeline_equals_plain_spacy_without_shortcuts(lang):
    """Every chunk through the batched spaCy call of the private pipeline (no lexical attribute
    getters, offsets from ``Doc.to_array``): exactly plain ``spacy.blank(lang)``'s tokens."""
    import spacy

    nlp = spacy.blank(lang)
    splitter = words.SpacyWords(lang)
    assert splitter._nlp.vocab.lex_attr_getters == {}
    splitter._shortcut = False  # no plain-word shortcut: spaCy tokenizes every chunk
    chunks = sorted({c for t in _texts_by_lang()[lang] for c in t.split()})
    chunks += ["\ud800x", "a\udfff.", "cannot", "e.g.", "U.S.A.", ":)", "(a)", "don't", "l'homme", "1,000.5", "—"]
    got = splitter.chunk_tokens(chunks)
    want = [tuple(spacy_tokens(nlp, words._SURROGATE_RE.sub("\ufffd", c))) for c in chunks]
    bad = [(c, g, w) for c, g, w in zip(chunks, got, want) if g != w]
    assert not bad, bad[:10]
    # the packed counts learned with the tokens are token_stats of them
    for c, toks in zip(chunks[::7], got[::7]):
        packed = splitter._stats_memo[c]
        mask = (1 << words.STATS_BITS) - 1
        assert tuple(packed >> (i * words.STATS_BITS) & mask for i in range(5)) == token_stats(toks)


def test_sentence_counts_by_document_equal_line_by_line():
    """C4's per-document count (one numba call over packed chunk effects) equals count_sentences
    line by line, and a text's chunks are its lines' chunks one after the other."""
    import random

    rng = random.Random(0)
    for _ in range(2000):
        t = "".join(rng.choice(["a", "b.", " ", "\n", "\r", "\x0b", "\x1c", "\x85", "\u2028", "!", "  "])
                    for _ in range(rng.randint(0, 20)))
        assert t.split() == [c for line in t.splitlines() for c in line.split()], repr(t)
    sw = words.spacy_words("en")
    for texts in _texts_by_lang().values():
        for text in texts[:30]:
            lines = [ln.strip() for ln in text.splitlines()]
            chunks = text.split()
            starts, stops, pos, want = [], [], 0, 0
            for ln in lines:
                k = len(ln.split())
                if ln and len(ln) - sum(map(len, ln.split())) == ln.count(" ") == k - 1:
                    starts.append(pos)
                    stops.append(pos + k)
                    want += count_sentences(ln)
                pos += k
            assert line_sentences(sw.sentence_codes(chunks), starts, stops) == want


@pytest.mark.parametrize("small_memo", [False, True])
def test_prefetched_texts_counts_by_chunk_id_equal_direct_ones(monkeypatch, small_memo):
    """Prefetched texts' stats and sentence codes (numpy gathers by chunk id) equal those computed
    from their tokens and chunks directly, also when the memos are emptied between batches."""
    texts = [t for ts in _texts_by_lang().values() for t in ts][:120]
    first = len({c for t in texts[:5] for c in t.split()})
    if small_memo:  # small batches fit, all of them together do not: ids and memos are emptied
        monkeypatch.setattr(words, "MEMO_SIZE", 2 * first + 2)
        assert len({c for t in texts for c in t.split()}) > words.MEMO_SIZE
    sw, fresh = words.SpacyWords("en"), words.SpacyWords("en")
    recent = {}  # a BatchContext's words, kept over every batch here (ids of an older generation are void)
    for k, batch in enumerate([texts[i:i + 5] for i in range(0, 120, 4)] + [texts]):
        sw.prefetch(batch, recent)
        if k == 0:
            assert all(recent[t].owner is sw and recent[t].ids is not None for t in batch)  # the gathers by id are what is tested
        for t in batch:
            assert sw.tokens(t, recent) == list(chain.from_iterable(fresh.chunk_tokens(t.split())))
            assert sw.text_stats(t, recent) == token_stats(sw.tokens(t, recent))
            assert sw.text_sentence_codes(t, recent).tolist() == fresh.sentence_codes(t.split()).tolist()
            _assert_glued(sw, t, recent)


@pytest.mark.parametrize("small_memo", [False, True])
def test_chunk_ids_from_langids_word_index_equal_direct_ones(monkeypatch, small_memo):
    """Texts langid has seen come with its fastText word ids (in the batch's context); the chunk ids
    translated from them give the tokens, stats and sentence codes of the chunks themselves, also
    when langid's word index is emptied between batches and when the memos here are."""
    from curate.stages import langid
    from curate.text.fasttext_model import fast_predictor

    texts = [t for ts in _texts_by_lang().values() for t in ts][:120]
    if small_memo:
        monkeypatch.setattr(words, "MEMO_SIZE", 2 * len({c for t in texts[:5] for c in t.split()}) + 2)
    stage = langid.LangId("langid", langid.Params(languages=[], batch_size=7))
    fast = fast_predictor(stage.model_path)
    assert fast is not None
    sw, fresh = words.SpacyWords("en"), words.SpacyWords("en")
    seen_index = set()
    for k, batch in enumerate([texts[i:i + 9] for i in range(0, 120, 6)]):
        if k == 7:
            fast.reset_words()  # a new index: ids given before it mean other words now
        recent = {}  # the batch's BatchContext.words
        stage.predict(batch, recent)
        assert all(recent[t].word_ids is not None for t in batch if t.split() == fast.split_words(t)[0])
        sw.prefetch(batch, recent)
        if sw._lid_index is not None:
            seen_index.add(id(sw._lid_index))
        for t in batch:
            assert sw.split(t, recent) == t.split()
            assert sw.tokens(t, recent) == list(chain.from_iterable(fresh.chunk_tokens(t.split())))
            assert sw.text_stats(t, recent) == token_stats(sw.tokens(t, recent))
            assert sw.text_sentence_codes(t, recent).tolist() == fresh.sentence_codes(t.split()).tolist()
            _assert_glued(sw, t, recent)
    assert len(seen_index) >= (1 if small_memo else 2)


def _assert_glued(sw, text: str, recent: dict) -> None:
    """``glued`` (by chunk id) gives the tokens' lengths and their characters glued together."""
    got = sw.glued(text, recent)
    if got is None:
        return
    toks = sw.tokens(text, recent)
    assert got[0].tolist() == list(map(len, toks))
    assert got[1].tolist() == list(map(ord, "".join(toks)))


def test_one_cache_of_recent_texts_keeps_each_splitters_tokens():
    """Splitters of two languages share a batch's context, never each other's tokens or ids."""
    en, de = words.SpacyWords("en"), words.SpacyWords("de")
    text = "a well-known word"
    want = {en: ["a", "well", "-", "known", "word"], de: ["a", "well-known", "word"]}
    recent = {}
    for sw in (en, de, en, de):
        sw.prefetch([text], recent)
        assert recent[text].owner is sw and sw.tokens(text, recent) == want[sw]
        assert sw.text_stats(text, recent) == token_stats(want[sw])
        _assert_glued(sw, text, recent)
    assert en.tokens(text, recent) == want[en] and de.tokens(text, recent) == want[de]


def test_recent_texts_are_bounded(monkeypatch):
    """A ``recent`` dict (a batch's context) takes at most ``RECENT_TEXTS`` texts; the others are split
    without it, to the same tokens and counts."""
    monkeypatch.setattr(words, "RECENT_TEXTS", 3)
    texts = [t for ts in _texts_by_lang().values() for t in ts][:10]
    sw, fresh = words.SpacyWords("en"), words.SpacyWords("en")
    recent = {}
    sw.prefetch(texts, recent)
    assert len(recent) == 3
    for t in texts:
        assert sw.tokens(t, recent) == list(chain.from_iterable(fresh.chunk_tokens(t.split())))
        assert sw.text_stats(t, recent) == token_stats(sw.tokens(t, recent))
        assert sw.text_sentence_codes(t, recent).tolist() == fresh.sentence_codes(t.split()).tolist()
    assert len(recent) == 3

"""Sentence counting for C4's rule: DataTrove's spaCy sentencizer over the words' tokens, or regex.

``count_sentences`` counts the sentences DataTrove's ``split_into_sentences`` finds in one line,
from each chunk's remembered sentence code (``curate.text.sentence_codes``); ``spacy_sentences``
runs spaCy's whole pipeline (C4's ``split_paragraph = false`` only).
"""
from __future__ import annotations

import re
from functools import lru_cache

from curate.text.regex_words import regex_sentences
from curate.text.sentence_codes import decode_effect
from curate.text.spacy_words import spacy_words

_WS_RUN_RE = re.compile(r"\s+")


def count_sentences(line: str, words: str = "spacy", language: str = "en", chunks: list[str] | None = None) -> int:
    """How many sentences DataTrove's ``split_into_sentences`` finds in ``line`` (stripped, not
    empty): spaCy's sentencizer starts a sentence at the first token that is neither punctuation
    nor an end mark after a token that is an end mark. Whitespace runs other than one space are
    tokens of their own there (neither punctuation nor end marks)."""
    if words == "regex":
        return len(regex_sentences(line))
    if chunks is None:
        chunks = line.split()
    effects = map(decode_effect, spacy_words(language).sentence_codes(chunks).tolist())
    n, seen_end = 1, False
    if len(line) - sum(map(len, chunks)) == line.count(" ") == len(chunks) - 1:  # single spaces only
        for eff in effects:
            n += eff[2] if seen_end else eff[0]
            seen_end = eff[3] if seen_end else eff[1]
        return n
    gaps = [g != " " for g in _WS_RUN_RE.findall(line)]  # a whitespace token between chunks i-1 and i
    for i, eff in enumerate(effects):
        if i and gaps[i - 1] and seen_end:  # a whitespace token is neither punctuation nor an end mark
            n += 1
            seen_end = False
        n += eff[2] if seen_end else eff[0]
        seen_end = eff[3] if seen_end else eff[1]
    return n


@lru_cache(maxsize=None)
def _sentencizer(language: str):
    import spacy

    nlp = spacy.blank(language)
    nlp.add_pipe("sentencizer")
    return nlp


def spacy_sentences(text: str, language: str = "en") -> list[str]:
    """DataTrove's ``split_into_sentences``: ``text`` cut after each sentence spaCy's sentencizer
    finds (pieces keep the whitespace between sentences; the last piece runs to the end). Slow
    (the whole spaCy pipeline); used only by C4's ``split_paragraph = false``."""
    nlp = _sentencizer(language)
    nlp.max_length = max(nlp.max_length, len(text) + 10)
    with nlp.memory_zone():
        ends = [s.end_char for s in nlp(text).sents]
    return [text[a:b] for a, b in zip([0] + ends[:-1], ends[:-1] + [len(text)])]

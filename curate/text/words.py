"""The two word splitters the heuristic filters choose from (their ``words`` key).

``"spacy"`` (the default): DataTrove's tokens, spaCy's rule-based tokenizer for ``language``, made
fast (``curate.text.spacy_words``). ``"regex"``: Quarry's own splitter, no spaCy
(``curate.text.regex_words``).
"""
from __future__ import annotations

from curate.text.regex_words import regex_tokens
from curate.text.spacy_words import spacy_words

WORD_SPLITTERS = ("spacy", "regex")


def tokens(text: str, words: str = "regex", language: str = "en", recent: dict | None = None) -> list[str]:
    """Tokens of ``text`` under splitter ``words`` (``"regex"`` unless told); ``recent``: see
    ``SpacyWords.tokens``."""
    return regex_tokens(text) if words == "regex" else spacy_words(language).tokens(text, recent)


def check_splitter(words: str, language: str) -> None:
    """Fail at start with a clear message when the configured splitter cannot be built."""
    if words not in WORD_SPLITTERS:
        raise ValueError(f"words = {words!r}; allowed: {', '.join(WORD_SPLITTERS)}")
    if words == "spacy":
        spacy_words(language)

"""Quarry's regex word and sentence splitter (``words = "regex"``; no spaCy).

Words (letters and digits, keeping inner ``-`` and ``.``), numbers with separators (``1,000``),
apostrophe tails (``'s``) and single punctuation marks (``...`` and ``--`` whole). Sentences end
at ``. ! ? …`` before a space, not after common abbreviations or initials.
"""
from __future__ import annotations

import re

_NUMBER = r"\d+(?:[.,:/]\d+)+"          # 1,000  3.14  1:26  12/05
_WORD = r"\w+(?:[-.]\w+)*"               # twenty-one  U.S  e.g
_CLITIC = r"['\u2019]\w+"                 # 's  n't-like tails  'tis
_PUNCT = r"\.\.\.|--+|[^\w\s]"            # ...  --  any other symbol alone
_TOKEN_RE = re.compile(f"{_NUMBER}|{_WORD}|{_CLITIC}|{_PUNCT}")


def regex_tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof rev hon gen col capt lt sgt mt ft vs etc e.g i.e cf viz al a.m p.m "
    "vol vols fig figs ch pp inc ltd co corp dept est approx jan feb mar apr jun jul aug "
    "sep sept oct nov dec".split()
)
# A run of end marks is only tried from its first mark (the look-behind), and taken whole (possessive): a
# run of 40,000 "." before a letter cost the plain pattern 38 s (each mark re-read the run after it); the
# matches are the same, since from any mark of a run the match ends where the run's first mark's does.
_SENTENCE_END_RE = re.compile(r"(?<![.!?\u2026])[.!?\u2026]++[\"'\u201d\u2019)\]]*+(?=\s|$)")


def _last_word(text: str, start: int, end: int) -> str:
    """``text[start:end].rsplit(None, 1)[-1]`` ("" when there is no word), reading only that word and the
    white space after it (the slice would copy everything since ``start`` at each mark)."""
    j = end
    while j > start and text[j - 1].isspace():
        j -= 1
    i = j
    while i > start and not text[i - 1].isspace():
        i -= 1
    return text[i:j]


def regex_sentences(text: str) -> list[str]:
    """Sentences of ``text``: cut after ``. ! ? …`` (and closing quotes/brackets) before a space,
    except after a common abbreviation (``Mr.``, ``e.g.``) or a single-letter initial."""
    out, start = [], 0
    for m in _SENTENCE_END_RE.finditer(text):
        if text[m.start()] == ".":
            last = _last_word(text, start, m.start()).lower().lstrip("(\"'\u201c\u2018")
            if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                continue
        piece = text[start:m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    rest = text[start:].strip()
    if rest:
        out.append(rest)
    return out

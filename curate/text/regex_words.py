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
_SENTENCE_END_RE = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*(?=\s|$)")


def regex_sentences(text: str) -> list[str]:
    """Sentences of ``text``: cut after ``. ! ? …`` (and closing quotes/brackets) before a space,
    except after a common abbreviation (``Mr.``, ``e.g.``) or a single-letter initial."""
    out, start = [], 0
    for m in _SENTENCE_END_RE.finditer(text):
        if text[m.start()] == ".":
            before = text[start:m.start()].rsplit(None, 1)
            last = before[-1].lower().lstrip("(\"'\u201c\u2018") if before else ""
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

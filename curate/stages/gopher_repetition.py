"""``gopher_repetition``: Gopher's repetition rules, as DataTrove 0.10.1's ``GopherRepetitionFilter``
decides them with its defaults.

Duplicate paragraphs and lines (their share, and the share of characters in them), the characters
of the most frequent 2-, 3- and 4-gram of tokens and of repeated 5- to 10-grams, each as a fraction
of ``len(text)``; reason codes in ``GOPHER_REPETITION_REASONS``. As in DataTrove an n-gram seen
once can be the top one (``top_ngram_needs_repeat = true``: not) and repeated n-grams are equal
when their tokens glued together are (``exact_ngrams = true``: when their tokens are).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from curate.stages.filter_base import (HeuristicStage, check_nonnegative, check_shares, check_skip, check_words,
                                       find_duplicates, split_lines, split_paragraphs)
from curate.text.ngrams import dup_ngrams_chars, top_ngrams_chars
from curate.text.spacy_words import spacy_words

TOP_NGRAMS = (2, 3, 4)
DUP_NGRAMS = (5, 6, 7, 8, 9, 10)
GOPHER_REPETITION_REASONS = {
    "gopher_empty_doc": "the text is empty",
    "gopher_dup_para_frac": "share of paragraphs that repeat an earlier one above dup_para_frac",
    "gopher_dup_para_char_frac": "share of characters in repeated paragraphs above dup_para_char_frac",
    "gopher_dup_line_frac": "share of lines that repeat an earlier one above dup_line_frac",
    "gopher_dup_line_char_frac": "share of characters in repeated lines above dup_line_char_frac",
    **{f"gopher_top_{n}gram": f"characters of the most frequent {n}-gram above top_{n}gram_frac" for n in TOP_NGRAMS},
    **{f"gopher_dup_{n}gram": f"characters in repeated {n}-grams above dup_{n}gram_frac" for n in DUP_NGRAMS},
}


@dataclass
class GopherRepetitionParams:
    dup_para_frac: float = 0.3  # share of paragraphs repeating an earlier one above this: gopher_dup_para_frac
    dup_para_char_frac: float = 0.2  # share of characters in repeated paragraphs above this: gopher_dup_para_char_frac
    dup_line_frac: float = 0.3  # share of lines repeating an earlier one above this: gopher_dup_line_frac
    dup_line_char_frac: float = 0.2  # share of characters in repeated lines above this: gopher_dup_line_char_frac
    top_2gram_frac: float = 0.20  # share of characters in the most frequent 2-gram above this: gopher_top_2gram
    top_3gram_frac: float = 0.18  # share of characters in the most frequent 3-gram above this: gopher_top_3gram
    top_4gram_frac: float = 0.16  # share of characters in the most frequent 4-gram above this: gopher_top_4gram
    dup_5gram_frac: float = 0.15  # share of characters in repeated 5-grams above this: gopher_dup_5gram
    dup_6gram_frac: float = 0.14  # share of characters in repeated 6-grams above this: gopher_dup_6gram
    dup_7gram_frac: float = 0.13  # share of characters in repeated 7-grams above this: gopher_dup_7gram
    dup_8gram_frac: float = 0.12  # share of characters in repeated 8-grams above this: gopher_dup_8gram
    dup_9gram_frac: float = 0.11  # share of characters in repeated 9-grams above this: gopher_dup_9gram
    dup_10gram_frac: float = 0.10  # share of characters in repeated 10-grams above this: gopher_dup_10gram
    keep_empty: bool = False             # true: empty text is kept (nothing in it repeats)
    top_ngram_needs_repeat: bool = False  # true: an n-gram seen once is not a "top" n-gram
    exact_ngrams: bool = False            # true: n-grams equal only when their tokens are
    words: str = "spacy"  # "spacy" (DataTrove's tokens) or "regex" (Quarry's splitter, no spaCy)
    language: str = "en"  # spaCy language code for the word splitting
    skip: list[str] = field(default_factory=list)  # reason codes of rules to turn off

    def __post_init__(self):
        check_skip(self.skip, GOPHER_REPETITION_REASONS, "gopher_repetition")
        check_nonnegative(self, [f for f in self.__dataclass_fields__ if f.endswith("_frac")])
        check_shares(self, [f for f in self.__dataclass_fields__ if f.endswith("_frac")])
        self._check_top_ngram_fracs()
        check_words(self)

    def _check_top_ngram_fracs(self) -> None:
        """``top_Ngram_frac = 0`` sets every document of N tokens or more aside where an n-gram seen once can be
        the top one (``top_ngram_needs_repeat = false``, DataTrove's way): its characters are above 0 of the
        text. (With ``top_ngram_needs_repeat = true`` it means: no N-gram may repeat; the ``dup_*`` limits at 0
        likewise mean no repeat at all.)"""
        if self.top_ngram_needs_repeat:
            return
        for n in TOP_NGRAMS:
            name = f"top_{n}gram_frac"
            if getattr(self, name) == 0 and f"gopher_top_{n}gram" not in self.skip:
                raise ValueError(
                    f"{name} = 0: every document of {n} tokens or more would be set aside (its most frequent "
                    f"{n}-gram, even seen once, has characters); give a share above 0, set top_ngram_needs_repeat = "
                    f"true (only a repeated {n}-gram counts), or list gopher_top_{n}gram in `skip`")


class GopherRepetition(HeuristicStage):
    Params = GopherRepetitionParams
    REASONS = GOPHER_REPETITION_REASONS

    def check(self, text: str, recent: dict | None = None) -> str | None:
        p, on = self.params, self.on
        n_chars = len(text)
        if not n_chars:
            return None if p.keep_empty or not on("gopher_empty_doc") else "gopher_empty_doc"
        paragraphs = split_paragraphs(text.strip())
        dup, dup_chars = find_duplicates(paragraphs)
        if on("gopher_dup_para_frac") and dup / len(paragraphs) > p.dup_para_frac:
            return "gopher_dup_para_frac"
        if on("gopher_dup_para_char_frac") and dup_chars / n_chars > p.dup_para_char_frac:
            return "gopher_dup_para_char_frac"
        lines = split_lines(text)
        dup, dup_chars = find_duplicates(lines)
        if on("gopher_dup_line_frac") and dup / len(lines) > p.dup_line_frac:
            return "gopher_dup_line_frac"
        if on("gopher_dup_line_char_frac") and dup_chars / n_chars > p.dup_line_char_frac:
            return "gopher_dup_line_char_frac"
        return self._ngram_reason(text, n_chars, recent)

    def _ngram_reason(self, text: str, n_chars: int, recent: dict | None) -> str | None:
        p, on = self.params, self.on
        glued = None
        if p.words == "spacy" and not p.exact_ngrams:  # token lengths and characters by chunk id
            glued = spacy_words(p.language).glued(text, recent)
        if glued is None:
            toks = self.tokens(text, recent)
            lens, code = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks)), None
        else:
            (lens, code), toks = glued, glued[0]
        cum = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=cum[1:])
        min_count = 2 if p.top_ngram_needs_repeat else 1
        for n, chars in zip(TOP_NGRAMS, top_ngrams_chars(toks, TOP_NGRAMS, cum, min_count, code)):
            reason = f"gopher_top_{n}gram"
            if on(reason) and chars / n_chars > getattr(p, f"top_{n}gram_frac"):
                return reason
        dup = [n for n in DUP_NGRAMS if on(f"gopher_dup_{n}gram")]
        for n, chars in dup_ngrams_chars(toks, dup, cum, code, glued=not p.exact_ngrams).items():
            if chars / n_chars > getattr(p, f"dup_{n}gram_frac"):
                return f"gopher_dup_{n}gram"
        return None

"""``gopher_quality``: Gopher's quality rules (the Gopher paper's Table A1), as DataTrove 0.10.1's
``GopherQualityFilter`` decides them with its defaults.

Word counts, mean word length, ``#`` and ellipses per token, bullet and ellipsis lines, the share
of tokens holding a letter and the stop words present; a document is set aside with the first rule
it fails (reason codes in ``GOPHER_QUALITY_REASONS``). Tokens are all of the ``words`` splitter's;
words are the tokens holding a character that is not punctuation. ``alpha_words_of = "words"``
counts letters among words (the paper) rather than tokens (DataTrove).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import filterfalse

from curate.stages.filter_base import HeuristicStage, check_nonnegative, check_shares, check_range, check_skip, check_words
from curate.text.punctuation import PUNCTUATION
from curate.text.spacy_words import spacy_words
from curate.text.token_stats import has_letter

GOPHER_STOP_WORDS = ["the", "be", "to", "of", "and", "that", "have", "with"]

GOPHER_QUALITY_REASONS = {
    "gopher_short_doc": "fewer words than min_doc_words",
    "gopher_long_doc": "more words than max_doc_words",
    "gopher_mean_word_length_low": "mean word length below min_avg_word_length",
    "gopher_mean_word_length_high": "mean word length above max_avg_word_length",
    "gopher_symbol_ratio": "'#' or ellipses per token above max_symbol_word_ratio",
    "gopher_bullet_lines": "share of lines starting with a bullet above max_bullet_lines_ratio",
    "gopher_ellipsis_lines": "share of lines ending with an ellipsis above max_ellipsis_lines_ratio",
    "gopher_alpha_words": "share of tokens (or words) holding a letter below min_alpha_words_ratio",
    "gopher_stop_words": "fewer distinct stop words than min_stop_words",
}
ALPHA_WORDS_OF = ("tokens", "words")


@dataclass
class GopherQualityParams:
    min_doc_words: int = 50  # fewer words than this: gopher_short_doc
    max_doc_words: int = 100_000  # more words than this: gopher_long_doc
    min_avg_word_length: float = 3.0  # mean word length (characters) below this: gopher_mean_word_length_low
    max_avg_word_length: float = 10.0  # mean word length above this: gopher_mean_word_length_high
    max_symbol_word_ratio: float = 0.1  # '#' or ellipses per token above this: gopher_symbol_ratio
    # share of lines starting with a bullet (• or -) above this: gopher_bullet_lines
    max_bullet_lines_ratio: float = 0.9
    max_ellipsis_lines_ratio: float = 0.3  # share of lines ending with an ellipsis above this: gopher_ellipsis_lines
    # share of tokens (or words, alpha_words_of) holding a letter below this: gopher_alpha_words
    min_alpha_words_ratio: float = 0.8
    alpha_words_of: str = "tokens"  # "tokens" (DataTrove) or "words" (the Gopher paper)
    min_stop_words: int = 2  # fewer distinct stop_words than this: gopher_stop_words
    # the stop words counted by min_stop_words (case-sensitive)
    stop_words: list[str] = field(default_factory=lambda: list(GOPHER_STOP_WORDS))
    words: str = "spacy"  # "spacy" (DataTrove's tokens) or "regex" (Quarry's splitter, no spaCy)
    language: str = "en"  # spaCy language code for the word splitting
    skip: list[str] = field(default_factory=list)  # reason codes of rules to turn off

    def __post_init__(self):
        check_skip(self.skip, GOPHER_QUALITY_REASONS, "gopher_quality")
        check_nonnegative(self, [f for f in self.__dataclass_fields__
                                  if f not in ("stop_words", "skip", "words", "language", "alpha_words_of")])
        check_shares(self, ["max_bullet_lines_ratio", "max_ellipsis_lines_ratio", "min_alpha_words_ratio"])
        # a token is never empty and holds no whitespace: a stop word that does is never found
        findable = {w for w in self.stop_words if w.split() == [w]}
        if self.min_stop_words > len(findable) and "gopher_stop_words" not in self.skip:
            never = sorted(set(self.stop_words) - findable)
            why = f" ({', '.join(map(repr, never))}: empty or holding whitespace, never a token)" if never else ""
            raise ValueError(f"min_stop_words = {self.min_stop_words} is more than the {len(findable)} "
                             f"distinct stop_words{why}: every document would be set aside (lower min_stop_words, "
                             "add stop_words, or list gopher_stop_words in `skip`)")
        if self.max_doc_words < 1 and "gopher_long_doc" not in self.skip:
            raise ValueError(f"max_doc_words = {self.max_doc_words!r}: every document with a word would be set aside; "
                             "must be >= 1 (list gopher_long_doc in `skip` to turn the rule off)")
        if self.max_avg_word_length < 1 and "gopher_mean_word_length_high" not in self.skip:
            raise ValueError(f"max_avg_word_length = {self.max_avg_word_length!r}: a word is at least one character "
                             "long, so every document with a word would be set aside; must be >= 1 (list "
                             "gopher_mean_word_length_high in `skip` to turn the rule off)")
        check_range(self, "min_doc_words", "max_doc_words")
        check_range(self, "min_avg_word_length", "max_avg_word_length")
        if self.alpha_words_of not in ALPHA_WORDS_OF:
            raise ValueError(f"alpha_words_of = {self.alpha_words_of!r}; allowed: {', '.join(ALPHA_WORDS_OF)}")
        check_words(self)


class GopherQuality(HeuristicStage):
    Params = GopherQualityParams
    REASONS = GOPHER_QUALITY_REASONS

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._stop_words = frozenset(self.params.stop_words)
        self._whole_stop_words = frozenset()  # stop words that are one chunk and spaCy's one token
        if self.params.words == "spacy":
            single = [w for w in self._stop_words if w.split() == [w]]
            toks = spacy_words(self.params.language).chunk_tokens(single)
            self._whole_stop_words = frozenset(w for w, t in zip(single, toks) if t == (w,))

    def check(self, text: str, recent: dict | None = None) -> str | None:
        p, on = self.params, self.on
        if p.words == "spacy":  # the counts of each chunk's tokens are remembered with its tokens
            n_tokens, n_words, word_chars, tok_letter, word_letter = spacy_words(p.language).text_stats(text, recent)
        else:
            toks = self.tokens(text, recent)
            n_tokens = len(toks)
            words = list(filterfalse(PUNCTUATION.issuperset, toks))  # is_word, without a Python call per token
            n_words, word_chars = len(words), sum(map(len, words))
            tok_letter = word_letter = None
        if on("gopher_short_doc") and n_words < p.min_doc_words:
            return "gopher_short_doc"
        if on("gopher_long_doc") and n_words > p.max_doc_words:
            return "gopher_long_doc"
        if not n_words:  # only reachable with min_doc_words = 0 or the rule skipped
            return None
        mean_len = word_chars / n_words
        if on("gopher_mean_word_length_low") and mean_len < p.min_avg_word_length:
            return "gopher_mean_word_length_low"
        if on("gopher_mean_word_length_high") and mean_len > p.max_avg_word_length:
            return "gopher_mean_word_length_high"
        if on("gopher_symbol_ratio") and (
            text.count("#") / n_tokens > p.max_symbol_word_ratio
            or (text.count("...") + text.count("\u2026")) / n_tokens > p.max_symbol_word_ratio
        ):
            return "gopher_symbol_ratio"
        lines = text.splitlines()
        if lines:
            if on("gopher_bullet_lines"):
                bullets = sum(1 for s in lines if s.lstrip().startswith(("\u2022", "-")))
                if bullets / len(lines) > p.max_bullet_lines_ratio:
                    return "gopher_bullet_lines"
            if on("gopher_ellipsis_lines"):
                ell = sum(1 for s in lines if s.rstrip().endswith(("...", "\u2026")))
                if ell / len(lines) > p.max_ellipsis_lines_ratio:
                    return "gopher_ellipsis_lines"
        if on("gopher_alpha_words"):
            by_tokens = p.alpha_words_of == "tokens"
            if tok_letter is not None:
                with_letter, pool_size = (tok_letter, n_tokens) if by_tokens else (word_letter, n_words)
            else:
                pool = toks if by_tokens else words
                # has_letter on each token; most are all letters (str.isalpha), only the rest are looked into
                rest = list(filterfalse(str.isalpha, pool))
                with_letter, pool_size = len(pool) - len(rest) + sum(map(has_letter, rest)), len(pool)
            if with_letter / pool_size < p.min_alpha_words_ratio:
                return "gopher_alpha_words"
        if on("gopher_stop_words"):
            if p.words == "spacy":
                # a chunk that is a stop word is that token: when such chunks are enough, so are
                # the tokens (looked at only where they are not)
                sw = spacy_words(p.language)
                if len(self._whole_stop_words.intersection(sw.split(text, recent))) >= p.min_stop_words:
                    return None
                toks = sw.tokens(text, recent)
            if len(self._stop_words.intersection(toks)) < p.min_stop_words:
                return "gopher_stop_words"
        return None

"""Heuristic quality filters: Gopher quality, Gopher repetition, C4 and FineWeb rules.

Each class is a map stage that makes the decisions of DataTrove 0.10.1's filter of the same name
with its default thresholds (``GopherQualityFilter``, ``GopherRepetitionFilter``, ``C4QualityFilter``,
``FineWebQualityFilter``, which follow the Gopher paper's Table A1, TFDS's ``c4_utils`` and the
FineWeb paper); ``tests/test_datatrove_parity.py`` runs both side by side on real documents of seven
languages. Every threshold is a pipeline key; every rule that drops a document has its own reason
code, listed below (DataTrove's name for it in brackets). ``skip = ["code", ...]`` turns rules off
by their codes. Rules run in the order listed; a document is set aside with the first rule it fails.
Where Quarry can do otherwise (a faster splitter, a fix of a DataTrove quirk) a named option says so;
its default is DataTrove's behaviour.

Words. ``words = "spacy"`` (default): DataTrove's tokens, spaCy's rule-based tokenizer for
``language`` (default ``"en"``, a spaCy language code; DataTrove's filters use English unless told
otherwise), punctuation tokens included; ``words = "regex"``: Quarry's regex splitter, no spaCy (see
``curate.stages.words``). "Tokens" below are all of them; "words" are the tokens holding a character
that is not punctuation (DataTrove's ``PUNCTUATION_SET``, see ``curate.stages.punctuation``).

``gopher_quality`` (class ``GopherQuality``):

- ``gopher_short_doc``: fewer than ``min_doc_words`` (50) words.
- ``gopher_long_doc``: more than ``max_doc_words`` (100,000) words.
- ``gopher_mean_word_length_low`` [``gopher_below_avg_threshold``]: mean word length below
  ``min_avg_word_length`` (3).
- ``gopher_mean_word_length_high`` [``gopher_above_avg_threshold``]: above ``max_avg_word_length`` (10).
- ``gopher_symbol_ratio`` [``gopher_too_many_hashes``, ``gopher_too_many_ellipsis``]: ``#``
  characters per token, or ellipses (``...`` or ``…``) per token, above ``max_symbol_word_ratio`` (0.1).
- ``gopher_bullet_lines`` [``gopher_too_many_bullets``]: more than ``max_bullet_lines_ratio`` (0.9)
  of the lines start with ``•`` or ``-``.
- ``gopher_ellipsis_lines`` [``gopher_too_many_end_ellipsis``]: more than
  ``max_ellipsis_lines_ratio`` (0.3) of the lines end with an ellipsis.
- ``gopher_alpha_words`` [``gopher_below_alpha_threshold``]: fewer than ``min_alpha_words_ratio``
  (0.8; DataTrove's ``max_non_alpha_words_ratio``) of the tokens hold a letter. Option
  ``alpha_words_of``: ``"tokens"`` (default, DataTrove: punctuation tokens count in the
  denominator) or ``"words"`` (the Gopher paper's "words with at least one alphabetic character"
  among words: punctuation tokens do not count, so dialogue-heavy prose is no longer set aside).
- ``gopher_stop_words`` [``gopher_enough_stop_words``]: fewer than ``min_stop_words`` (2) distinct
  tokens of ``stop_words`` (the, be, to, of, and, that, have, with; case-sensitive).

``gopher_repetition`` (class ``GopherRepetition``); fractions of characters are of ``len(text)``:

- ``gopher_empty_doc`` [``empty``]: the text is empty (``keep_empty = true`` keeps it).
- ``gopher_dup_para_frac``: duplicate paragraphs (split on blank lines) / paragraphs > 0.3.
- ``gopher_dup_para_char_frac``: characters in duplicate paragraphs > 0.2.
- ``gopher_dup_line_frac``: duplicate lines / lines > 0.3.
- ``gopher_dup_line_char_frac``: characters in duplicate lines > 0.2.
- ``gopher_top_2gram``, ``gopher_top_3gram``, ``gopher_top_4gram`` [``top_n_gram``]: characters of
  the most frequent token n-gram (its length joined with spaces, times its count) > 0.20 / 0.18 /
  0.16. As in DataTrove an n-gram that occurs once counts too, so a text of a few words is dropped
  here; option ``top_ngram_needs_repeat = true``: only an n-gram that occurs twice counts.
- ``gopher_dup_5gram`` ... ``gopher_dup_10gram`` [``duplicated_n_n_grams``]: characters (without
  spaces) of n-grams that repeat an earlier n-gram, scanning left to right and jumping past each
  repeat, > 0.15, 0.14, 0.13, 0.12, 0.11, 0.10 for n = 5..10. As in DataTrove two n-grams are equal
  when their tokens glued together are (``a bc`` equals ``ab c``); option ``exact_ngrams = true``:
  equal only when their tokens are.

``c4_quality`` (class ``C4Quality``), C4's rules. C4 removes lines and drops documents; the kept
lines (stripped, citations like ``[1]`` or ``[edit]`` removed) are written back as the text, one
per line. Lines are removed when they hold a word longer than ``max_word_length`` (1,000), do not
end in terminal punctuation (``end_punctuation``: ``. ? ! " '`` as in DataTrove; add ``”`` and
``’`` for text with typographic quotes; a line ending in ``...`` does not count;
``filter_no_terminal_punct``), have fewer than ``min_words_per_line`` (3) words, mention
``javascript`` (``filter_javascript``) or hold a cookie/terms-of-use/privacy-policy phrase
(``filter_policy``). Documents are dropped with:

- ``c4_lorem_ipsum`` [``lorem_ipsum``]: a kept line holds "lorem ipsum" (``filter_lorem_ipsum``).
- ``c4_curly_bracket`` [``curly_bracket``]: a kept line holds ``{`` (``filter_curly_bracket``).
- ``c4_too_few_sentences`` [``too_few_sentences``]: fewer than ``min_num_sentences`` (5) sentences
  in the kept lines, counted as DataTrove does (spaCy's sentencizer over the ``words`` tokens;
  with ``words = "regex"`` a regex sentence splitter).

As in DataTrove and TFDS, the lorem-ipsum and curly-bracket tests look only at lines that passed
the line rules before them. ``split_paragraph = false`` applies the line rules to sentences instead
of lines. Numeric limits set to -1 are off, as in DataTrove.

``fineweb_quality`` (class ``FineWebQuality``), FineWeb's rules over the non-empty lines of
``text.split("\\n")``:

- ``fineweb_empty`` [``empty``]: no non-empty line.
- ``fineweb_line_punct_ratio``: lines ending in ``stop_chars`` (DataTrove's ``TERMINAL_PUNCTUATION``,
  end marks of many scripts) / lines < ``line_punct_thr`` (0.12) (``line_punct_exclude_zero``
  keeps documents where the ratio is exactly 0).
- ``fineweb_short_line_ratio``: lines of at most ``short_line_length`` (30) characters / lines
  > ``short_line_thr`` (0.67).
- ``fineweb_char_dup_ratio``: characters in lines that repeat an earlier line / characters other
  than newlines > ``char_duplicates_ratio`` (0.01).
- ``fineweb_list_ratio``: newlines / tokens > ``new_line_ratio`` (0.3).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import filterfalse
from typing import ClassVar

import numba as nb
import numpy as np
import pyarrow as pa

from curate.schema import TEXT
from curate.stages.base import MapStage, StageResult, set_column, split
from curate.stages.punctuation import PUNCTUATION, TERMINAL_PUNCTUATION
from curate.stages.words import (check_splitter, count_sentences, line_sentences, regex_sentences, regex_tokens,
                                 spacy_words)

_PARAGRAPH_RE = re.compile(r"\n{2,}")
_LINES_RE = re.compile(r"\n+")

split_sentences = regex_sentences  # the regex sentence splitter (``words = "regex"``)


def tokens(text: str, words: str = "regex", language: str = "en") -> list[str]:
    """Tokens of ``text`` under splitter ``words`` (``"regex"`` unless told)."""
    return regex_tokens(text) if words == "regex" else spacy_words(language).tokens(text)


def is_word(tok: str) -> bool:
    """A token holding a character that is not punctuation (DataTrove's non-symbol word)."""
    return not PUNCTUATION.issuperset(tok)


def has_letter(tok: str) -> bool:
    return tok.isalpha() or any(map(str.isalpha, tok))


def split_lines(text: str) -> list[str]:
    """``re.split(r"\n+", text)``, with ``str.split`` (several times faster)."""
    parts = text.split("\n")
    if len(parts) < 3 or "\n\n" not in text:
        return parts
    return [parts[0], *filter(None, parts[1:-1]), parts[-1]]


def split_paragraphs(text: str) -> list[str]:
    """``re.split(r"\n{2,}", text)``, with ``str.split`` where no run of three newlines is there."""
    if "\n\n\n" in text:
        return _PARAGRAPH_RE.split(text)
    return text.split("\n\n")


def find_duplicates(items: list[str]) -> tuple[int, int]:
    """(number of items equal to an earlier item, total characters of those items)."""
    seen: set[str] = set()
    dup, dup_chars = 0, 0
    for x in items:
        if x in seen:
            dup += 1
            dup_chars += len(x)
        else:
            seen.add(x)
    return dup, dup_chars


# --- shared stage plumbing ------------------------------------------------------------------


def _check_skip(skip: list[str], reasons: dict[str, str], stage: str) -> None:
    unknown = [s for s in skip if s not in reasons]
    if unknown:
        raise ValueError(f"{stage}: skip = {unknown[0]!r} is not a reason code; allowed: {', '.join(reasons)}")


def _check_nonnegative(params, names: list[str]) -> None:
    for n in names:
        if getattr(params, n) < 0:
            raise ValueError(f"{n} = {getattr(params, n)!r}: must be >= 0")


class _HeuristicStage(MapStage):
    """Runs ``check(text) -> reason | None`` over every document."""

    REASONS: ClassVar[dict[str, str]] = {}

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._skip = frozenset(self.params.skip)

    def on(self, code: str) -> bool:
        return code not in self._skip

    def tokens(self, text: str) -> list[str]:
        return tokens(text, self.params.words, self.params.language)

    def check(self, text: str) -> str | None:
        raise NotImplementedError

    def apply(self, table: pa.Table, context=None) -> StageResult:
        texts = table.column(TEXT).to_pylist()
        if self.params.words == "spacy":
            spacy_words(self.params.language).prefetch(texts)
        return split(table, self.name, [self.check(t) for t in texts])


def _check_words(params) -> None:
    check_splitter(params.words, params.language)


# --- Gopher quality -------------------------------------------------------------------------

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
    min_doc_words: int = 50
    max_doc_words: int = 100_000
    min_avg_word_length: float = 3.0
    max_avg_word_length: float = 10.0
    max_symbol_word_ratio: float = 0.1
    max_bullet_lines_ratio: float = 0.9
    max_ellipsis_lines_ratio: float = 0.3
    min_alpha_words_ratio: float = 0.8
    alpha_words_of: str = "tokens"  # "tokens" (DataTrove) or "words" (the Gopher paper)
    min_stop_words: int = 2
    stop_words: list[str] = field(default_factory=lambda: list(GOPHER_STOP_WORDS))
    words: str = "spacy"
    language: str = "en"
    skip: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_skip(self.skip, GOPHER_QUALITY_REASONS, "gopher_quality")
        _check_nonnegative(self, [f for f in self.__dataclass_fields__
                                  if f not in ("stop_words", "skip", "words", "language", "alpha_words_of")])
        if self.alpha_words_of not in ALPHA_WORDS_OF:
            raise ValueError(f"alpha_words_of = {self.alpha_words_of!r}; allowed: {', '.join(ALPHA_WORDS_OF)}")
        _check_words(self)


class GopherQuality(_HeuristicStage):
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

    def check(self, text: str) -> str | None:
        p, on = self.params, self.on
        if p.words == "spacy":  # the counts of each chunk's tokens are remembered with its tokens
            n_tokens, n_words, word_chars, tok_letter, word_letter = spacy_words(p.language).text_stats(text)
        else:
            toks = self.tokens(text)
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
                if len(self._whole_stop_words.intersection(sw.split(text))) >= p.min_stop_words:
                    return None
                toks = sw.tokens(text)
            if len(self._stop_words.intersection(toks)) < p.min_stop_words:
                return "gopher_stop_words"
        return None


# --- Gopher repetition ----------------------------------------------------------------------

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
    dup_para_frac: float = 0.3
    dup_para_char_frac: float = 0.2
    dup_line_frac: float = 0.3
    dup_line_char_frac: float = 0.2
    top_2gram_frac: float = 0.20
    top_3gram_frac: float = 0.18
    top_4gram_frac: float = 0.16
    dup_5gram_frac: float = 0.15
    dup_6gram_frac: float = 0.14
    dup_7gram_frac: float = 0.13
    dup_8gram_frac: float = 0.12
    dup_9gram_frac: float = 0.11
    dup_10gram_frac: float = 0.10
    keep_empty: bool = False             # true: empty text is kept (nothing in it repeats)
    top_ngram_needs_repeat: bool = False  # true: an n-gram seen once is not a "top" n-gram
    exact_ngrams: bool = False            # true: n-grams equal only when their tokens are
    words: str = "spacy"
    language: str = "en"
    skip: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_skip(self.skip, GOPHER_REPETITION_REASONS, "gopher_repetition")
        _check_nonnegative(self, [f for f in self.__dataclass_fields__ if f.endswith("_frac")])
        _check_words(self)


def ngram_stats(toks: list[str], ns: range, stop_early: bool = True):
    """For each n in ``ns`` (increasing, from 2): ``(n, gram, counts, first)`` where ``gram[i]``
    numbers the n-gram starting at token i (equal n-grams, equal numbers: exact, no hashing),
    ``counts[g]`` is how often n-gram g occurs and ``first[g]`` where it first occurs. With
    ``stop_early``, stops once no n-gram occurs twice (then no longer one can)."""
    size = len(toks)
    # a token's number: where it first occurs (< size)
    gram = np.fromiter(map({}.setdefault, toks, range(size)), dtype=np.int64, count=size)
    ids = gram
    for n in range(2, ns.stop):
        if n > size:
            return
        # an n-gram is an (n-1)-gram followed by a token: pair their numbers (< size * size), renumber
        gram = gram[:-1] * size + ids[n - 1:]
        _, first, gram, counts = np.unique(gram, return_index=True, return_inverse=True, return_counts=True)
        if n >= ns.start:
            yield n, gram, counts, first
        if stop_early and counts.max() < 2:
            return


_B = np.uint64(0x9E3779B97F4A7C15)  # an odd multiplier: invertible modulo 2**64
_C = np.uint64(0xC2B2AE3D27D4EB4F)


def glued_ngram_ids(toks: list[str], n: int, cum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DataTrove's n-gram identity, ``"".join(toks[i:i + n])``, as (``gram``, ``counts``) like
    ``ngram_stats`` (equal glued strings, equal numbers). A plain reference for tests; the stage
    uses ``glued_dup_chars``."""
    glued = "".join(toks)
    number: dict[str, int] = {}
    c = cum.tolist()
    gram = np.array([number.setdefault(glued[c[i]:c[i + n]], len(number)) for i in range(len(toks) - n + 1)],
                    dtype=np.int64)
    return gram, np.bincount(gram, minlength=1)


def _code_points(toks: list[str]) -> np.ndarray:
    """The code points of the tokens glued together."""
    return np.frombuffer("".join(toks).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def glued_dup_chars(toks: list[str], ns, cum: np.ndarray, code: np.ndarray | None = None) -> dict[int, int]:
    """``dup_ngram_chars`` for each n in ``ns`` with DataTrove's glued n-grams, all n at once.

    The glued n-gram at i is the slice ``cum[i]:cum[i + n]`` of the glued text. Every slice gets a
    key (a polynomial hash of its characters and its length) and goes into a hash table of distinct
    strings, where slices with equal keys are compared character by character: equal n-grams get
    equal class numbers and the result is exact (a hash collision only costs a comparison). Then DataTrove's left-to-right scan over the n-grams
    that occur twice or more. One numba call (``_glued_dup``)."""
    ns = list(ns)
    if not ns or not len(toks):
        return {n: 0 for n in ns}
    if code is None:
        code = _code_points(toks)
    out = _glued_dup(code, np.ascontiguousarray(cum, dtype=np.int64), np.array(ns, dtype=np.int64))
    return dict(zip(ns, out.tolist()))


def top_ngrams_chars(toks: list[str], ns, cum: np.ndarray, min_count: int = 1,
                     code: np.ndarray | None = None) -> list[int]:
    """``top_ngram_chars`` for each n in ``ns`` (token n-grams, equal when their tokens are), in one
    numba call: the n-grams go into a hash table keyed by their tokens' hashes, equal keys compared
    token by token (exact)."""
    ns = list(ns)
    if not len(toks):
        return [0] * len(ns)
    if code is None:
        code = _code_points(toks)
    return _top_ngrams(code, np.ascontiguousarray(cum, dtype=np.int64), np.array(ns, dtype=np.int64),
                       min_count).tolist()


@nb.njit(cache=True)
def _top_ngrams(code, cum, ns, min_count):
    out = np.zeros(len(ns), dtype=np.int64)
    ntok = len(cum) - 1
    base = np.uint64(0x9E3779B97F4A7C15)
    mix = np.uint64(0xC2B2AE3D27D4EB4F)
    th = np.empty(ntok, dtype=np.uint64)  # each token's hash (its characters and its length)
    for i in range(ntok):
        h = np.uint64(len(code) + 1)
        for k in range(cum[i], cum[i + 1]):
            h = h * base + np.uint64(code[k])
        th[i] = h ^ (np.uint64(cum[i + 1] - cum[i]) * mix)
    for t in range(len(ns)):
        n = ns[t]
        m = ntok - n + 1
        if m <= 0:
            continue
        cap = 4
        while cap < 2 * m:
            cap *= 2
        mask = cap - 1
        slot_key = np.zeros(cap, dtype=np.uint64)
        slot_first = np.full(cap, -1, dtype=np.int64)
        count = np.zeros(m, dtype=np.int64)  # by first position
        for i in range(m):
            h = np.uint64(0)
            for k in range(n):
                h = h * mix + th[i + k]
            j = np.int64((h >> np.uint64(17)) & np.uint64(mask))
            while True:
                f = slot_first[j]
                if f < 0:
                    slot_first[j] = i
                    slot_key[j] = h
                    count[i] = 1
                    break
                if slot_key[j] == h:
                    same = True
                    for k in range(n):
                        if not _same_slice(code, cum[f + k], cum[f + k + 1], cum[i + k], cum[i + k + 1]):
                            same = False
                            break
                    if same:
                        count[f] += 1
                        break
                j = (j + 1) & mask
        best, pos = 0, 0
        for i in range(m):  # the most frequent; on ties the one that occurs first (Counter.most_common)
            if count[i] > best:
                best, pos = count[i], i
        if best >= min_count:
            out[t] = (cum[pos + n] - cum[pos] + n - 1) * best
    return out


@nb.njit(cache=True)
def _same_slice(code, a, b, c, d) -> bool:
    if b - a != d - c:
        return False
    for k in range(b - a):
        if code[a + k] != code[c + k]:
            return False
    return True


@nb.njit(cache=True)
def _glued_dup(code, cum, ns):
    """For each n of ``ns``: characters of glued n-grams that repeat one seen before, DataTrove's
    scan (jumping n tokens past each repeat); see ``glued_dup_chars``."""
    out = np.zeros(len(ns), dtype=np.int64)
    ntok = len(cum) - 1
    size = len(code)
    base = np.uint64(0x9E3779B97F4A7C15)
    mix = np.uint64(0xC2B2AE3D27D4EB4F)
    prefix = np.zeros(size + 1, dtype=np.uint64)
    power = np.ones(size + 1, dtype=np.uint64)
    for k in range(size):
        prefix[k + 1] = prefix[k] * base + np.uint64(code[k])
        power[k + 1] = power[k] * base
    for t in range(len(ns)):
        n = ns[t]
        m = ntok - n + 1
        if m <= 1:
            continue
        keys = np.empty(m, dtype=np.uint64)
        for i in range(m):
            a, b = cum[i], cum[i + n]
            keys[i] = (prefix[b] - prefix[a] * power[b - a]) ^ (np.uint64(b - a) * mix)
        cap = 4
        while cap < 2 * m:
            cap *= 2
        mask = cap - 1
        slot_key = np.zeros(cap, dtype=np.uint64)
        slot_first = np.full(cap, -1, dtype=np.int64)  # first position of the string in this slot
        cls = np.empty(m, dtype=np.int64)
        count = np.zeros(m, dtype=np.int64)
        ncls = 0
        for i in range(m):  # an open-addressing table of the distinct strings
            h = keys[i]
            j = np.int64((h >> np.uint64(17)) & np.uint64(mask))
            while True:
                f = slot_first[j]
                if f < 0:
                    slot_first[j] = i
                    slot_key[j] = h
                    cls[i] = ncls
                    count[ncls] = 1
                    ncls += 1
                    break
                if slot_key[j] == h and _same_slice(code, cum[f], cum[f + n], cum[i], cum[i + n]):
                    cls[i] = cls[f]
                    count[cls[f]] += 1
                    break
                j = (j + 1) & mask
        seen = np.zeros(ncls + 1, dtype=np.bool_)
        total, free = 0, 0
        for p in range(m):
            c = cls[p]
            if p < free or count[c] < 2:
                continue
            if seen[c]:
                total += cum[p + n] - cum[p]
                free = p + n
            else:
                seen[c] = True
        out[t] = total
    return out


def top_ngram_chars(n: int, counts: np.ndarray, first: np.ndarray, cum: np.ndarray, min_count: int = 2) -> int:
    """Characters covered by the most frequent n-gram: its length joined with single spaces, times
    its count; on ties the one that occurs first (as ``Counter.most_common``); 0 when it occurs
    fewer than ``min_count`` times."""
    top = counts.max()
    if top < min_count:
        return 0
    tied = np.flatnonzero(counts == top)
    pos = int(first[tied].min())
    return int(cum[pos + n] - cum[pos] + n - 1) * int(top)


def dup_ngram_chars(n: int, gram: np.ndarray, counts: np.ndarray, cum: np.ndarray) -> int:
    """Characters (without spaces) of n-grams equal to an n-gram seen earlier in a left-to-right
    scan that jumps ``n`` tokens past each repeat (DataTrove's ``find_all_duplicate``). Only
    n-grams that occur twice or more can repeat, so only their positions are visited."""
    pos = np.flatnonzero(counts[gram] >= 2)
    if not len(pos):
        return 0
    chars = (cum[pos + n] - cum[pos]).tolist()
    seen: set[int] = set()
    total, free = 0, 0
    for p, g, c in zip(pos.tolist(), gram[pos].tolist(), chars):
        if p < free:  # jumped over
            continue
        if g in seen:
            total += c
            free = p + n
        else:
            seen.add(g)
    return total


class GopherRepetition(_HeuristicStage):
    Params = GopherRepetitionParams
    REASONS = GOPHER_REPETITION_REASONS

    def check(self, text: str) -> str | None:
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
        glued = None
        if p.words == "spacy" and not p.exact_ngrams:  # token lengths and characters by chunk id
            glued = spacy_words(p.language).glued(text)
        if glued is None:
            toks = self.tokens(text)
            lens, code = np.fromiter(map(len, toks), dtype=np.int64, count=len(toks)), None
        else:
            (lens, code), toks = glued, glued[0]
        cum = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=cum[1:])
        min_count = 2 if p.top_ngram_needs_repeat else 1
        last = DUP_NGRAMS[-1] if p.exact_ngrams else TOP_NGRAMS[-1]
        # exact n-grams stop early once none repeats (none longer can), unless a top n-gram seen
        # once still counts
        stop_early = p.top_ngram_needs_repeat or not any(on(f"gopher_top_{n}gram") for n in TOP_NGRAMS)
        if not p.exact_ngrams:  # the default: top n-grams and glued repeats, one numba call each
            if code is None:
                code = _code_points(toks)
            for n, chars in zip(TOP_NGRAMS, top_ngrams_chars(toks, TOP_NGRAMS, cum, min_count, code)):
                reason = f"gopher_top_{n}gram"
                if on(reason) and chars / n_chars > getattr(p, f"top_{n}gram_frac"):
                    return reason
            dup = [n for n in DUP_NGRAMS if on(f"gopher_dup_{n}gram")]
            for n, chars in glued_dup_chars(toks, dup, cum, code).items():
                if chars / n_chars > getattr(p, f"dup_{n}gram_frac"):
                    return f"gopher_dup_{n}gram"
            return None
        for n, gram, counts, first in ngram_stats(toks, range(TOP_NGRAMS[0], last + 1), stop_early=stop_early):
            if n in TOP_NGRAMS:
                code = f"gopher_top_{n}gram"
                if on(code) and top_ngram_chars(n, counts, first, cum, min_count) / n_chars > getattr(p, f"top_{n}gram_frac"):
                    return code
            elif n in DUP_NGRAMS:
                code = f"gopher_dup_{n}gram"
                if on(code) and dup_ngram_chars(n, gram, counts, cum) / n_chars > getattr(p, f"dup_{n}gram_frac"):
                    return code
        return None


# --- C4 -------------------------------------------------------------------------------------

C4_REASONS = {
    "c4_lorem_ipsum": "a kept line holds 'lorem ipsum'",
    "c4_curly_bracket": "a kept line holds '{'",
    "c4_too_few_sentences": "fewer sentences than min_num_sentences in the kept lines",
}
CITATION_RE = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
C4_END_PUNCTUATION = [".", "?", "!", '"', "'"]  # DataTrove's and TFDS's
C4_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
_POLICY_RE = re.compile("|".join(map(re.escape, C4_POLICY_SUBSTRINGS)))  # any of them, in one scan


@dataclass
class C4QualityParams:
    split_paragraph: bool = True          # rules apply to lines (C4); false: to sentences
    remove_citations: bool = True
    filter_no_terminal_punct: bool = True  # FineWeb sets this to false
    min_num_sentences: int = 5             # -1: off
    min_words_per_line: int = 3            # -1: off
    max_word_length: int = 1000            # -1: off
    filter_lorem_ipsum: bool = True
    filter_javascript: bool = True
    filter_curly_bracket: bool = True
    filter_policy: bool = True
    end_punctuation: list[str] = field(default_factory=lambda: list(C4_END_PUNCTUATION))
    words: str = "spacy"                   # how sentences are counted (see the module doc)
    language: str = "en"
    skip: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_skip(self.skip, C4_REASONS, "c4_quality")
        if not all(self.end_punctuation):
            raise ValueError("end_punctuation: empty strings are not allowed")
        for n in ("min_num_sentences", "min_words_per_line", "max_word_length"):
            if getattr(self, n) < -1:
                raise ValueError(f"{n} = {getattr(self, n)!r}: must be >= 0, or -1 for off")
        _check_words(self)


class C4Quality(_HeuristicStage):
    Params = C4QualityParams
    REASONS = C4_REASONS

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._end = tuple(self.params.end_punctuation)

    def _sentences(self, text: str) -> list[str]:
        """DataTrove's ``split_into_sentences`` for ``split_paragraph = false``."""
        p = self.params
        if p.words == "regex":
            return regex_sentences(text)
        from curate.stages.words import spacy_sentences
        return spacy_sentences(text, p.language)

    def clean(self, text: str) -> tuple[str | None, str]:
        """(reason or None, the text made of the kept lines)."""
        p, on = self.params, self.on
        pieces = text.splitlines() if p.split_paragraph else self._sentences(text)
        n_sentences = 0
        kept = []
        # every kept line holds at least one sentence: sentences are counted only where the kept
        # lines are fewer than the minimum (most documents have more)
        count = p.min_num_sentences != -1 and on("c4_too_few_sentences")
        pending: list[tuple] = []  # kept lines (chunks start:stop, line, its words and chunks), to count
        stop = 0
        for line in pieces:
            line = line.strip()
            words = line.split()
            start, stop = stop, stop + len(words)
            if p.max_word_length != -1 and len(line) > p.max_word_length and max(map(len, words)) > p.max_word_length:
                continue
            chunks = words  # the line's chunks, while citations leave it as it is
            if p.remove_citations and "[" in line:
                cited, line = line, CITATION_RE.sub("", line)
                if line != cited:
                    chunks = None
            if p.filter_no_terminal_punct and (not line.endswith(self._end) or line.endswith("...")):
                continue
            if len(words) < p.min_words_per_line:
                continue
            lower = line.lower()
            if p.filter_lorem_ipsum and on("c4_lorem_ipsum") and "lorem ipsum" in lower:
                return "c4_lorem_ipsum", text
            if p.filter_javascript and "javascript" in lower:
                continue
            if p.filter_curly_bracket and on("c4_curly_bracket") and "{" in line:
                return "c4_curly_bracket", text
            if p.filter_policy and _POLICY_RE.search(lower):
                continue
            if not count:
                pass
            elif not p.split_paragraph:
                n_sentences += 1
            else:
                pending.append((start, stop, line, words, chunks))
            kept.append(line)
        if count and p.split_paragraph:
            n_sentences = sum(1 for line in kept if line)  # a lower bound: a line holds a sentence
            if n_sentences < p.min_num_sentences:  # not enough: counted
                # spaCy's sentences of kept lines are counted over the document's chunks (the chunks
                # of its lines one after the other), in one call
                by_chunks = p.words == "spacy"
                ranges: list[tuple[int, int, str]] = []  # chunks start:stop of kept lines, and the line
                n_sentences = 0
                for start, stop_, line, words, chunks in pending:
                    if by_chunks and chunks is not None and \
                            len(line) - sum(map(len, words)) == line.count(" ") == len(words) - 1:
                        ranges.append((start, stop_, line))  # single spaces only
                    else:
                        n_sentences += count_sentences(line, p.words, p.language, chunks)
                if ranges:
                    n_sentences += self._count_ranges(text, stop, ranges)
        if count and n_sentences < p.min_num_sentences:
            return "c4_too_few_sentences", text
        return None, ("\n" if p.split_paragraph else " ").join(kept).strip()

    def _count_ranges(self, text: str, n_chunks: int, ranges: list[tuple[int, int, str]]) -> int:
        """``count_sentences`` of the lines whose chunks are ``ranges`` of ``text.split()``."""
        sw = spacy_words(self.params.language)
        codes = sw.text_sentence_codes(text)
        if len(codes) != n_chunks:  # not the lines' chunks (cannot happen: line breaks are spaces)
            return sum(count_sentences(line, "spacy", self.params.language) for _, _, line in ranges)
        return line_sentences(codes, [r[0] for r in ranges], [r[1] for r in ranges])

    def check(self, text: str) -> str | None:
        return self.clean(text)[0]

    def apply(self, table: pa.Table, context=None) -> StageResult:
        texts = table.column(TEXT).to_pylist()
        results = [self.clean(t) for t in texts]
        texts = pa.array([r[1] for r in results], table.schema.field(TEXT).type)
        return split(set_column(table, TEXT, texts), self.name, [r[0] for r in results])


# --- FineWeb --------------------------------------------------------------------------------

FINEWEB_REASONS = {
    "fineweb_empty": "no non-empty line",
    "fineweb_line_punct_ratio": "share of lines ending in punctuation below line_punct_thr",
    "fineweb_short_line_ratio": "share of short lines above short_line_thr",
    "fineweb_char_dup_ratio": "share of characters in duplicated lines above char_duplicates_ratio",
    "fineweb_list_ratio": "newlines per token above new_line_ratio",
}
FINEWEB_STOP_CHARS = sorted(TERMINAL_PUNCTUATION)  # DataTrove's default stop_chars


@dataclass
class FineWebQualityParams:
    line_punct_thr: float = 0.12
    line_punct_exclude_zero: bool = False
    short_line_thr: float = 0.67
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3
    stop_chars: list[str] = field(default_factory=lambda: list(FINEWEB_STOP_CHARS))
    words: str = "spacy"
    language: str = "en"
    skip: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_skip(self.skip, FINEWEB_REASONS, "fineweb_quality")
        if not all(self.stop_chars):
            raise ValueError("stop_chars: empty strings are not allowed")
        _check_nonnegative(self, ["line_punct_thr", "short_line_thr", "short_line_length",
                                  "char_duplicates_ratio", "new_line_ratio"])
        _check_words(self)


class FineWebQuality(_HeuristicStage):
    Params = FineWebQualityParams
    REASONS = FINEWEB_REASONS

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._stop = tuple(self.params.stop_chars)

    def check(self, text: str) -> str | None:
        p, on = self.params, self.on
        lines = [s for s in text.split("\n") if s.strip()]
        n_lines = len(lines)
        if not n_lines:
            return "fineweb_empty" if on("fineweb_empty") else None
        if on("fineweb_line_punct_ratio"):
            ratio = sum(1 for s in lines if s.endswith(self._stop)) / n_lines
            if ratio < p.line_punct_thr and not (ratio == 0 and p.line_punct_exclude_zero):
                return "fineweb_line_punct_ratio"
        if on("fineweb_short_line_ratio"):
            if sum(1 for s in lines if len(s) <= p.short_line_length) / n_lines > p.short_line_thr:
                return "fineweb_short_line_ratio"
        if on("fineweb_char_dup_ratio"):
            n_chars = len(text) - text.count("\n")
            if find_duplicates(lines)[1] / n_chars > p.char_duplicates_ratio:
                return "fineweb_char_dup_ratio"
        if on("fineweb_list_ratio"):
            newlines = text.count("\n")
            # every whitespace-separated chunk is at least one token: when the newlines per chunk
            # pass, the newlines per token do too, and the text need not be split into tokens
            if newlines / len(text.split()) > p.new_line_ratio:
                n_tokens = len(self.tokens(text))
                if n_tokens and newlines / n_tokens > p.new_line_ratio:
                    return "fineweb_list_ratio"
        return None

    def apply(self, table: pa.Table, context=None) -> StageResult:  # tokens are rarely needed: no prefetch
        return split(table, self.name, [self.check(t) for t in table.column(TEXT).to_pylist()])

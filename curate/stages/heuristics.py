"""Heuristic quality filters: Gopher quality, Gopher repetition, C4 and FineWeb rules.

Each class is a map stage with DataTrove's default thresholds (DataTrove's ``GopherQualityFilter``,
``GopherRepetitionFilter``, ``C4QualityFilter`` and ``FineWebQualityFilter``, which follow the Gopher
paper's Table A1, TFDS's ``c4_utils`` and the FineWeb paper). Every threshold is a pipeline key; every
rule that drops a document has its own reason code, listed below. ``skip = ["code", ...]`` turns
rules off by their codes. Rules run in the order listed and a document is set aside with the
first rule it fails.

Words. DataTrove splits words with NLTK's Treebank tokenizer; this module uses one regex instead
(no NLTK, no downloads) that makes the same kinds of tokens: words (letters and digits, keeping
inner ``-`` and ``.`` as in ``twenty-one`` and ``U.S``), numbers with separators (``1,000``,
``1:26``), apostrophe tails as their own tokens like Treebank's ``'s`` (``Emma's`` -> ``Emma``,
``'s``), and punctuation tokens (``...`` and ``--`` whole, any other symbol alone). "Tokens" below
are both kinds; "words" are the tokens that hold a letter or digit. Each stage splits a document
once and shares the result across its rules.

``gopher_quality`` (class ``GopherQuality``), Gopher's quality rules:

- ``gopher_short_doc``: fewer than ``min_doc_words`` (50) words.
- ``gopher_long_doc``: more than ``max_doc_words`` (100,000) words.
- ``gopher_mean_word_length_low``: mean word length below ``min_avg_word_length`` (3).
- ``gopher_mean_word_length_high``: mean word length above ``max_avg_word_length`` (10).
- ``gopher_symbol_ratio``: ``#`` characters per token, or ellipses (``...`` or ``…``) per token,
  above ``max_symbol_word_ratio`` (0.1).
- ``gopher_bullet_lines``: more than ``max_bullet_lines_ratio`` (0.9) of the lines start with a
  bullet (``•`` or ``-``).
- ``gopher_ellipsis_lines``: more than ``max_ellipsis_lines_ratio`` (0.3) of the lines end with an
  ellipsis.
- ``gopher_alpha_words``: fewer than ``min_alpha_words_ratio`` (0.8) of the tokens hold a letter
  (DataTrove calls this key ``max_non_alpha_words_ratio``; the test is the same).
- ``gopher_stop_words``: fewer than ``min_stop_words`` (2) distinct words of ``stop_words``
  (the, be, to, of, and, that, have, with), matched case-sensitively as DataTrove does.

``gopher_repetition`` (class ``GopherRepetition``), Gopher's repetition rules; fractions of
characters are of ``len(text)``:

- ``gopher_dup_para_frac``: duplicate paragraphs (split on blank lines) / paragraphs > 0.3.
- ``gopher_dup_para_char_frac``: characters in duplicate paragraphs > 0.2.
- ``gopher_dup_line_frac``: duplicate lines / lines > 0.3.
- ``gopher_dup_line_char_frac``: characters in duplicate lines > 0.2.
- ``gopher_top_2gram``, ``gopher_top_3gram``, ``gopher_top_4gram``: characters covered by the most
  frequent token n-gram (its length with single spaces, times its count) > 0.20 / 0.18 / 0.16.
  Unlike DataTrove, an n-gram must occur at least twice to count (a text too short to repeat
  anything is not repetitive; DataTrove drops e.g. a two-word text here).
- ``gopher_dup_5gram`` ... ``gopher_dup_10gram``: characters (without spaces) of n-grams that
  repeat an earlier n-gram, scanning left to right and jumping past each repeat, > 0.15, 0.14,
  0.13, 0.12, 0.11, 0.10 for n = 5..10.

Empty text has nothing repeated and is kept by this stage.

``c4_quality`` (class ``C4Quality``), C4's rules. C4 removes lines and drops documents; the kept
lines (stripped, citations like ``[1]`` or ``[edit]`` removed) are written back as the text, one
per line. Lines are removed when they hold a word longer than ``max_word_length`` (1,000), do not
end in terminal punctuation (``end_punctuation``: ``. ? ! " '`` as in DataTrove, plus the closing
typographic quotes ``”`` and ``’``, which the ``normalize`` stage keeps; a line ending in ``...``
does not count; ``filter_no_terminal_punct``), have fewer than ``min_words_per_line`` (3) words, mention
``javascript`` (``filter_javascript``) or hold a cookie/terms-of-use/privacy-policy phrase
(``filter_policy``). Documents are dropped with:

- ``c4_lorem_ipsum``: a kept line holds "lorem ipsum" (``filter_lorem_ipsum``).
- ``c4_curly_bracket``: a kept line holds ``{`` (``filter_curly_bracket``).
- ``c4_too_few_sentences``: fewer than ``min_num_sentences`` (5) sentences in the kept lines.

As in DataTrove and TFDS, the lorem-ipsum and curly-bracket tests look only at lines that passed
the line rules before them. Sentences are counted with a regex splitter (end marks ``. ! ?``
followed by space, not after common abbreviations or initials) instead of NLTK's Punkt.
``split_paragraph = false`` applies the line rules to sentences instead of lines. Numeric
limits set to -1 are off, as in DataTrove.

``fineweb_quality`` (class ``FineWebQuality``), FineWeb's rules; lines are ``text.split("\\n")``:

- ``fineweb_line_punct_ratio``: lines ending in ``stop_chars`` (``. ' " ! ?`` as in DataTrove, plus
  ``”`` and ``’``) / lines <= ``line_punct_thr`` (0.12)
  (``line_punct_exclude_zero`` keeps documents where the ratio is exactly 0).
- ``fineweb_short_line_ratio``: lines of at most ``short_line_length`` (30) characters / lines
  >= ``short_line_thr`` (0.67).
- ``fineweb_char_dup_ratio``: characters in duplicated non-empty lines / characters other than
  newlines >= ``char_duplicates_ratio`` (0.01).
- ``fineweb_list_ratio``: newlines / tokens > ``new_line_ratio`` (0.3).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pyarrow as pa

from curate.schema import TEXT
from curate.stages.base import MapStage, StageResult, set_column, split

# --- splitting ------------------------------------------------------------------------------

_NUMBER = r"\d+(?:[.,:/]\d+)+"          # 1,000  3.14  1:26  12/05
_WORD = r"\w+(?:[-.]\w+)*"               # twenty-one  U.S  e.g
_CLITIC = r"['\u2019]\w+"                 # 's  n't-like tails  'tis
_PUNCT = r"\.\.\.|--+|[^\w\s]"            # ...  --  any other symbol alone
_TOKEN_RE = re.compile(f"{_NUMBER}|{_WORD}|{_CLITIC}|{_PUNCT}")
_WORD_OR_PUNCT_RE = re.compile(f"({_NUMBER}|{_WORD}|{_CLITIC})|{_PUNCT}")  # group 1: the word, "" for punctuation
_PARAGRAPH_RE = re.compile(r"\n{2,}")
_LINES_RE = re.compile(r"\n+")


def tokens(text: str) -> list[str]:
    """Words and punctuation tokens, in order (see the module docstring)."""
    return _TOKEN_RE.findall(text)


def split_words(text: str) -> tuple[list[str], int]:
    """(the words of ``text``, its number of tokens, words and punctuation together)."""
    found = _WORD_OR_PUNCT_RE.findall(text)
    return [w for w in found if w], len(found)


_LETTER_RE = re.compile(r"[^\W\d_]")


def count_with_letter(words: list[str]) -> int:
    """How many of ``words`` hold at least one letter."""
    return len(words) - sum(1 for w in words if not w.isalpha() and not _LETTER_RE.search(w))


_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof rev hon gen col capt lt sgt mt ft vs etc e.g i.e cf viz al a.m p.m "
    "vol vols fig figs ch pp inc ltd co corp dept est approx jan feb mar apr jun jul aug "
    "sep sept oct nov dec".split()
)
_SENTENCE_END_RE = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*(?=\s|$)")


def split_sentences(text: str) -> list[str]:
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

    def check(self, text: str) -> str | None:
        raise NotImplementedError

    def apply(self, table: pa.Table) -> StageResult:
        return split(table, self.name, [self.check(t) for t in table.column(TEXT).to_pylist()])


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
    "gopher_alpha_words": "share of tokens holding a letter below min_alpha_words_ratio",
    "gopher_stop_words": "fewer distinct stop words than min_stop_words",
}


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
    min_stop_words: int = 2
    stop_words: list[str] = field(default_factory=lambda: list(GOPHER_STOP_WORDS))
    skip: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_skip(self.skip, GOPHER_QUALITY_REASONS, "gopher_quality")
        _check_nonnegative(self, [f for f in self.__dataclass_fields__ if f not in ("stop_words", "skip")])


class GopherQuality(_HeuristicStage):
    Params = GopherQualityParams
    REASONS = GOPHER_QUALITY_REASONS

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._stop_words = frozenset(self.params.stop_words)

    def check(self, text: str) -> str | None:
        p, on = self.params, self.on
        words, n_tokens = split_words(text)
        n_words = len(words)
        if on("gopher_short_doc") and n_words < p.min_doc_words:
            return "gopher_short_doc"
        if on("gopher_long_doc") and n_words > p.max_doc_words:
            return "gopher_long_doc"
        if not words:  # only reachable with min_doc_words = 0 or the rule skipped
            return None
        mean_len = sum(map(len, words)) / n_words
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
            if count_with_letter(words) / n_tokens < p.min_alpha_words_ratio:
                return "gopher_alpha_words"
        if on("gopher_stop_words") and len(self._stop_words.intersection(words)) < p.min_stop_words:
            return "gopher_stop_words"
        return None


# --- Gopher repetition ----------------------------------------------------------------------

TOP_NGRAMS = (2, 3, 4)
DUP_NGRAMS = (5, 6, 7, 8, 9, 10)
GOPHER_REPETITION_REASONS = {
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
    skip: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_skip(self.skip, GOPHER_REPETITION_REASONS, "gopher_repetition")
        _check_nonnegative(self, [f for f in self.__dataclass_fields__ if f != "skip"])


def ngram_stats(toks: list[str], ns: range):
    """For each n in ``ns`` (increasing, from 2): ``(n, gram, counts, first)`` where ``gram[i]``
    numbers the n-gram starting at token i (equal n-grams, equal numbers: exact, no hashing),
    ``counts[g]`` is how often n-gram g occurs and ``first[g]`` where it first occurs. Stops early
    once no n-gram occurs twice (then no longer one can)."""
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
        if counts.max() < 2:
            return


def top_ngram_chars(n: int, counts: np.ndarray, first: np.ndarray, cum: np.ndarray) -> int:
    """Characters covered by the most frequent n-gram: its length joined with single spaces, times
    its count; on ties the one that occurs first (as ``Counter.most_common``); 0 when no n-gram
    occurs twice."""
    top = counts.max()
    if top < 2:
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
            return None
        paragraphs = _PARAGRAPH_RE.split(text.strip())
        dup, dup_chars = find_duplicates(paragraphs)
        if on("gopher_dup_para_frac") and dup / len(paragraphs) > p.dup_para_frac:
            return "gopher_dup_para_frac"
        if on("gopher_dup_para_char_frac") and dup_chars / n_chars > p.dup_para_char_frac:
            return "gopher_dup_para_char_frac"
        lines = _LINES_RE.split(text)
        dup, dup_chars = find_duplicates(lines)
        if on("gopher_dup_line_frac") and dup / len(lines) > p.dup_line_frac:
            return "gopher_dup_line_frac"
        if on("gopher_dup_line_char_frac") and dup_chars / n_chars > p.dup_line_char_frac:
            return "gopher_dup_line_char_frac"
        toks = tokens(text)
        cum = np.zeros(len(toks) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, toks), dtype=np.int64, count=len(toks)), out=cum[1:])
        for n, gram, counts, first in ngram_stats(toks, range(TOP_NGRAMS[0], DUP_NGRAMS[-1] + 1)):
            if n in TOP_NGRAMS:
                code = f"gopher_top_{n}gram"
                if on(code) and top_ngram_chars(n, counts, first, cum) / n_chars > getattr(p, f"top_{n}gram_frac"):
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
# DataTrove's (and TFDS's) terminal marks plus the closing typographic quotes, which the normalize
# stage keeps: without them every line ending in a quoted sentence would be removed.
C4_END_PUNCTUATION = [".", "?", "!", '"', "'", "\u201d", "\u2019"]
C4_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")


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
    skip: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_skip(self.skip, C4_REASONS, "c4_quality")
        if not all(self.end_punctuation):
            raise ValueError("end_punctuation: empty strings are not allowed")
        for n in ("min_num_sentences", "min_words_per_line", "max_word_length"):
            if getattr(self, n) < -1:
                raise ValueError(f"{n} = {getattr(self, n)!r}: must be >= 0, or -1 for off")


class C4Quality(_HeuristicStage):
    Params = C4QualityParams
    REASONS = C4_REASONS

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._end = tuple(self.params.end_punctuation)

    def clean(self, text: str) -> tuple[str | None, str]:
        """(reason or None, the text made of the kept lines)."""
        p, on = self.params, self.on
        pieces = text.splitlines() if p.split_paragraph else split_sentences(text)
        n_sentences = 0
        kept = []
        for line in pieces:
            line = line.strip()
            words = line.split()
            if p.max_word_length != -1 and any(len(w) > p.max_word_length for w in words):
                continue
            if p.remove_citations:
                line = CITATION_RE.sub("", line)
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
            if p.filter_policy and any(s in lower for s in C4_POLICY_SUBSTRINGS):
                continue
            n_sentences += len(split_sentences(line)) if p.split_paragraph else 1
            kept.append(line)
        if on("c4_too_few_sentences") and n_sentences < p.min_num_sentences:
            return "c4_too_few_sentences", text
        return None, ("\n" if p.split_paragraph else " ").join(kept).strip()

    def check(self, text: str) -> str | None:
        return self.clean(text)[0]

    def apply(self, table: pa.Table) -> StageResult:
        results = [self.clean(t) for t in table.column(TEXT).to_pylist()]
        texts = pa.array([r[1] for r in results], table.schema.field(TEXT).type)
        return split(set_column(table, TEXT, texts), self.name, [r[0] for r in results])


# --- FineWeb --------------------------------------------------------------------------------

FINEWEB_REASONS = {
    "fineweb_line_punct_ratio": "share of lines ending in punctuation at or below line_punct_thr",
    "fineweb_short_line_ratio": "share of short lines at or above short_line_thr",
    "fineweb_char_dup_ratio": "share of characters in duplicated lines at or above char_duplicates_ratio",
    "fineweb_list_ratio": "newlines per token above new_line_ratio",
}
# DataTrove's stop characters plus the closing typographic quotes (see C4_END_PUNCTUATION)
FINEWEB_STOP_CHARS = [".", "'", '"', "!", "?", "\u201d", "\u2019"]


@dataclass
class FineWebQualityParams:
    line_punct_thr: float = 0.12
    line_punct_exclude_zero: bool = False
    short_line_thr: float = 0.67
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3
    stop_chars: list[str] = field(default_factory=lambda: list(FINEWEB_STOP_CHARS))
    skip: list[str] = field(default_factory=list)

    def __post_init__(self):
        _check_skip(self.skip, FINEWEB_REASONS, "fineweb_quality")
        if not all(self.stop_chars):
            raise ValueError("stop_chars: empty strings are not allowed")
        _check_nonnegative(self, ["line_punct_thr", "short_line_thr", "short_line_length",
                                  "char_duplicates_ratio", "new_line_ratio"])


class FineWebQuality(_HeuristicStage):
    Params = FineWebQualityParams
    REASONS = FINEWEB_REASONS

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._stop = tuple(self.params.stop_chars)

    def check(self, text: str) -> str | None:
        p, on = self.params, self.on
        lines = text.split("\n")
        n_lines = len(lines)
        if on("fineweb_line_punct_ratio"):
            ratio = sum(1 for s in lines if s.endswith(self._stop)) / n_lines
            if ratio <= p.line_punct_thr and not (ratio == 0 and p.line_punct_exclude_zero):
                return "fineweb_line_punct_ratio"
        if on("fineweb_short_line_ratio"):
            if sum(1 for s in lines if len(s) <= p.short_line_length) / n_lines >= p.short_line_thr:
                return "fineweb_short_line_ratio"
        if on("fineweb_char_dup_ratio"):
            n_chars = len(text) - (n_lines - 1)
            dup_chars = find_duplicates([s for s in lines if s.strip()])[1]
            if n_chars and dup_chars / n_chars >= p.char_duplicates_ratio:
                return "fineweb_char_dup_ratio"
        if on("fineweb_list_ratio"):
            n_tokens = split_words(text)[1]
            if n_tokens and (n_lines - 1) / n_tokens > p.new_line_ratio:
                return "fineweb_list_ratio"
        return None

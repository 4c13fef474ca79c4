"""``c4_quality``: C4's rules (TFDS's ``c4_utils``), as DataTrove 0.10.1's ``C4QualityFilter``
decides them with its defaults.

C4 removes lines and drops documents: lines with a word over ``max_word_length``, without terminal
punctuation (``end_punctuation``; a line ending in ``...`` does not count), with fewer than
``min_words_per_line`` words, mentioning javascript or a cookie/terms/privacy phrase are removed;
a kept line holding "lorem ipsum" or ``{``, or fewer than ``min_num_sentences`` sentences in the
kept lines, drop the document (reason codes in ``C4_REASONS``). The kept lines (stripped,
citations removed) are written back as the text; a document left with no text is set aside
(``c4_empty_after_filter``), whatever ``min_num_sentences`` is. ``split_paragraph = false`` applies
the line rules to sentences. Numeric limits set to -1 are off.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

from curate.schema import TEXT
from curate.stage_watch import at_doc
from curate.stages.base import BatchContext, StageResult, set_column, split
from curate.stages.filter_base import HeuristicStage, check_skip, check_words, words_of
from curate.text.regex_words import regex_sentences
from curate.text.sentence_codes import line_sentences
from curate.text.sentences import count_sentences, spacy_sentences
from curate.text.spacy_words import spacy_words

C4_REASONS = {
    "c4_lorem_ipsum": "a kept line holds 'lorem ipsum'",
    "c4_curly_bracket": "a kept line holds '{'",
    "c4_too_few_sentences": "fewer sentences than min_num_sentences in the kept lines",
    "c4_empty_after_filter": "no text left once the lines were removed (whatever min_num_sentences is; not "
                             "skippable)",
}
EMPTY = "c4_empty_after_filter"  # whatever min_num_sentences and skip say: a document is never kept empty
CITATION_RE = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
C4_END_PUNCTUATION = [".", "?", "!", '"', "'"]  # DataTrove's and TFDS's
C4_POLICY_SUBSTRINGS = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies")
_POLICY_RE = re.compile("|".join(map(re.escape, C4_POLICY_SUBSTRINGS)))  # any of them, in one scan


@dataclass
class C4QualityParams:
    split_paragraph: bool = True          # rules apply to lines (C4); false: to sentences
    remove_citations: bool = True  # cut citation marks like [1], [edit], [citation needed] from kept lines
    filter_no_terminal_punct: bool = True  # FineWeb sets this to false
    min_num_sentences: int = 5             # -1: off
    min_words_per_line: int = 3            # -1: off
    max_word_length: int = 1000            # -1: off
    filter_lorem_ipsum: bool = True  # drop a document with 'lorem ipsum' in a kept line: c4_lorem_ipsum
    filter_javascript: bool = True  # remove lines that mention javascript
    filter_curly_bracket: bool = True  # drop a document with '{' in a kept line: c4_curly_bracket
    filter_policy: bool = True  # remove lines with a cookie / terms-of-use / privacy-policy phrase
    # a line must end in one of these (filter_no_terminal_punct)
    end_punctuation: list[str] = field(default_factory=lambda: list(C4_END_PUNCTUATION))
    words: str = "spacy"                   # how sentences are counted (see the module doc)
    language: str = "en"  # spaCy language code for the word splitting
    skip: list[str] = field(default_factory=list)  # reason codes of rules to turn off

    def __post_init__(self):
        check_skip(self.skip, C4_REASONS, "c4_quality")
        if EMPTY in self.skip:
            raise ValueError(f"skip = {EMPTY!r}: a document left with no text is always set aside (it would be kept "
                             f"empty); take {EMPTY!r} out of skip")
        if not all(self.end_punctuation):
            raise ValueError("end_punctuation: empty strings are not allowed")
        if self.filter_no_terminal_punct and all(e.endswith("...") for e in self.end_punctuation):
            what = "[]" if not self.end_punctuation else f"{self.end_punctuation!r} (a line ending in '...' is removed)"
            raise ValueError(f"end_punctuation = {what}: no line could end in one, so every line would be removed and "
                             "every document set aside; list the marks a kept line may end in (C4's: "
                             f"{C4_END_PUNCTUATION!r}), or set filter_no_terminal_punct = false to turn the rule off")
        for n in ("min_num_sentences", "min_words_per_line", "max_word_length"):
            if getattr(self, n) < -1:
                raise ValueError(f"{n} = {getattr(self, n)!r}: must be >= 0, or -1 for off")
        if self.max_word_length == 0:
            raise ValueError("max_word_length = 0: every line with a word would be removed; must be >= 1, or -1 for off")
        check_words(self)


class C4Quality(HeuristicStage):
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
        return spacy_sentences(text, p.language)

    def clean(self, text: str, recent: dict | None = None) -> tuple[str | None, str]:
        """(reason or None, the text made of the kept lines); ``recent``: see ``filter_base``."""
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
                    n_sentences += self._count_ranges(text, stop, ranges, recent)
        if count and n_sentences < p.min_num_sentences:
            return "c4_too_few_sentences", text
        out = ("\n" if p.split_paragraph else " ").join(kept).strip()
        return (None, out) if out else (EMPTY, text)

    def _count_ranges(self, text: str, n_chunks: int, ranges: list[tuple[int, int, str]], recent: dict | None) -> int:
        """``count_sentences`` of the lines whose chunks are ``ranges`` of ``text.split()``."""
        sw = spacy_words(self.params.language)
        codes = sw.text_sentence_codes(text, recent)
        if len(codes) != n_chunks:  # not the lines' chunks (cannot happen: line breaks are spaces)
            return sum(count_sentences(line, "spacy", self.params.language) for _, _, line in ranges)
        return line_sentences(codes, [r[0] for r in ranges], [r[1] for r in ranges])

    def check(self, text: str, recent: dict | None = None) -> str | None:
        return self.clean(text, recent)[0]

    def apply(self, table: pa.Table, context: BatchContext | None = None) -> StageResult:
        texts = table.column(TEXT).to_pylist()
        recent = words_of(context)
        results = []
        for i, t in enumerate(texts):
            at_doc(i)  # the per-document time limit (curate/stage_watch.py) counts against this one now
            results.append(self.clean(t, recent))
        texts = pa.array([r[1] for r in results], table.schema.field(TEXT).type)
        return split(set_column(table, TEXT, texts), self.name, [r[0] for r in results])

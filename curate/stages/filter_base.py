"""What the four heuristic filters share: a stage that checks one document at a time, its checks
of the ``skip`` and ``words`` keys, and the line and paragraph splitting the rules count over.

A filter's ``check(text, recent)`` returns the reason that sets the document aside, or None.
``recent`` is the batch's ``BatchContext.words`` (text -> ``curate.text.spacy_words.Recent``):
the words ``langid`` or an earlier filter learned of each text, reused here and added to for the
stages after. Without a context a filter learns them itself: the decisions are the same.
"""
from __future__ import annotations

import math
import re
from typing import ClassVar

import pyarrow as pa

from curate.schema import TEXT
from curate.stage_watch import at_doc
from curate.stages.base import BatchContext, MapStage, StageResult, split
from curate.text.spacy_words import spacy_words
from curate.text.words import check_splitter, tokens

_PARAGRAPH_RE = re.compile(r"\n{2,}")


def words_of(context: BatchContext | None) -> dict:
    """The batch's shared words (a new dict, for this stage alone, without a context)."""
    return {} if context is None else context.words


class HeuristicStage(MapStage):
    """Runs ``check(text, recent) -> reason | None`` over every document."""

    REASONS: ClassVar[dict[str, str]] = {}
    prefetch: ClassVar[bool] = True  # split every text into words first, in one batch

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._skip = frozenset(self.params.skip)

    def on(self, code: str) -> bool:
        return code not in self._skip

    def tokens(self, text: str, recent: dict | None = None) -> list[str]:
        return tokens(text, self.params.words, self.params.language, recent)

    def check(self, text: str, recent: dict | None = None) -> str | None:
        raise NotImplementedError

    def apply(self, table: pa.Table, context: BatchContext | None = None) -> StageResult:
        texts = table.column(TEXT).to_pylist()
        recent = words_of(context)
        if self.prefetch and self.params.words == "spacy":
            spacy_words(self.params.language).prefetch(texts, recent)  # linear per text: a batch step
        reasons = []
        for i, t in enumerate(texts):
            at_doc(i)  # the per-document time limit (curate/stage_watch.py) counts against this one now
            reasons.append(self.check(t, recent))
        return split(table, self.name, reasons)


def check_skip(skip: list[str], reasons: dict[str, str], stage: str) -> None:
    unknown = [s for s in skip if s not in reasons]
    if unknown:
        raise ValueError(f"{stage}: skip = {unknown[0]!r} is not a reason code; allowed: {', '.join(reasons)}")


def check_nonnegative(params, names: list[str]) -> None:
    for n in names:
        v = getattr(params, n)
        if not math.isfinite(v) or v < 0:  # nan passes `< 0`, and then no comparison ever fires
            raise ValueError(f"{n} = {v!r}: must be >= 0 (a number)")


def check_shares(params, names: list[str]) -> None:
    """Each a share (0 to 1): above 1 a maximum never fires and a minimum sets every document aside."""
    for n in names:
        v = getattr(params, n)
        if not 0 <= v <= 1:
            raise ValueError(f"{n} = {v!r}: a share, must be between 0 and 1 (to turn its check off, list its reason "
                             f"in `skip`)")


def check_range(params, low: str, high: str) -> None:
    """``low <= high``: a minimum above its maximum would set every document aside."""
    if getattr(params, low) > getattr(params, high):
        raise ValueError(f"{low} = {getattr(params, low)!r} is above {high} = {getattr(params, high)!r}: every "
                         "document would be set aside")


def check_words(params) -> None:
    check_splitter(params.words, params.language)


def split_lines(text: str) -> list[str]:
    """``re.split(r"\\n+", text)``, with ``str.split`` (faster)."""
    parts = text.split("\n")
    if len(parts) < 3 or "\n\n" not in text:
        return parts
    return [parts[0], *filter(None, parts[1:-1]), parts[-1]]


def split_paragraphs(text: str) -> list[str]:
    """``re.split(r"\\n{2,}", text)``, with ``str.split`` where no run of three newlines is there."""
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

"""``fineweb_quality``: FineWeb's rules, as DataTrove 0.10.1's ``FineWebQualityFilter`` decides them
with its defaults.

Over the non-empty lines of ``text.split("\\n")``: the share of lines ending in ``stop_chars``
(DataTrove's ``TERMINAL_PUNCTUATION``), the share of short lines, the share of characters in lines
that repeat an earlier line, and newlines per token; reason codes in ``FINEWEB_REASONS``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from curate.stages.filter_base import HeuristicStage, check_nonnegative, check_shares, check_skip, check_words, find_duplicates
from curate.text.punctuation import TERMINAL_PUNCTUATION

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
    line_punct_thr: float = 0.12  # share of lines ending in stop_chars below this: fineweb_line_punct_ratio
    line_punct_exclude_zero: bool = False  # true: a share of exactly 0 is kept
    short_line_thr: float = 0.67  # share of short lines above this: fineweb_short_line_ratio
    short_line_length: int = 30  # a line of at most this many characters is short
    # share of characters in lines repeating an earlier one above this: fineweb_char_dup_ratio
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3  # newlines per token above this: fineweb_list_ratio
    # characters that end a line with punctuation (DataTrove's TERMINAL_PUNCTUATION)
    stop_chars: list[str] = field(default_factory=lambda: list(FINEWEB_STOP_CHARS))
    words: str = "spacy"  # "spacy" (DataTrove's tokens) or "regex" (Quarry's splitter, no spaCy)
    language: str = "en"  # spaCy language code for the word splitting
    skip: list[str] = field(default_factory=list)  # reason codes of rules to turn off

    def __post_init__(self):
        check_skip(self.skip, FINEWEB_REASONS, "fineweb_quality")
        if not all(self.stop_chars):
            raise ValueError("stop_chars: empty strings are not allowed")
        check_nonnegative(self, ["line_punct_thr", "short_line_thr", "short_line_length",
                                  "char_duplicates_ratio", "new_line_ratio"])
        check_shares(self, ["line_punct_thr", "short_line_thr", "char_duplicates_ratio"])
        if (not self.stop_chars and self.line_punct_thr > 0 and not self.line_punct_exclude_zero
                and "fineweb_line_punct_ratio" not in self.skip):
            raise ValueError("stop_chars = []: no line could end in one, so the share of lines ending in punctuation "
                             f"is 0, below line_punct_thr = {self.line_punct_thr!r}: every document would be set "
                             "aside; list the characters a line may end in (DataTrove's are the default), or list "
                             "fineweb_line_punct_ratio in `skip` to turn the rule off")
        check_words(self)


class FineWebQuality(HeuristicStage):
    Params = FineWebQualityParams
    REASONS = FINEWEB_REASONS
    prefetch = False  # tokens are rarely needed (see fineweb_list_ratio below)

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._stop = tuple(self.params.stop_chars)

    def check(self, text: str, recent: dict | None = None) -> str | None:
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
                n_tokens = len(self.tokens(text, recent))
                if n_tokens and newlines / n_tokens > p.new_line_ratio:
                    return "fineweb_list_ratio"
        return None

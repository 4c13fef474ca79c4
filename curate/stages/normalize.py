"""``normalize``: Unicode repair (ftfy), NFC, control characters and whitespace.

ftfy's ``fix_text`` is the slowest step of a cheap pipeline (about 2.6 MB/s here), and most of its
work is finding mojibake. Mojibake needs non-ASCII characters, and ftfy itself changes nothing in
text its ``is_bad`` regex finds clean, so this stage calls ``fix_text`` only on text that is not
pure ASCII and that ``is_bad`` flags (``skip_clean = false`` runs it on everything). Then, on every
document: NFC, control characters removed (C0 but tab and newline, C1, zero-width and BOM),
spaces collapsed, trailing spaces cut, runs of blank lines cut to one.

ftfy runs with its defaults except ``uncurl_quotes`` (typographic quotes are kept: they are text).
Reason: ``empty_after_normalize``.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import ftfy
from ftfy.badness import is_bad

from curate.schema import TEXT
from curate.stages.base import MapStage, StageResult, set_column, split

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b-\u200d\u2060\ufeff]")
_SPACES = re.compile(r"[ \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")
_TRAILING = re.compile(r" +\n")
_LEADING = re.compile(r"\n +")
_BLANK_LINES = re.compile(r"\n{3,}")
_NEWLINES = re.compile(r"\r\n?|[\u2028\u2029\x85]")


@dataclass
class Params:
    fix_encoding: bool = True   # run ftfy at all
    skip_clean: bool = True     # skip ftfy on text that cannot hold mojibake (see module doc)
    normalization: str = "NFC"  # NFC, NFKC, NFD, NFKD, or "none"

    def __post_init__(self):
        if self.normalization not in ("NFC", "NFKC", "NFD", "NFKD", "none"):
            raise ValueError(f"normalization = {self.normalization!r}; allowed: NFC, NFKC, NFD, NFKD, none")


class Normalize(MapStage):
    Params = Params

    def apply(self, table) -> StageResult:
        texts = [normalize_text(t, self.params) for t in table.column(TEXT).to_pylist()]
        table = set_column(table, TEXT, texts)
        return split(table, self.name, [None if t else "empty_after_normalize" for t in texts])


def normalize_text(text: str, params: Params = Params()) -> str:
    if params.fix_encoding and needs_ftfy(text, params.skip_clean):
        text = ftfy.fix_text(text, uncurl_quotes=False)
    if params.normalization != "none" and not text.isascii() and not unicodedata.is_normalized(params.normalization, text):
        text = unicodedata.normalize(params.normalization, text)
    return clean_whitespace(text)


def needs_ftfy(text: str, skip_clean: bool = True) -> bool:
    if not skip_clean:
        return True
    return not text.isascii() and is_bad(text)


def clean_whitespace(text: str) -> str:
    text = _NEWLINES.sub("\n", text)
    text = _CONTROL.sub("", text)
    text = _SPACES.sub(" ", text)
    text = _TRAILING.sub("\n", text)
    text = _LEADING.sub("\n", text)
    text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()

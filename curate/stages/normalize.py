"""``normalize``: Unicode repair (ftfy), NFC, control characters and whitespace.

ftfy's ``fix_text`` is the slowest step of a cheap pipeline (about 2.6 MB/s here), and most of its
work is finding mojibake. Mojibake needs non-ASCII characters, and ftfy itself changes nothing in
text its ``is_bad`` regex finds clean, so this stage calls ``fix_text`` only on text that is not
pure ASCII and that ``is_bad`` flags (``skip_clean = false`` runs it on everything). ``is_bad`` itself
scans at about 5 MB/s, so a cheaper gate runs first: every pattern of ftfy's badness regex needs either
two adjacent non-ASCII characters or one of a few characters named in its one-character patterns;
the gate (derived from ftfy's own regex at import) looks for exactly those. Then, on every
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
    return not text.isascii() and _MOJIBAKE_GATE.search(text) is not None and is_bad(text)


def _mojibake_gate() -> re.Pattern:
    """A regex that matches every text ftfy's ``BADNESS_RE`` matches (a superset, 10x cheaper)."""
    import re._parser as parser

    from ftfy.badness import BADNESS_RE

    def chars(item):
        op, av = item
        if op is parser.LITERAL:
            return {chr(av)}
        if op is parser.IN and all(o in (parser.LITERAL, parser.RANGE) for o, _ in av):
            return {chr(c) for o, a in av for c in ([a] if o is parser.LITERAL else range(a[0], a[1] + 1))}
        return None  # anything else may match ASCII

    def non_ascii(item):
        c = chars(item)
        return c is not None and all(ord(x) >= 128 for x in c)

    try:
        tree = parser.parse(BADNESS_RE.pattern, BADNESS_RE.flags)
        branches = tree[0][1][1] if len(tree) == 1 and tree[0][0] is parser.BRANCH else [tree]
    except Exception:  # a future ftfy whose regex we cannot read: gate on any non-ASCII text
        return re.compile(r"[^\x00-\x7f]")
    singles = set()
    for branch in branches:
        items = list(branch)
        if not any(non_ascii(a) and non_ascii(b) for a, b in zip(items, items[1:])):
            needed = [chars(item) for item in items if non_ascii(item)]
            if not needed:  # a pattern with no character it must contain: gate on any non-ASCII text
                return re.compile(r"[^\x00-\x7f]")
            singles |= needed[0]  # the pattern cannot match without one of these
    pattern = r"[^\x00-\x7f]{2}"
    if singles:
        pattern += "|[" + re.escape("".join(sorted(singles))) + "]"
    return re.compile(pattern)


_MOJIBAKE_GATE = _mojibake_gate()


def clean_whitespace(text: str) -> str:
    text = _NEWLINES.sub("\n", text)
    text = _CONTROL.sub("", text)
    text = _SPACES.sub(" ", text)
    text = _TRAILING.sub("\n", text)
    text = _LEADING.sub("\n", text)
    text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()

"""Unicode's Stream-Safe Text Format (UAX #15, section 13): no run of more than 30 non-starters.

Normalizing a run of combining marks sorts it by combining class, and CPython's ``unicodedata.normalize`` sorts
one run in quadratic time: "a" followed by 80,000 alternating U+0301 and U+0316 (160 KB) took 4.8 s of NFC, in C
where no time limit reaches, and 500 KB took minutes (in ``extract``'s text and ``normalize``'s ftfy). Real text
carries a few marks on a letter (Vietnamese two, Tibetan stacks a handful); Unicode's own limit for a
stream-safe text is 30. ``stream_safe`` inserts U+034F COMBINING GRAPHEME JOINER (a starter that joins
nothing and is ignored in display and collation) after every 30 non-starters of a run, as the standard
prescribes, so every run sorts in bounded time and no character is lost. Text without such a run is returned
as it is.
"""
from __future__ import annotations

import functools
import re
import sys
import unicodedata

MAX_NON_STARTERS = 30  # UAX #15: a stream-safe text has no longer run of non-starters
CGJ = "\u034f"


def _non_starters() -> str:
    """A regex class of the characters whose decomposition, canonical or compatibility (NFKC and NFKD sort too),
    starts with a non-starter (combining class not 0): the combining marks, and the characters that decompose
    into them (U+0F73, U+0344, the half-width voiced sound marks U+FF9E/U+FF9F under NFKC, ...)."""
    codes = []
    for code in range(sys.maxunicode + 1):
        c = chr(code)
        if unicodedata.combining(c) or (unicodedata.decomposition(c)
                                         and unicodedata.combining(unicodedata.normalize("NFKD", c)[0])):
            codes.append(code)
    ranges, start = [], codes[0]
    for prev, code in zip(codes, codes[1:] + [-1]):
        if code != prev + 1:
            ranges.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start else ""))
            start = code
    return "[" + "".join(ranges) + "]"


@functools.cache
def _patterns() -> tuple[re.Pattern, re.Pattern]:
    """(a run of more than 30 non-starters, 30 of them followed by another), built on first use: the walk over
    every code point takes about 0.1 s, which a process that never meets an unnormalized text does not pay."""
    cls = _non_starters()
    return (re.compile(cls + "{%d}" % (MAX_NON_STARTERS + 1)),
            re.compile("(" + cls + "{%d})(?=%s)" % (MAX_NON_STARTERS, cls)))


def stream_safe(text: str) -> str:
    """``text`` with U+034F after every 30 non-starters of a longer run (the text itself when it has none)."""
    if text.isascii():
        return text
    long_run, split = _patterns()
    if long_run.search(text) is None:
        return text
    return split.sub(lambda m: m.group(1) + CGJ, text)

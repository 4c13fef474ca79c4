"""Character classes of code points as ``re`` and ``str`` read them (word character, digit, upper case, white
space) and the script-neutral punctuation the block features count, in one table filled as characters are
seen: the compiled scans of ``features`` and ``depth`` read it instead of calling Python per character."""
from __future__ import annotations

import numpy as np

# sentence marks: Latin, CJK (and half-width), Devanagari (danda, double danda), Urdu, Arabic, Myanmar, Khmer,
# Tibetan, Ethiopic, Armenian; Thai and Lao have none (a space between two of their letters ends a phrase:
# ``features._text_counts`` counts it as one)
SENT_CHARS = ".!?。！？।۔؟｡॥။។៕།።։"
SEP_CHARS = "|»›·•/>"      # separators of menus and breadcrumbs
COMMA_CHARS = ",、،，､၊፣"  # commas: Latin, CJK (and half-width), Arabic, Myanmar, Ethiopic
# the bits of a class
IS_WORD, IS_DIGIT, IS_SENTENCE, IS_SEPARATOR, IS_COMMA, IS_UPPER, IS_SPACE = 1, 2, 4, 8, 16, 32, 64
UNKNOWN = 255  # a code point not classified yet

_CLASS_CACHE: dict[int, int] = {}
CLASS_TABLE = np.full(0x110000, UNKNOWN, dtype=np.uint8)  # code point -> char_class, filled as characters are seen
_SENT_SET = {ord(c) for c in SENT_CHARS}
_SEP_SET = {ord(c) for c in SEP_CHARS}
_COMMA_SET = {ord(c) for c in COMMA_CHARS}


def char_class(cp: int) -> int:
    """Bits: 1 word character (``\\w``), 2 decimal digit (``\\d``), 4 sentence mark, 8 separator, 16 comma,
    32 upper case, 64 white space (``str.isspace``)."""
    k = _CLASS_CACHE.get(cp)
    if k is None:
        ch = chr(cp)
        k = ((ch.isalnum() or ch == "_") * IS_WORD | ch.isdecimal() * IS_DIGIT | (cp in _SENT_SET) * IS_SENTENCE
             | (cp in _SEP_SET) * IS_SEPARATOR | (cp in _COMMA_SET) * IS_COMMA | ch.isupper() * IS_UPPER
             | ch.isspace() * IS_SPACE)
        _CLASS_CACHE[cp] = k
    return k


def classes(cps: np.ndarray) -> np.ndarray:
    """``char_class`` of each code point, through ``CLASS_TABLE`` (filled the first time a code point is seen)."""
    cls = CLASS_TABLE[cps]
    unknown = cls == UNKNOWN
    if unknown.any():
        for cp in np.unique(cps[unknown]):
            CLASS_TABLE[cp] = char_class(int(cp))
        cls = CLASS_TABLE[cps]
    return cls


# code point -> the one code point ``str.lower`` makes of it (0: not looked up yet; ``SPECIAL_LOWER``: lower-cased
# in context or into more than one code point, U+03A3 and U+0130); zeros cost no memory until written
LOWER_TABLE = np.zeros(0x110000, dtype=np.uint32)
SPECIAL_LOWER = np.uint32(0xFFFFFFFF)


def lowers(cps: np.ndarray) -> None:
    """Fill ``LOWER_TABLE`` (and ``CLASS_TABLE`` for the lower-cased code points) for the code points of
    ``cps`` not looked up yet."""
    for cp in np.unique(cps[LOWER_TABLE[cps] == 0]).tolist():
        low = chr(cp).lower()
        if len(low) != 1 or cp == 0x3A3:  # "Σ" lower-cases to "ς" at the end of a word, to "σ" elsewhere
            LOWER_TABLE[cp] = SPECIAL_LOWER
        else:
            LOWER_TABLE[cp] = ord(low)
    classes(LOWER_TABLE[cps][LOWER_TABLE[cps] != SPECIAL_LOWER])  # the classes of the lower-cased code points


def is_word(cps: np.ndarray) -> np.ndarray:
    """``\\w`` (as ``re`` reads it) for each code point; NUL (past the end of the page) is not one."""
    return (classes(cps) & IS_WORD).astype(bool)

"""Which single-byte Latin encoding undeclared text is in, told by the alphabets of the languages written in them.

Detection (charset_normalizer) tells single-byte encodings apart by how "messy" each decoding looks. Between
the Latin ones that says little: Czech in ISO-8859-2 read as windows-1250 gives ``ą`` for ``š`` and ``ľ`` for
``ž``, read as ISO-8859-4 or -10 other letters again, every one of them a letter. So short and long Central
European texts came out as mojibake (``benchmarks/decode_legacy.py``: ISO-8859-2, 6 of 30 long texts right).

``best_latin`` decodes the bytes with each single-byte Latin web encoding that decodes them, and scores each
text by how much of it one language's alphabet covers (``fit``): the share of its non-ASCII letters written
inside words that belong to the alphabet of the one language covering most of them. A right decoding is one
language's letters; a wrong one mixes letters of several (``ą`` beside ``ř``) or puts symbols and control
characters inside words. Detection's own guess stays unless another encoding fits better by more than
``MARGIN``, so text that decodes the same under several of them, or that no alphabet here covers, is read as
before. The alphabets
are those of the languages written in these encodings (a language's letters, not a frequency table learned
from the texts the benchmark measures).
"""
from __future__ import annotations

import re
import unicodedata
from itertools import islice

# lower-case non-ASCII letters of the languages written in single-byte Latin encodings
ALPHABETS = {
    "cs": "áčďéěíňóřšťúůýž", "sk": "áäčďéíĺľňóôŕšťúýž", "pl": "ąćęłńóśźż", "hu": "áéíóöőúüű",
    "ro": "ăâîșțşţ", "hr": "čćđšž", "sl": "čšž", "sq": "çë", "de": "äöüß", "fr": "àâæçéèêëîïôœùûüÿ",
    "es": "áéíñóúü", "pt": "áâãàçéêíóôõú", "it": "àèéìíîòóùú", "ca": "àçèéíïòóúü", "nl": "éëïöüè",
    "sv": "åäöé", "da": "æøåé", "no": "æøåéèêóòô", "fi": "äöåšž", "is": "áðéíóúýþæö", "fo": "áðíóúýæø",
    "et": "äõöüšž", "lv": "āčēģīķļņšūž", "lt": "ąčęėįšųūž", "tr": "çğıöşüâî", "mt": "àċèġħìòùż",
    "ga": "áéíóú", "cy": "âêîôûŵŷáéíóúàèìòùäëïöüÿ", "eo": "ĉĝĥĵŝŭ", "gd": "àèìòù", "br": "âêîôûùñü",
    "vi": "àáâăèéêíóôơùúưđ",  # windows-1258's precomposed letters (tones are combining marks)
}
_ALPHABETS = [frozenset(a) for a in ALPHABETS.values()]
# the single-byte Latin encodings among the web's (``text._ALLOWED``), Python's names
LATIN = ("cp1250", "cp1252", "cp1254", "cp1257", "cp1258", "iso8859-1", "iso8859-2", "iso8859-3", "iso8859-4",
         "iso8859-10", "iso8859-13", "iso8859-14", "iso8859-15", "iso8859-16", "mac-roman")
SAMPLE_BYTES = 16_384  # the bytes each decoding is scored on
MAX_CHARS = 400  # ... and at most this many of their non-ASCII characters (the evidence: a few hundred letters)
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
MARGIN = 0.02  # by how much another encoding's share must beat detection's guess to be taken instead
_C1 = re.compile("[\x80-\x9f]")


def _wordish(c: str) -> bool:
    """A letter or a number other than a decimal digit (regular expressions' ``[^\\W\\d_]``)."""
    return c.isalnum() and not c.isdecimal()


def fit(text: str) -> float:
    """The share of ``text``'s non-ASCII letters inside words (beside another letter) that one language's
    alphabet holds, the alphabet holding most of them; 1.0 when there are none. A number beside a letter
    (``¾e``), a symbol between two letters (``mi±dzy``), a capital letter after a small one (``niÒo``) and a C1
    control character anywhere (never text: a byte another encoding reads as a letter) count against it;
    punctuation before or after a word (``¿Qué``) and combining marks (Vietnamese in windows-1258's tones)
    count for nothing."""
    letters, bad = [], len(_C1.findall(text))
    n = len(text)
    for m in islice(_NON_ASCII.finditer(text), MAX_CHARS):
        i = m.start()
        c = text[i]
        before = text[i - 1] if i and _wordish(text[i - 1]) else ""
        after = i + 1 < n and _wordish(text[i + 1])
        if _wordish(c):  # a letter, or a number that is not a digit (a fraction, a superscript)
            if not (before or after):
                continue  # standing alone: "à", or a symbol another encoding reads as a letter ("Š 2024")
            if before.islower() and c.isupper():
                bad += 1  # a capital after a small letter inside a word
            else:
                letters.append(c.lower())  # in no alphabet when it is a number: "¾e"
        elif before and after and not c.isspace() and not unicodedata.category(c).startswith("M"):
            bad += 1  # a symbol or punctuation inside a word: "mi±dzy"
    total = len(letters) + bad
    if not total:
        return 1.0
    return max(sum(c in a for c in letters) for a in _ALPHABETS) / total


def best_latin(body: bytes, guess: str) -> str:
    """``guess`` (detection's encoding for ``body``), or, where that is one of the single-byte Latin encodings
    (``LATIN``), the one of them whose text of ``body`` ``fit`` scores highest when that beats ``guess``'s by
    more than ``MARGIN`` (the first in ``LATIN`` order among equals). Only the first ``SAMPLE_BYTES`` are scored.
    Chosen on real texts outside the benchmark's (docs/benchmarks.md): without the margin, Spanish texts whose
    ``¡`` or ``º`` another encoding reads as a letter were taken for Polish."""
    if guess not in LATIN:
        return guess
    sample = body[:SAMPLE_BYTES]
    try:
        need = fit(sample.decode(guess)) + MARGIN
    except UnicodeDecodeError:
        return guess
    best = guess
    for enc in LATIN:
        if enc == guess:
            continue
        try:
            score = fit(sample.decode(enc))
        except UnicodeDecodeError:
            continue
        if score > need:
            best, need = enc, score
    return best

"""Which legacy encoding undeclared text is in, told by the letters of the languages written in them.

Detection (charset_normalizer) tells encodings apart by how "messy" each decoding looks. Between encodings that
decode the same bytes cleanly into letters that says little: Czech in ISO-8859-2 read as windows-1250 gives
``ą`` for ``š`` and ``ľ`` for ``ž``, read as ISO-8859-4 or -10 other letters again; short Japanese in EUC-JP
read as EUC-KR gives Hangul jamo for its kana. Such texts came out as mojibake (``benchmarks/decode_legacy.py``:
ISO-8859-2, 6 of 30 long texts right; EUC-JP, 20 of 34 short ones).

- ``best_latin``: between the single-byte Latin encodings, the text of each that decodes the bytes is scored
  by the share of its non-ASCII letters inside words that one language's alphabet holds (``fit``): a right
  decoding is one language's letters; a wrong one mixes letters of several (``ą`` beside ``ř``) or puts
  symbols and control characters inside words.
- ``best_cjk``: between the East Asian multi-byte encodings, by the share of characters of running Chinese,
  Japanese or Korean text (``cjk_fit``): kana, Hangul syllables, the common ideographs, against jamo,
  half-width katakana, box drawing and rare ideographs.

Detection's own guess stays unless another encoding scores better by more than ``MARGIN``, so text that decodes
the same under several of them, or that no alphabet here covers, is read as before. The alphabets are those of
the languages written in these encodings (a language's letters, not a frequency table learned from the texts
the benchmark measures); checked on texts the benchmark does not use (docs/benchmarks.md).
"""
from __future__ import annotations

import codecs
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
    "hsb": "čćěłńóřšźž", "dsb": "čćěłńóŕśšźž", "ku": "çêîûş", "lb": "äéëè", "af": "áéèêëíîïóôúûý",
    "gl": "áéíñóúü", "eu": "ñü", "lg": "ŋ", "se": "áčđŋšŧž", "kl": "åæøĸ",
    "lij": "àâäæçèéêìîñòóôöùûü", "oc": "àáçèéíïòóúü",
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


def _foreign_in_word(c: str) -> bool:
    """Whether ``c`` has no place between two letters of a word: a symbol (``±``, ``©``; not the acute and grave
    accents, which stand in for an apostrophe), a pilcrow or section sign, a control character. An apostrophe
    (``L’Italie``), a hyphen or a middle dot (Catalan ``l·l``) has; so have combining marks."""
    cat = unicodedata.category(c)
    return (cat[0] == "S" and c not in "´`") or c in "¶§" or cat == "Cc"


def fit(text: str) -> float:
    """The share of ``text``'s non-ASCII letters inside words (beside another letter) that one language's
    alphabet holds, the alphabet holding most of them; 1.0 when there are none. A number beside a letter
    (``¾e``), a symbol between two letters (``mi±dzy``, ``_foreign_in_word``), a capital letter after a small one (``niÒo``) and a C1
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
        elif before and after and _foreign_in_word(c):
            bad += 1  # a symbol inside a word: "mi±dzy"
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
    return _best(body, guess, LATIN, fit)


# the multi-byte East Asian web encodings (Python's names): each decodes many of the others' bytes
CJK = ("euc_jp", "shift_jis", "cp932", "gbk", "gb18030", "big5", "euc_kr", "cp949", "gb2312", "big5hkscs")


def _cjk_class(c: str) -> int:
    """1 for a character of running Chinese, Japanese or Korean text (kana, Hangul syllables, the common CJK
    ideographs, CJK punctuation, full-width ASCII), 0 for punctuation, arrows and shapes such text uses as any
    text does and for Latin, Greek and Cyrillic letters, -1 for the rest (Hangul jamo, half-width katakana,
    box drawing, rare and compatibility ideographs, private use: what another encoding's bytes decode to)."""
    o = ord(c)
    if (0x3000 <= o <= 0x30FF or 0xAC00 <= o <= 0xD7A3 or 0x4E00 <= o <= 0x9FFF or 0xFF01 <= o <= 0xFF5E):
        return 1
    if 0x2000 <= o <= 0x206F or 0x2190 <= o <= 0x21FF or 0x25A0 <= o <= 0x26FF or 0xA0 <= o <= 0xBF:
        return 0
    if o in (0xD7, 0xF7) or 0xC0 <= o <= 0x24F or 0x370 <= o <= 0x4FF or 0x1E00 <= o <= 0x1EFF:
        return 0  # Latin, Greek and Cyrillic letters: a text in those, which these sets also hold
    return -1


def cjk_fit(text: str) -> float:
    """The share of ``text``'s non-ASCII characters (``MAX_CHARS`` at most, punctuation and shapes left out)
    that belong to running Chinese, Japanese or Korean text; kana and Hangul syllables side by side (no
    language mixes them) count against it. 1.0 when there are none."""
    good = bad = kana = hangul = 0
    for m in islice(_NON_ASCII.finditer(text), MAX_CHARS):
        c = m.group(0)
        k = _cjk_class(c)
        if k > 0:
            good += 1
            o = ord(c)
            kana += 0x3040 <= o <= 0x30FF
            hangul += 0xAC00 <= o <= 0xD7A3
        elif k < 0:
            bad += 1
    mixed = min(kana, hangul)
    total = good + bad
    return 1.0 if not total else (good - 2 * mixed) / total


def best_cjk(body: bytes, guess: str) -> str:
    """``guess``, or, where that is one of the East Asian multi-byte encodings (``CJK``), the one of them whose
    text of ``body`` ``cjk_fit`` scores highest when that beats ``guess``'s by more than ``MARGIN``.
    Detection took short Japanese EUC-JP text for Korean (its kana are Hangul jamo in EUC-KR) or Thai, and
    short Big5 for Shift_JIS (half-width katakana)."""
    return _best(body, guess, CJK, cjk_fit)


def _best(body: bytes, guess: str, family: tuple, score) -> str:
    """``guess``, or the encoding of ``family`` whose text of ``body``'s first ``SAMPLE_BYTES`` ``score`` rates
    highest, when that beats ``guess``'s by more than ``MARGIN`` (the first in ``family`` order among equals);
    ``guess`` itself when it is not of ``family``."""
    if guess not in family:
        return guess
    sample = body[:SAMPLE_BYTES]
    try:
        need = score(_prefix_text(sample, guess)) + MARGIN
    except (UnicodeDecodeError, LookupError):
        return guess
    best = guess
    for enc in family:
        if enc == guess:
            continue
        try:
            rated = score(_prefix_text(sample, enc))
        except UnicodeDecodeError:
            continue
        if rated > need:
            best, need = enc, rated
    return best


def _prefix_text(sample: bytes, enc: str) -> str:
    """``sample`` (the first bytes of a body) decoded strictly, but for a character cut at its end."""
    return codecs.getincrementaldecoder(enc)().decode(sample, final=False)

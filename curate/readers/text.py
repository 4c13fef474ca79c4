"""Bytes to valid text, shared by every reader: safe charsets, lone surrogates, the binary test.

- Only *text* codecs that web pages really use are honoured (the WHATWG encodings). A page or an HTTP
  header that names anything else (``punycode``, ``idna``, ``unicode_escape``, ``base64``, ``rot13``, an
  unknown name) is ignored and the bytes go through detection instead.
- Python strings can hold lone surrogates (a JSON ``"\\ud800"`` escape); they are not valid UTF-8 and
  would fail when a shard is written. :func:`clean_surrogates` replaces each with U+FFFD and counts them.
- A document is ``binary_content`` when more than ``BINARY_CONTROL_RATIO`` of its first 64 Ki characters
  are C0 control characters (other than tab, newline, carriage return, form feed; counted on the UTF-8 bytes): a stray NUL does not
  set a page aside; a decoded image does.
- A byte order mark decides, before any label (as browsers do, WHATWG "BOM sniffing"): a UTF-16 page whose
  HTTP header says ``iso-8859-1`` is still UTF-16. A page in UTF-16 without a mark is recognised by its NUL
  bytes (every other byte of its markup): UTF-8 would decode it "cleanly", one NUL per character.
"""
from __future__ import annotations

import codecs
import re

from curate.schema import PLAIN

BINARY_CONTROL_RATIO = 0.05
_SAMPLE = 65536

# WHATWG encoding labels (https://encoding.spec.whatwg.org/#names-and-labels) that Python can decode.
_WEB_LABELS = (
    "utf-8 utf-16le utf-16be utf-16 ibm866 cp866 iso-8859-2 iso-8859-3 iso-8859-4 iso-8859-5 iso-8859-6 "
    "iso-8859-7 iso-8859-8 iso-8859-10 iso-8859-13 iso-8859-14 iso-8859-15 iso-8859-16 koi8-r koi8-u "
    "mac-roman mac-cyrillic cp874 tis-620 cp1250 cp1251 cp1252 cp1253 cp1254 cp1255 cp1256 cp1257 cp1258 "
    "gbk gb2312 gb18030 big5 big5hkscs euc-jp iso-2022-jp shift_jis cp932 euc-kr cp949 ascii iso-8859-1"
).split()
_ALLOWED = frozenset(codecs.lookup(label).name for label in _WEB_LABELS)
# WHATWG: pages labelled latin-1/iso-8859-1/ascii are decoded as windows-1252.
_AS_CP1252 = frozenset(codecs.lookup(label).name for label in ("iso-8859-1", "ascii"))
_EXTRA_ALIASES = {"x-sjis": "shift_jis", "windows-874": "cp874", "x-mac-roman": "mac-roman", "x-gbk": "gbk",
                  "x-mac-cyrillic": "mac-cyrillic", "x-euc-jp": "euc-jp", "ks_c_5601-1987": "cp949"}

_CHARSET_RE = re.compile(rb"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]{1,40})", re.I)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_CONTROL_BYTES = bytes([*range(0, 9), 11, *range(14, 32)])


def safe_codec(label: str) -> str | None:
    """The Python codec for a charset label, or None when it is not a web text encoding."""
    label = label.strip().strip("\"'").lower()
    label = _EXTRA_ALIASES.get(label, label)
    try:
        name = codecs.lookup(label).name
    except (LookupError, ValueError):
        return None
    if name not in _ALLOWED:
        return None
    return "cp1252" if name in _AS_CP1252 else name


_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_SNIFF = 1024  # bytes looked at for the NULs of UTF-16 without a byte order mark


def sniff(body: bytes) -> str | None:
    """The codec a byte order mark names (the mark is dropped in decoding), or ``utf-16-le`` / ``utf-16-be``
    for text without one whose first ``_SNIFF`` bytes have NULs in most odd (even) places and almost none in
    the other ones: Latin-script UTF-16. None otherwise."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return codec
    head = body[:_SNIFF]
    half = len(head) // 2
    if half < 8:
        return None
    even, odd = head[0:2 * half:2].count(0), head[1:2 * half:2].count(0)
    if odd >= 0.5 * half and even <= 0.02 * half:
        return "utf-16-le"
    if even >= 0.5 * half and odd <= 0.02 * half:
        return "utf-16-be"
    return None


def decode(body: bytes, content_type: bytes = b"", html: bool = True) -> tuple[str, bool]:
    """Bytes to str: a byte order mark (or UTF-16's NULs, ``sniff``), then the HTTP charset, then the HTML
    meta charset, then UTF-8, then detection.

    ``ok`` is False when no encoding decodes the bytes cleanly (the text then holds a best-effort decode)."""
    sniffed = sniff(body)
    candidates = [sniffed] if sniffed else []
    for blob in (content_type, body[:4096] if html else b""):
        m = _CHARSET_RE.search(blob)
        if m:
            enc = safe_codec(m.group(1).decode("ascii", "ignore"))
            if enc:
                candidates.append(enc)
    candidates.append("utf-8")
    for enc in candidates:
        try:
            return body.decode(enc), True
        except (UnicodeDecodeError, LookupError):
            continue
    from charset_normalizer import from_bytes

    best = from_bytes(body[:200_000]).best()
    enc = safe_codec(best.encoding) if best is not None else None
    if enc:
        try:
            return body.decode(enc), True
        except (UnicodeDecodeError, LookupError):
            pass
    return body.decode("utf-8", errors="replace"), False


def clean_surrogates(s: str) -> tuple[str, int]:
    """Replace lone surrogates (not valid in UTF-8) with U+FFFD; returns the text and how many."""
    try:
        s.encode("utf-8")
        return s, 0
    except UnicodeEncodeError:
        n = len(_SURROGATE_RE.findall(s))
        return _SURROGATE_RE.sub("\ufffd", s), n


def is_binary(text: str) -> bool:
    """More than ``BINARY_CONTROL_RATIO`` control characters in the first 64 Ki characters (counted on their
    UTF-8 bytes, where C0 controls are single bytes: one C-speed ``bytes.translate``)."""
    sample = text[:_SAMPLE].encode("utf-8", "surrogatepass")
    if not sample:
        return False
    controls = len(sample) - len(sample.translate(None, _CONTROL_BYTES))
    return controls > BINARY_CONTROL_RATIO * len(sample)


def row(id_: str, text: str, source: str, url: str = "", content_type: str = PLAIN) -> dict:
    return {"id": id_, "text": text, "source": source, "url": url, "content_type": content_type}


def check_text(r: dict, raw_len: int, max_doc_bytes: int) -> tuple:
    """The verdict on a decoded document: ``("doc", row)`` or ``("drop", row, reason)``."""
    if raw_len > max_doc_bytes:
        r["text"] = r["text"][:10000]
        return ("drop", r, "too_large")
    text = r["text"]
    if not text.strip():
        return ("drop", r, "empty_document")
    if is_binary(text):
        return ("drop", r, "binary_content")
    return ("doc", r)


def clean_row(r: dict) -> tuple[dict, int]:
    """Make every string of a row valid UTF-8; returns the row and the number of replaced surrogates."""
    total = 0
    for k in ("id", "text", "source", "url"):
        r[k], n = clean_surrogates(r[k])
        total += n
    return r, total

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
- Then the HTTP header's ``charset`` parameter, then the page's own declaration as the HTML standard's prescan
  finds it (:func:`prescan`): only ``<meta charset>`` and ``<meta http-equiv=content-type content=...>``
  count, comments and other tags' attributes are stepped over (a ``<script charset>`` or a link's
  ``?charset=`` is not the page's encoding), and a ``<meta>`` naming UTF-16 means UTF-8 (the bytes holding
  it are ASCII). Labels are read with the Encoding Standard's table (``latin1`` is windows-1252). A
  candidate that does not decode the bytes is passed over for the next: UTF-8, then detection.
- Detection (:func:`_detected`): charset_normalizer's own guess where it is a web encoding, or one that decodes
  the bytes to the same text as a web encoding (its ``could_be_from_charset``: ``euc_jis_2004`` for EUC-JP text
  is read as ``euc_jp``); then, where that is refused or does not decode, its candidates among the web encodings
  only, each tried in turn (short KOI8-R text, guessed ``shift_jis_2004``, is read as KOI8-R). A page is
  ``invalid_utf8`` only when none of them decodes it.
"""
from __future__ import annotations

import codecs
import re

from curate.readers.alphabets import best_cjk, best_latin
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

# The Encoding Standard's label table: Python codec -> its labels. A label found here means what the standard
# says (iso-8859-9 is windows-1254, tis-620 windows-874, "unicode" UTF-16LE, x-user-defined read as
# windows-1252 as the HTML prescan does); one not found here goes through Python's own aliases, limited to
# ``_ALLOWED``. The multi-byte CJK labels keep the strict codec the label names (gb2312, not its superset
# gb18030 as the standard decodes): a page labelled gb2312 that is really UTF-8 then fails to decode and goes
# on to the next candidate and detection instead of being kept as mojibake.
_STANDARD = {
    "utf-8": "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8",
    "cp866": "866 cp866 csibm866 ibm866",
    "iso8859-2": "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2",
    "iso8859-3": "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3",
    "iso8859-4": "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4",
    "iso8859-5": "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 iso_8859-5:1988",
    "iso8859-6": "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e "
                 "iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
    "iso8859-7": "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 "
                 "iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    "iso8859-8": "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 "
                 "iso_8859-8 iso_8859-8:1988 visual csiso88598i iso-8859-8-i logical",
    "iso8859-10": "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    "iso8859-13": "iso-8859-13 iso8859-13 iso885913",
    "iso8859-14": "iso-8859-14 iso8859-14 iso885914",
    "iso8859-15": "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    "iso8859-16": "iso-8859-16",
    "koi8-r": "cskoi8r koi koi8 koi8-r koi8_r",
    "koi8-u": "koi8-ru koi8-u",
    "mac-roman": "csmacintosh mac macintosh x-mac-roman",
    "mac-cyrillic": "x-mac-cyrillic x-mac-ukrainian",
    "cp874": "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874",
    "cp1250": "cp1250 windows-1250 x-cp1250",
    "cp1251": "cp1251 windows-1251 x-cp1251",
    "cp1252": "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 iso88591 "
              "iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252 x-user-defined",
    "cp1253": "cp1253 windows-1253 x-cp1253",
    "cp1254": "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 latin5 "
              "windows-1254 x-cp1254",
    "cp1255": "cp1255 windows-1255 x-cp1255",
    "cp1256": "cp1256 windows-1256 x-cp1256",
    "cp1257": "cp1257 windows-1257 x-cp1257",
    "cp1258": "cp1258 windows-1258 x-cp1258",
    "gb2312": "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 iso-ir-58",
    "gbk": "gbk x-gbk",
    "gb18030": "gb18030",
    "big5": "big5 cn-big5 csbig5 x-x-big5",
    "big5hkscs": "big5-hkscs",
    "euc_jp": "cseucpkdfmtjapanese euc-jp x-euc-jp",
    "iso2022_jp": "csiso2022jp iso-2022-jp",
    "shift_jis": "csshiftjis ms_kanji shift-jis shift_jis sjis x-sjis",
    "cp932": "ms932 windows-31j",
    "euc_kr": "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1989 ksc5601 ksc_5601",
    "cp949": "ks_c_5601-1987 windows-949",
    "utf-16-le": "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    "utf-16-be": "unicodefffe utf-16be",
    # the standard's "replacement" encoding (a page in it shows as one U+FFFD): ignored, as an unknown label
    "": "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement",
}
_LABELS = {label: codec or None for codec, labels in _STANDARD.items() for label in labels.split()}
_UTF16 = frozenset(("utf-16", "utf-16-le", "utf-16-be"))
assert all(c is None or c in _UTF16 or codecs.lookup(c).name in _ALLOWED for c in _LABELS.values())

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_CONTROL_BYTES = bytes([*range(0, 9), 11, *range(14, 32)])
_LOOSE_CHARSET_RE = re.compile(r"charset\s*=\s*[\"']?([A-Za-z0-9_.:-]{1,40})", re.I)


def safe_codec(label: str) -> str | None:
    """The Python codec for a charset label, or None when it is not a web text encoding: the Encoding
    Standard's label table first (``_STANDARD``), then Python's aliases of the codecs in ``_ALLOWED``."""
    label = label.strip().strip("\"'").strip().lower()
    if label in _LABELS:
        return _LABELS[label]
    try:
        name = codecs.lookup(label).name
    except (LookupError, ValueError):
        return None
    if name not in _ALLOWED:
        return None
    return "cp1252" if name in _AS_CP1252 else name


def transport_codec(content_type: bytes) -> str | None:
    """The codec named by the ``charset`` parameter of an HTTP ``Content-Type`` value (the first one; a
    ``charset=`` inside another parameter's value does not count), or None. A header with no such parameter
    but a ``charset=`` elsewhere (``text/html, charset=utf-8``: malformed, seen on real servers) is read
    leniently, as before."""
    header = content_type.decode("latin-1")
    for param in header.split(";")[1:]:
        name, eq, value = param.partition("=")
        if eq and name.strip().lower() == "charset":
            value = value.strip()
            if value[:1] == '"':
                value = value[1:].partition('"')[0]
            return safe_codec(value)
    m = _LOOSE_CHARSET_RE.search(header)
    return safe_codec(m.group(1)) if m else None


# The HTML standard's prescan (https://html.spec.whatwg.org/multipage/parsing.html#prescan-a-byte-stream-to-
# determine-its-encoding): only <meta> tags count; comments and the attributes of other tags (a <script
# charset>, a link's "?charset=" query) are stepped over. The standard prescans 1024 bytes, then honours a
# <meta> found later while parsing (it "changes the encoding"); this window stands for both. It is the window
# the reader used before: on the real pages looked at, a <meta> further on was UTF-8 or wrong, not needed.
PRESCAN_BYTES = 4096
_ATTRIBUTE_RE = re.compile(rb"""[\t\n\f\r /]*(?:
    (?P<end>>)
  | (?P<name>[^\t\n\f\r />][^\t\n\f\r /=>]*)
    (?:[\t\n\f\r ]*=[\t\n\f\r ]*
       (?:"(?P<dq>[^"]*)(?P<dqe>"?) | '(?P<sq>[^']*)(?P<sqe>'?) | (?=>) | (?P<uq>[^\t\n\f\r >]+)))?
)""", re.X)
_META_OPEN_RE = re.compile(rb"<meta[\t\n\f\r /]", re.I)
_TAG_OPEN_RE = re.compile(rb"</?[A-Za-z]")
_TAG_NAME_END_RE = re.compile(rb"[\t\n\f\r >]")
_CONTENT_CHARSET_RE = re.compile(rb"charset[\t\n\f\r ]*=[\t\n\f\r ]*(?:\"([^\"]*)(\"?)|'([^']*)('?)|([^\t\n\f\r ;]*))")


def _attributes(buf: bytes, pos: int) -> tuple[list, int] | None:
    """The standard's "get an attribute", repeated: the (lower-cased name, lower-cased value) pairs of a tag
    from ``pos``, and the index of its closing ``>``; None when the tag does not close within ``buf``."""
    out, n = [], len(buf)
    while True:
        m = _ATTRIBUTE_RE.match(buf, pos)
        if m is None:  # only spaces and slashes up to the end
            return None
        if m.group("end"):
            return out, m.start("end")
        if m.end() >= n or m.group("dqe") == b"" or m.group("sqe") == b"":  # runs out of bytes
            return None
        value = m.group("dq")
        if value is None:
            value = m.group("sq")
        if value is None:
            value = m.group("uq") or b""
        out.append((m.group("name").lower(), value.lower()))
        pos = m.end()


def _content_charset(content: bytes) -> str | None:
    """The standard's "extracting a character encoding from a meta element" (``content="text/html;
    charset=..."``): the codec, or None."""
    for m in _CONTENT_CHARSET_RE.finditer(content):
        if m.group(1) is not None:
            return safe_codec(m.group(1).decode("latin-1")) if m.group(2) else None
        if m.group(3) is not None:
            return safe_codec(m.group(3).decode("latin-1")) if m.group(4) else None
        label = m.group(5)
        return safe_codec(label.decode("latin-1")) if label else None
    return None


def _meta_codec(attributes: list) -> str | None:
    """What one <meta>'s attributes declare (the standard's steps for a <meta> in the prescan), or None."""
    seen, got_pragma, need_pragma, charset = set(), False, None, None
    for name, value in attributes:
        if name in seen:
            continue
        seen.add(name)
        if name == b"http-equiv":
            got_pragma = got_pragma or value == b"content-type"
        elif name == b"content":
            codec = _content_charset(value)
            if codec and charset is None:
                charset, need_pragma = codec, True
        elif name == b"charset":
            charset, need_pragma = safe_codec(value.decode("latin-1")) or "", False  # "": an unknown label
    if need_pragma is None or (need_pragma and not got_pragma) or not charset:
        return None
    return "utf-8" if charset in _UTF16 else charset  # the standard: a UTF-16 <meta> means UTF-8


def prescan(body: bytes, limit: int = PRESCAN_BYTES) -> str | None:
    """The codec the first usable ``<meta charset>`` or ``<meta http-equiv=content-type content=...>`` in the
    first ``limit`` bytes declares, as the HTML standard's prescan finds it (UTF-16 read as UTF-8,
    x-user-defined as windows-1252, an unknown label skipped for the next <meta>), or None."""
    buf = body[:limit]
    if _META_OPEN_RE.search(buf) is None:  # no <meta> at all: the fast way out
        return None
    pos, n = 0, len(buf)
    while True:
        pos = buf.find(b"<", pos)
        if pos < 0:
            return None
        if buf.startswith(b"<!--", pos):
            end = buf.find(b"-->", pos + 2)
            if end < 0:
                return None
            pos = end + 3
        elif _META_OPEN_RE.match(buf, pos):
            found = _attributes(buf, pos + 5)
            if found is None:
                return None
            codec = _meta_codec(found[0])
            if codec:
                return codec
            pos = found[1] + 1
        elif _TAG_OPEN_RE.match(buf, pos):
            m = _TAG_NAME_END_RE.search(buf, pos)
            found = _attributes(buf, m.start()) if m else None
            if found is None:
                return None
            pos = found[1] + 1
        elif buf.startswith((b"<!", b"</", b"<?"), pos):
            end = buf.find(b">", pos + 1)
            if end < 0:
                return None
            pos = end + 1
        else:
            pos += 1
        if pos >= n:
            return None


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
    """Bytes to str, trying in turn: a byte order mark (or UTF-16's NULs, ``sniff``); UTF-8, when the bytes
    hold non-ASCII and are valid UTF-8; the HTTP ``Content-Type`` charset (``transport_codec``); the page's
    <meta> (``prescan``, HTML only, the WHATWG prescan); UTF-8; then detection. A candidate that does not
    decode the bytes cleanly is passed over for the next one.

    Valid UTF-8 goes before what the page declares (as trafilatura and resiliparse decode, unlike a browser):
    a page saved as UTF-8 under a stale ``windows-1252`` <meta> or header is common on the web (mojibake like
    ``â€™`` if the declaration is believed), while legacy-encoded text that happens to be valid UTF-8 is
    vanishingly rare. A pure-ASCII page is decoded as declared (a 7-bit encoding such as ISO-2022-JP is
    ASCII bytes), except that a UTF-16 declaration without the NULs of UTF-16 is not believed.

    Text with a flaw is still its encoding, as a browser shows it (U+FFFD for the flaw, not a page of mojibake or a
    page set aside): bytes cut short inside the last character (a record truncated at a length limit, as Common
    Crawl truncates at 1 MiB) lose the partial character; bytes with a few invalid sequences among many valid
    multi-byte characters get U+FFFD for each (``_plausible``: far more valid than invalid, or, where the header or
    <meta> declares the encoding, clearly more). UTF-8 is asked first, the declared encoding after: legacy
    multi-byte text pairs at most about as many bytes into valid UTF-8 as not (EUC-JP 1.3, GBK 1.1 valid per
    invalid on the gold sets' pages), a flawed UTF-8 page many times more.

    ``ok`` is False when no encoding decodes the bytes cleanly (the text then holds a best-effort decode)."""
    bom = sniff(body)
    ascii_bytes = bom is None and body.isascii()
    utf8 = None  # (text, valid multi-byte characters, invalid runs) of UTF-8 with U+FFFD for the invalid runs
    if bom is None and not ascii_bytes:
        got = _strict_or_cut(body, "utf-8")
        if got is not None:
            return got, True
        utf8 = _lenient(body, "utf-8")
        if _plausible(utf8, declared=False):
            return utf8[0], True
    declared = [transport_codec(content_type) if content_type else None, prescan(body) if html else None]
    for enc in dict.fromkeys(c for c in [bom, *declared, "utf-8"] if c):
        if ascii_bytes and enc in _UTF16:
            continue
        try:
            return body.decode(enc), True
        except (UnicodeDecodeError, LookupError):
            pass
        if enc not in declared or ascii_bytes:
            continue
        if utf8 is not None and _plausible(utf8, declared=True):  # UTF-8 with flaws, declared or under a stale label
            return utf8[0], True
        if enc != "utf-8":  # the declared legacy encoding, with a flaw
            got = _strict_or_cut(body, enc)
            if got is not None:
                return got, True
            legacy = _lenient(body, enc)
            if legacy is not None and _plausible(legacy, declared=True):
                return legacy[0], True
    for guess in _detected(body):
        # between encodings that decode the bytes alike cleanly, the script and language of the text decide
        for enc in dict.fromkeys((best_cjk(body, best_latin(body, guess)), guess)):
            got = _strict_or_cut(body, enc)  # a record truncated inside its last character loses that character
            if got is not None:
                return got, True
    return body.decode("utf-8", errors="replace"), False


DETECT_BYTES = 200_000  # the bytes the detector looks at
# What detection may choose among, when its free guess is not a web encoding or does not decode: the web
# encodings but UTF-8 (already tried), UTF-16 (a byte order mark or its NULs decide it, ``sniff``; any even
# number of bytes "decodes") and ASCII (a subset).
_DETECTABLE = tuple(sorted(c for c in _ALLOWED if c not in _UTF16 and c not in ("utf-8", "ascii")))


def _detected(body: bytes):
    """The codecs detection proposes for ``body``, best first (a name may repeat). charset_normalizer's free
    guess comes first, as it always has; its name may be a codec outside the web encodings that decodes these
    bytes to the same text as one inside (``euc_jis_2004`` for EUC-JP text, ``could_be_from_charset``), which is
    then used. Where the guess is outside them altogether (``shift_jis_2004`` for short KOI8-R text) or does not
    decode the whole body, detection is asked again among the web encodings only (``_DETECTABLE``) and each of its
    candidates is tried in its order, instead of setting the document aside at the first refusal."""
    from charset_normalizer import from_bytes

    sample = _boundary_cut(body[:DETECT_BYTES], len(body))
    best = from_bytes(sample).best()
    if best is not None:
        enc = safe_codec(best.encoding)
        if enc is None:  # the same text under a web encoding's name (never UTF-16: not sniffed, see above)
            enc = next((c for c in map(safe_codec, best.could_be_from_charset) if c and c not in _UTF16), None)
        if enc:
            yield enc
    for match in from_bytes(sample, cp_isolation=list(_DETECTABLE)):
        enc = safe_codec(match.encoding)
        if enc:
            yield enc


BOUNDARY_SEARCH = 4096  # bytes back from the sample's end searched for a character boundary


def _boundary_cut(sample: bytes, size: int) -> bytes:
    """``sample`` (the first bytes of a body of ``size`` bytes) ending on a character boundary in every legacy
    encoding detection chooses among: after its last byte below 0x40 (white space, digits, ``<``, ``>``: never
    the second byte of a Shift_JIS, GBK, Big5, EUC or UTF-8 character) within ``BOUNDARY_SEARCH`` bytes of its
    end. A sample cut inside a two-byte character made detection refuse the right encoding, so an undeclared
    page over ``DETECT_BYTES`` was set aside or read as mojibake depending on where its 200,000th byte fell."""
    if len(sample) >= size:
        return sample
    for k in range(len(sample) - 1, max(len(sample) - BOUNDARY_SEARCH, 0) - 1, -1):
        if sample[k] < 0x40:
            return sample[:k + 1]
    return sample


MOSTLY = 20  # valid multi-byte characters per invalid run for undeclared bytes to be taken for UTF-8 with flaws
MOSTLY_DECLARED = 4  # and where the header or <meta> declares the encoding (legacy text as UTF-8: at most 1.3)
_INVALID_RUN = re.compile("\ufffd+")


def _plausible(decoded: tuple[str, int, int], declared: bool) -> bool:
    """Whether a lenient decode (``_lenient``) is the page's encoding with a few flaws: many more valid
    characters than invalid runs, or (declared) one or two flaws among at least as many valid characters, or
    (undeclared) a single flaw among three or more."""
    _, good, bad = decoded
    if declared:
        return good >= MOSTLY_DECLARED * bad or (bad <= 2 and good >= bad)
    return good >= MOSTLY * bad or (bad == 1 and good >= 3)


def _strict_or_cut(body: bytes, enc: str) -> str | None:
    """``body`` decoded strictly as ``enc``, or less an incomplete last character (1-3 bytes); None when neither
    decodes."""
    for cut in (0, 1, 2, 3):
        if cut >= len(body):
            break
        try:
            return body[:len(body) - cut].decode(enc)
        except (UnicodeDecodeError, LookupError):
            continue
    return None


def _lenient(body: bytes, enc: str) -> tuple[str, int, int] | None:
    """``body`` decoded as ``enc`` with U+FFFD for each invalid sequence -> (text, valid non-ASCII characters,
    runs of invalid ones: an overlong or surrogate sequence is one flaw, not three); None for an unknown codec.
    Linear, in C but for the count of runs."""
    try:
        text = body.decode(enc, errors="replace")
    except LookupError:
        return None
    real = body.count(b"\xef\xbf\xbd") if enc == "utf-8" else 0  # U+FFFD written in the bytes is valid
    replaced = text.count("\ufffd") - real
    runs = max(0, len(_INVALID_RUN.findall(text)) - real) if replaced else 0
    non_ascii = len(text) - len(text.encode("ascii", "ignore"))
    return text, non_ascii - replaced - real, runs


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
    """A reader's row; an id or url over ``MAX_ID_CHARS`` / ``MAX_URL_CHARS`` is shortened (``bounded_field``)."""
    if len(id_) > MAX_ID_CHARS:
        id_ = bounded_field(id_, MAX_ID_CHARS)
    if len(url) > MAX_URL_CHARS:
        url = bounded_field(url, MAX_URL_CHARS)
    return {"id": id_, "text": text, "source": source, "url": url, "content_type": content_type}


def utf8_size(text: str) -> int:
    """The bytes of ``text`` in UTF-8 (a lone surrogate counts 3, as the U+FFFD that replaces it), encoded a
    slice at a time: never a second copy of a large text."""
    if text.isascii():
        return len(text)
    step = 1 << 20
    return sum(len(text[i:i + step].encode("utf-8", "surrogatepass")) for i in range(0, len(text), step))


MAX_ID_CHARS = 1024  # an id (from an input's id column) longer than this is shortened (``bounded_field``)
MAX_URL_CHARS = 65536  # ... and a url (real ones: a few thousand characters at most)


def bounded_field(value: str, limit: int) -> str:
    """``value``, or, when longer than ``limit`` characters, its start and a hash of the whole (still one
    value per distinct input, and bounded: an id or url is copied into every shard row, dedup's
    ``duplicate_of`` and the plans, where ``max_doc_bytes`` bounds only the text; a 30 MB id was kept whole)."""
    if len(value) <= limit:
        return value
    import hashlib

    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{value[:limit - 42]}...sha256:{digest}"  # (42: the marker and the digest)


def check_text(r: dict, raw_len: int, max_doc_bytes: int) -> tuple:
    """The verdict on a decoded document: ``("doc", row)`` or ``("drop", row, reason)``; ``raw_len``: the
    document's size in bytes (its body, its text's UTF-8), set aside as ``too_large`` over ``max_doc_bytes``."""
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

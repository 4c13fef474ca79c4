"""``normalize``: Unicode repair (ftfy), then control characters and whitespace.

The repair is exactly ``ftfy.fix_text(text, config)`` with ``config = TextFixerConfig(uncurl_quotes=False,
normalization=normalization)``: ftfy's defaults (mojibake, HTML entities such as ``&amp;`` and
``&eacute;``, Latin ligatures such as U+FB01, full-width letters, C1 controls, line breaks,
surrogates, terminal escapes, ftfy's list of control characters, then NFC) except that typographic
quotes are kept (they are text). ``tests/test_normalize.py`` proves the equality on real text,
mojibake, entities, ligatures, full-width forms, joiners and controls. One exception, for bounded cost: a run of
more than 30 combining marks gets U+034F after every 30 first (Unicode's Stream-Safe Text Format,
``curate.text.stream_safe``), since normalizing one long run takes quadratic time (160 KB: 5 s).

ftfy's ``fix_text`` is the slowest step of a cheap pipeline (docs/benchmarks.md), and most of its
work is looking for problems clean text does not have. So ``fix_text`` is called only on text that
one of its steps could change (``skip_clean = false`` calls it on everything): text holding an HTML
entity, a character of one of ftfy's tables (ligatures, widths, control characters), a C1 control,
a line break other than ``\n``, a surrogate or an escape; text not already in ``normalization``
form; or text whose lines ftfy's ``is_bad`` regex flags as mojibake. ``is_bad`` is itself slow,
so a cheaper gate runs first: every pattern of ftfy's badness regex needs either two adjacent
non-ASCII characters or one of a few characters named in its one-character patterns; the gate
(derived from ftfy's own regex at import) looks for exactly those. Text none of this finds is left
as it is, which is what ``fix_text`` would return.

Then, unless ``clean_whitespace = false`` (output = ``fix_text``'s, exactly): line breaks made
``\n`` (CR, CRLF and Unicode's other line and paragraph separators: VT, FF, NEL, U+2028, U+2029; those
but CR are made ``\n`` before the repair too, see ``line_breaks``, so that ftfy neither deletes a VT nor
reads a lone NEL as cp1252's "…", either gluing two lines' words), control characters removed (C0 but
tab and newline, C1, zero-width space U+200B, word joiner U+2060, BOM; the zero-width non-joiner and
joiner U+200C/U+200D stay: Persian and Indic spelling and emoji sequences need them), runs of spaces
collapsed to one space, spaces at line ends and starts cut, runs of blank lines cut to one, the text
stripped.

Reason: ``empty_after_normalize`` (nothing but whitespace left).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import ftfy
from ftfy import TextFixerConfig
from ftfy.badness import BADNESS_RE
from ftfy.chardata import C1_CONTROL_RE, CHARMAP_ENCODINGS, CONTROL_CHARS, HTML_ENTITY_RE, LIGATURES, WIDTH_MAP

from curate.schema import TEXT
from curate.stage_watch import at_doc
from curate.stages.base import MapStage, StageResult, set_column, split
from curate.text.stream_safe import stream_safe

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u2060\ufeff]")
_SPACES = re.compile(r"[ \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]+")  # each run -> one space
# the runs _SPACES changes (a single " " it leaves as it is): same output, a match per change only
_SPACES_TO_CHANGE = re.compile(r"[ \t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]{2,}|[\t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_TRAILING = re.compile(r" +\n")
_LEADING = re.compile(r"\n +")
_BLANK_LINES = re.compile(r"\n{3,}")
_NEWLINES = re.compile(r"\r\n?|[\x0b\x0c\u2028\u2029\x85]")  # VT, FF, NEL, LS, PS: Unicode's line breaks
NORMALIZATIONS = ("NFC", "NFKC", "NFD", "NFKD", "none")
EMPTY = "empty_after_normalize"


@dataclass
class Params:
    fix_encoding: bool = True     # run ftfy at all (false: only the normalization form below)
    skip_clean: bool = True       # skip ftfy where it would change nothing (see module doc)
    normalization: str = "NFC"    # NFC, NFKC, NFD, NFKD, or "none" (ftfy's normalization setting)
    clean_whitespace: bool = True  # false: the output is fix_text's, exactly

    def __post_init__(self):
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization = {self.normalization!r}; allowed: {', '.join(NORMALIZATIONS)}")


def ftfy_config(params: Params = Params()) -> TextFixerConfig:
    """The ``TextFixerConfig`` the stage's repair equals ``fix_text`` under."""
    form = None if params.normalization == "none" else params.normalization
    return TextFixerConfig(uncurl_quotes=False, normalization=form, explain=False)


class Normalize(MapStage):
    Params = Params
    REASONS = {EMPTY: "nothing but whitespace left after the repair and the whitespace cleaning (the text held only "
                      "control, zero-width or space characters)"}

    def __init__(self, name: str, params=None):
        super().__init__(name, params)
        self._config = ftfy_config(self.params)

    def apply(self, table, context=None) -> StageResult:
        before = table.column(TEXT).to_pylist()
        texts = []
        for i, t in enumerate(before):
            at_doc(i)  # the per-document time limit (curate/stage_watch.py) counts against this one now
            texts.append(normalize_text(t, self.params, self._config))
        if any(a is not b for a, b in zip(texts, before)):  # unchanged texts are the same objects
            table = set_column(table, TEXT, texts)
        # with clean_whitespace the text is stripped; without, a text of spaces is as empty
        return split(table, self.name, [None if t and not t.isspace() else EMPTY for t in texts])


def normalize_text(text: str, params: Params = Params(), config: TextFixerConfig | None = None) -> str:
    # one scan for the characters of every step but the mojibake test: most texts have none
    plain = _SPECIAL.search(text) is None
    if not plain and params.clean_whitespace and params.fix_encoding:
        text = line_breaks(text)
    fixed = repair(text, params, config, plain)
    if not params.clean_whitespace:
        return fixed
    return clean_whitespace(fixed, plain=plain and fixed is text)


def _nel_mojibake_before() -> str:
    """The characters that a byte of a UTF-8 sequence before a 0x85 byte becomes in an encoding of
    ftfy's (``CHARMAP_ENCODINGS``) that decodes 0x85 as NEL (latin-1, ISO-8859-2): a NEL after one of them
    may be mojibake (UTF-8 "ą" read as latin-1 is "Ä\x85") that ftfy repairs."""
    import ftfy.bad_codecs  # noqa: F401 - registers ftfy's sloppy codecs

    chars = set()
    for enc in CHARMAP_ENCODINGS:
        try:
            if b"\x85".decode(enc) != "\x85":
                continue
        except (LookupError, UnicodeDecodeError):
            continue
        for b in range(0x80, 0xF5):  # UTF-8's lead and continuation bytes
            try:
                chars.add(bytes([b]).decode(enc))
            except UnicodeDecodeError:
                pass
    return "".join(sorted(chars))


_NEL_AFTER = re.escape(_nel_mojibake_before())
# VT, FF, LS, PS; NEL where no character before it (nor one before a space: ftfy reads U+00A0 mangled to a
# space back as byte 0xA0) can be a byte of its UTF-8 sequence
_LINE_BREAKS = re.compile(f"[\x0b\x0c\u2028\u2029]|(?<![{_NEL_AFTER}])(?<![{_NEL_AFTER}] )\x85")


def line_breaks(text: str) -> str:
    """``text`` with Unicode's line and paragraph separators VT, FF, NEL, U+2028 and U+2029 made ``\n``
    (what ``normalize_text`` hands ftfy with ``clean_whitespace``): ftfy deletes a VT and makes a lone NEL
    cp1252's "…" (its C1 repair), gluing the words around it. A NEL right after a character that a byte of
    mojibake before 0x85 reads as (``_nel_mojibake_before``) is left to ftfy, which repairs mojibake of
    "ą", "Å", Cyrillic "х" ... there (and makes a NEL it does not repair "…")."""
    if "\x0b" in text or "\x0c" in text or "\x85" in text or "\u2028" in text or "\u2029" in text:
        return _LINE_BREAKS.sub("\n", text)
    return text


def repair(text: str, params: Params = Params(), config: TextFixerConfig | None = None,
           plain: bool = False) -> str:
    """``ftfy.fix_text(text, ftfy_config(params))``, skipping the call where it would change nothing.
    With ``fix_encoding = false``: only the normalization form. ``plain``: ``text`` is known to
    hold no character of ``_SPECIAL``."""
    if not params.fix_encoding:
        if params.normalization != "none" and not text.isascii() and not unicodedata.is_normalized(params.normalization, text):
            text = unicodedata.normalize(params.normalization, stream_safe(text))
        return text
    if needs_ftfy(text, params.skip_clean, params.normalization, plain):
        if params.normalization != "none":
            text = stream_safe(text)  # a long run of combining marks made the normalization quadratic
        return ftfy.fix_text(text, config or ftfy_config(params))
    return text


def needs_ftfy(text: str, skip_clean: bool = True, normalization: str = "NFC", plain: bool = False) -> bool:
    """Whether ``fix_text`` could change ``text`` (false only where it certainly would not).
    ``plain``: ``text`` is known to hold no character of ``_SPECIAL`` (so none of ``_FIXER_CHARS``)."""
    if not skip_clean:
        return True
    if ("&" in text and HTML_ENTITY_RE.search(text)) or (not plain and _FIXER_CHARS.search(text)) or len(text) > _MAX_SEGMENT:
        return True
    if _C1_OTHER is not None and _C1_OTHER.search(text):
        return True
    if text.isascii():
        return False
    if normalization != "none" and not unicodedata.is_normalized(normalization, text):
        return True
    # fix_text runs ftfy's badness test line by line, so its "^" must match at every line start
    return _MOJIBAKE_GATE.search(text) is not None and _BADNESS_BY_LINE.search(text) is not None


def _fixer_chars() -> re.Pattern:
    """Characters that a fixer other than the mojibake repair and the normalization form reacts to
    (HTML entities are looked for with ftfy's own ``HTML_ENTITY_RE``): a C1 control (``fix_c1_controls``), a character of ftfy's
    ligature, width or control-character tables, a line break other than ``\\n``
    (``fix_line_breaks``), a surrogate (``fix_surrogates``), an escape (``remove_terminal_escapes``)."""
    chars = set(map(chr, LIGATURES)) | set(map(chr, WIDTH_MAP)) | set(map(chr, CONTROL_CHARS))
    chars |= {"\r", "\u2028", "\u2029", "\x85", "\x1b"}
    chars |= set(map(chr, range(0x80, 0xA0)))
    cls = "".join(sorted(re.escape(c) for c in chars))
    return re.compile(f"[{cls}\ud800-\udfff]")


_FIXER_CHARS = _fixer_chars()  # with HTML_ENTITY_RE: what the fixers react to
_SPACE_CHARS = r"[\t\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]"  # the spaces _SPACES changes but " "
# one class of the characters of _FIXER_CHARS, _CONTROL and _SPACE_CHARS (those of _NEWLINES are in
# _FIXER_CHARS): a text with none of them needs no fixer but the entity and mojibake repairs, and
# of the whitespace steps only the collapsing of " " runs and those after it
_SPECIAL = re.compile("[" + "".join(r[1:-1] for r in (_FIXER_CHARS.pattern, _CONTROL.pattern, _SPACE_CHARS)) + "]")
_MAX_SEGMENT = TextFixerConfig().max_decode_length
# ftfy's C1 regex is [\x80-\x9f], in _FIXER_CHARS; a future ftfy with another one is asked too
_C1_OTHER = None if C1_CONTROL_RE.pattern == "[\\x80-\\x9f]" else C1_CONTROL_RE
_BADNESS_BY_LINE = re.compile(BADNESS_RE.pattern, BADNESS_RE.flags | re.MULTILINE)


def _mojibake_gate() -> re.Pattern:
    """A regex that matches every text ftfy's ``BADNESS_RE`` matches (a superset, much cheaper)."""
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
    singles, firsts, seconds = set(), set(), set()
    for branch in branches:
        items = list(branch)
        adjacent = [(a, b) for a, b in zip(items, items[1:]) if non_ascii(a) and non_ascii(b)]
        if adjacent:  # the pattern cannot match without two such characters side by side
            firsts |= chars(adjacent[0][0])
            seconds |= chars(adjacent[0][1])
            continue
        needed = [chars(item) for item in items if non_ascii(item)]
        if not needed:  # a pattern with no character it must contain: gate on any non-ASCII text
            return re.compile(r"[^\x00-\x7f]")
        singles |= needed[0]  # the pattern cannot match without one of these
    # one pair of classes (of all first characters, of all second ones): as fast as any two
    # non-ASCII characters, and a superset of every pair
    alternatives = [f"[{re.escape(''.join(sorted(firsts)))}][{re.escape(''.join(sorted(seconds)))}]"] if firsts else []
    if singles:
        alternatives.append("[" + re.escape("".join(sorted(singles))) + "]")
    return re.compile("|".join(alternatives))


_MOJIBAKE_GATE = _mojibake_gate()


def clean_whitespace(text: str, plain: bool = False) -> str:
    """Line breaks, controls, space runs, spaces at line ends and starts, blank-line runs (see the
    module doc). Each step runs only where a substring test shows it could change something (in
    ASCII text: a ``\r``, two spaces or a tab, ``" \n"``, ``"\n "``, three newlines; ``plain``:
    the caller found no character of ``_SPECIAL``, so only runs of ``" "`` can change); the
    output is that of running every step."""
    if plain:
        while "  " in text:  # runs of spaces, halved each time, end as one space
            text = text.replace("  ", " ")
    else:
        ascii_ = text.isascii()
        if not ascii_ or "\r" in text or "\x0b" in text or "\x0c" in text:
            text = _NEWLINES.sub("\n", text)
        text = _CONTROL.sub("", text)
        if not ascii_ or "  " in text or "\t" in text:
            text = _SPACES_TO_CHANGE.sub(" ", text)
    if " \n" in text:
        text = _TRAILING.sub("\n", text)
    if "\n " in text:
        text = _LEADING.sub("\n", text)
    if "\n\n\n" in text:
        text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()


def clean_whitespace_reference(text: str) -> str:
    """``clean_whitespace`` step by step, every step on every text (for tests)."""
    text = _NEWLINES.sub("\n", text)
    text = _CONTROL.sub("", text)
    text = _SPACES.sub(" ", text)
    text = _TRAILING.sub("\n", text)
    text = _LEADING.sub("\n", text)
    text = _BLANK_LINES.sub("\n\n", text)
    return text.strip()

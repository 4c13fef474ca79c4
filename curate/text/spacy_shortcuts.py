"""spaCy's tokens of common chunks without running spaCy.

``plain_tokens``: a word of letters with simple marks around it (languages in
``SHORTCUT_LANGUAGES``); ``compound_tokens``: English hyphenated words, possessives, numbers and
words in quotes or brackets. Each returns None when not sure; ``tests/test_words.py`` checks both
against spaCy.
"""
from __future__ import annotations

import re

# languages where the shortcut for plain words (see SpacyWords._shortcuts) is checked against spaCy
SHORTCUT_LANGUAGES = frozenset({"en", "de", "es", "it", "pl", "ru", "cs", "fr", "nl", "pt"})
ASCII_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_ASCII_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
MARKS = frozenset(",;:!?.")


_PLAIN_RE = re.compile(r'(["(]?)([^\W\d_]+)([,;:!?.]?)([")]?)')  # the shape plain_tokens handles


def rule_cores(rules) -> frozenset[str]:
    """Every string left of a special case after taking off at most one character at its start and
    two at its end: where a plain word is none of these, no rule is the word with marks around it."""
    out = set()
    for r in rules:
        for a in (0, 1):
            for b in (0, 1, 2):
                if len(r) > a + b:
                    out.add(r[a:len(r) - b])
    return frozenset(out)


def plain_tokens(chunk: str, rules, cores=None) -> tuple[str, ...] | None:
    """spaCy's tokens of a plain word with simple punctuation around it, or None when not sure.

    Handled: an optional ``"`` or ``(`` before, letters, an optional mark (``, ; : ! ? .``), an
    optional ``"`` or ``)`` after (not a mark and ``)``: ``:)`` is an emoticon), where neither the chunk nor any part of it left after taking
    marks off is one of spaCy's special cases (``rules``; ``cores``: their ``rule_cores``, to skip
    the check for most words). Then each mark is a prefix or suffix
    rule of its own and the letters are one token (no rule matches inside letters). A ``.`` is
    split off only after an ASCII lower-case letter or two ASCII capitals (spaCy's rules for a
    final period; ``A.`` and ``McD.`` stay whole)."""
    m = _PLAIN_RE.fullmatch(chunk)
    if m is None:
        return None
    pre, core, mark, close = m.groups()
    if not core.isalpha() or (mark and close == ")"):  # ":)" and ";)" are emoticons to spaCy
        return None
    if mark == "." and not (core[-1] in ASCII_LOWER or (core[-1] in _ASCII_UPPER and len(core) > 1
                                                          and core[-2] in _ASCII_UPPER)):
        return None
    if cores is None or core in cores:
        for p in {pre, ""}:
            for k in {mark, ""}:
                for q in {close, ""}:
                    if p + core + k + q in rules:
                        return None
    return tuple(x for x in (pre, core, mark, close) if x)


# English words joined by hyphens or numbers joined by one, with a possessive, with quotes, brackets
# and marks around them: spaCy's English rules split a hyphen, "--" or an em dash between letters
# and a hyphen between numbers (infixes), "'s" and "’s" at the end (suffixes), and each of these
# quotes, brackets and marks at either end (prefixes, suffixes). Only for languages listed here:
# others' rules differ (German keeps "well-known", French splits "Peter'" "s").
COMPOUND_LANGUAGES = frozenset({"en"})
COMPOUND_OPENERS = "\"([_'\u201c\u2018\u2014"
COMPOUND_CLOSERS = ",;:!?.\")]_'\u201d\u2019\u2014"
_NUMBER_PART = "[0-9]+(?:[:,][0-9]+)*"
# a word, with apostrophes inside (O'Brien, rock'n'roll: one token) but no "'s" at its end
_WORD_PART = "[A-Za-z]+(?:['\u2019](?![sS](?![A-Za-z]))[A-Za-z]+)*"
_COMPOUND_RE = re.compile(
    f"([{re.escape(COMPOUND_OPENERS)}]*)"
    f"({_WORD_PART}(?:(?:--|-|\u2014){_WORD_PART})*|{_NUMBER_PART}(?:-{_NUMBER_PART})*)"
    "((?:['\u2019][sS])?)"
    f"([{re.escape(COMPOUND_CLOSERS)}]*)")
_JOINER_RE = re.compile("(--|-|\u2014)")
# where spaCy's English rules split a final "." off: after a lower-case letter, a digit, a quote or
# one of its punctuation marks (not after a capital, a "." or a dash)
_BEFORE_PERIOD = frozenset("abcdefghijklmnopqrstuvwxyz0123456789,;:!?\")]_'\u201d\u2019")


def compound_tokens(chunk: str, rules: dict, longest: int | None = None) -> tuple[str, ...] | None:
    """spaCy's English tokens of words of ASCII letters joined by ``-``, ``--`` or ``—`` (or numbers,
    ``1:2,3``, joined by ``-``), an optional ``'s``/``’s`` after them and any of
    ``COMPOUND_OPENERS`` before and ``COMPOUND_CLOSERS`` after, each a token of its own; None when
    not sure. A ``.`` is split off only after a lower-case letter, a digit or one of the closers
    but ``.`` and ``—`` (not in ``A.``, ``..``, ``—.``). The result is kept only when no run of its tokens glued
    together is one of spaCy's special cases (``rules``; a rule that is one token left as it is
    excepted): the affix rules find these tokens, and spaCy's special cases, which would change
    them (``:)``, ``'em``, ``can't``), match none of their runs (runs no longer than ``longest``, the
    longest rule's characters). ``tests/test_words.py`` compares
    combinations of the shape with spaCy, and every such chunk of real text."""
    m = _COMPOUND_RE.fullmatch(chunk)
    if m is None:
        return None
    pre, core, poss, close = m.groups()
    if "." in close:
        for i, ch in enumerate(close):
            if ch == "." and (close[i - 1] if i else (poss or core)[-1]) not in _BEFORE_PERIOD:
                return None
    toks = [*pre, *_JOINER_RE.split(core), *([poss] if poss else ()), *close]
    if longest is None:  # characters of the longest special case (callers pass it, known once)
        longest = max(map(len, rules), default=0)
    for i in range(len(toks)):
        glued = ""
        for j in range(i, len(toks)):
            glued += toks[j]
            if len(glued) > longest:  # no rule is longer: the runs from i end here (else cubic in the
                break                 # chunk's tokens: "ab-ab-ab-..." of 14 KB took a minute)
            rule = rules.get(glued)
            if rule is not None and not (i == j and [r.get(65) for r in rule] == [glued]):  # 65: ORTH
                return None
    return tuple(toks)

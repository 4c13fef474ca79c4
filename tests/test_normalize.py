import pyarrow as pa

from curate.stages.normalize import Normalize, Params, needs_ftfy, normalize_text


def test_mojibake_is_repaired_and_clean_text_skips_ftfy():
    assert normalize_text("The Mona Lisa doesnâ€™t have eyebrows.") == "The Mona Lisa doesn’t have eyebrows."
    assert normalize_text("CafÃ© crÃ¨me") == "Café crème"
    assert not needs_ftfy("plain ascii text")
    assert not needs_ftfy("Grüße aus München, “quoted”")
    assert needs_ftfy("Grüße aus München", skip_clean=False)


def test_nfc_controls_and_whitespace():
    decomposed = "Cafe\u0301"
    assert normalize_text(decomposed) == "Café"
    assert normalize_text("a\x00b\x07c\u200bd") == "abcd"
    assert normalize_text("  line one   \r\n\r\n\r\n\tline\u00a0two  ") == "line one\n\nline two"


def test_stage_drops_documents_that_become_empty():
    t = pa.table({"id": ["1", "2"], "text": ["fine text", " \x00\u200b "]})
    res = Normalize("normalize", Params()).apply(t)
    assert res.kept["id"].to_pylist() == ["1"]
    assert res.dropped["reason"].to_pylist() == ["empty_after_normalize"]


def test_cheap_gate_never_hides_mojibake_from_ftfy():
    from ftfy.badness import is_bad

    from curate.stages.normalize import _MOJIBAKE_GATE

    assert _MOJIBAKE_GATE.pattern != r"[^\x00-\x7f]", "the gate fell back to 'any non-ASCII': ftfy's regex changed?"
    clean = ["naïve café “quoted” — dash", "Grüße aus München", "Привет мир", "emoji 🎉 party", "¿Qué tal? ¡Bien!",
             "Ærø Œuvre œil", "don’t stop — “now”", "1½ cups, 3° C, 5 µm, © 2024 ™"]
    seen_bad = 0
    for text in clean:
        for enc in ("latin-1", "cp1252", "cp437", "mac_roman", "cp1251", "cp850", "iso-8859-2", "cp1250"):
            try:
                garbled = text.encode("utf-8").decode(enc)
            except UnicodeDecodeError:
                continue
            if is_bad(garbled):
                seen_bad += 1
                assert _MOJIBAKE_GATE.search(garbled), (enc, garbled)
                assert needs_ftfy(garbled)
    assert seen_bad > 20
    # every pair of characters side by side that one of ftfy's patterns needs passes the gate
    from curate.stages.normalize import _BADNESS_BY_LINE
    import random
    rng = random.Random(0)
    pool = [chr(c) for c in range(0x80, 0x2600)]
    for _ in range(20_000):
        s = "".join(rng.choice(pool) for _ in range(3))
        if _BADNESS_BY_LINE.search(s):
            assert _MOJIBAKE_GATE.search(s), s


# --- the repair is ftfy.fix_text, exactly ------------------------------------------------------

import html.entities  # noqa: E402
import json  # noqa: E402
from pathlib import Path  # noqa: E402

import ftfy  # noqa: E402
import pytest  # noqa: E402
from ftfy.chardata import CONTROL_CHARS, LIGATURES, WIDTH_MAP  # noqa: E402

from curate.stages.normalize import (  # noqa: E402
    _SPECIAL, clean_whitespace, clean_whitespace_reference, ftfy_config, line_breaks, repair)

DATA = Path(__file__).parent / "data" / "filters"
CONFIG = ftfy_config()
MOJIBAKE_ENCODINGS = ("latin-1", "cp1252", "mac_roman", "cp437", "cp1251", "cp850", "iso-8859-2", "cp1250")


def _real_texts() -> list[str]:
    out = []
    for name in ("fortunes.jsonl", "prose.jsonl", "boilerplate.jsonl"):
        with open(DATA / name, encoding="utf-8") as f:
            out += [json.loads(line)["text"] for line in f]
    return out


REAL = _real_texts()


def garble(text: str, encoding: str) -> str | None:
    try:
        return text.encode("utf-8").decode(encoding)
    except UnicodeDecodeError:
        return None


def assert_same_as_fix_text(text: str) -> None:
    want = ftfy.fix_text(text, CONFIG)
    assert repair(text) == want, repr(text[:200])
    assert normalize_text(text) == clean_whitespace(ftfy.fix_text(line_breaks(text), CONFIG)), repr(text[:200])
    assert normalize_text(text, Params(clean_whitespace=False)) == want, repr(text[:200])
    # the guarded whitespace steps give what running every step gives
    assert clean_whitespace(want) == clean_whitespace_reference(want), repr(text[:200])
    assert clean_whitespace(text) == clean_whitespace_reference(text), repr(text[:200])
    if _SPECIAL.search(want) is None:
        assert clean_whitespace(want, plain=True) == clean_whitespace_reference(want), repr(text[:200])


def test_real_text_and_its_mojibake_equal_fix_text():
    checked = 0
    for text in REAL:
        assert_same_as_fix_text(text)
        for enc in MOJIBAKE_ENCODINGS[:4]:
            garbled = garble(text[:600], enc)
            if garbled is not None:
                assert_same_as_fix_text(garbled)
                checked += 1
    assert checked > 1000


def test_what_the_old_gate_missed_is_fixed_as_fix_text_fixes_it():
    cases = {
        "Fish &amp; chips": "Fish & chips",
        "caf&eacute; cr&egrave;me": "café crème",
        "P&EACUTE;REZ": "PÉREZ",
        "\ufb01nd the \ufb02ow": "find the flow",
        "\uff21\uff22\uff23 \uff46\uff55\uff4c\uff4c": "ABC full",
        "a \x1b[31mred\x1b[0m word": "a red word",
        "first line\nÂ second": "first line\n\xa0second",  # ftfy's "^" pattern, on a later line
    }
    for text, fixed in cases.items():
        assert needs_ftfy(text)
        assert repair(text) == fixed == ftfy.fix_text(text, CONFIG)


def test_joiners_survive():
    persian = "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645"  # mi-khaham: ZWNJ inside the word
    family = "\U0001F468\u200d\U0001F469\u200d\U0001F467"        # an emoji ZWJ sequence
    devanagari = "\u0915\u094d\u200d\u0937"                      # a half form with ZWJ
    for text in (persian, family, devanagari, f"{persian} {family}"):
        assert normalize_text(text) == text == ftfy.fix_text(text, CONFIG)
    assert normalize_text("a\u200bb\u2060c\ufeffd") == "abcd"  # zero-width space, word joiner, BOM still go


def test_clean_text_mostly_skips_ftfy():
    ascii_texts = [t for t in REAL if t.isascii()]
    # only ASCII text holding a control character ftfy removes (two fortunes: a bell, a backspace) needs it
    assert len(ascii_texts) > 500 and sum(map(needs_ftfy, ascii_texts)) <= 2
    others = [t for t in REAL if not t.isascii()]  # German, Russian, ... with no mojibake
    assert len(others) > 500 and sum(map(needs_ftfy, others)) / len(others) < 0.05


try:
    import hypothesis
    from hypothesis import strategies as st
except ImportError:  # the test extra brings it; without it only the property test is skipped
    hypothesis = None

if hypothesis is None:
    @pytest.mark.skip(reason="pip install -e .[test] (hypothesis)")
    def test_property_repair_equals_fix_text():
        pass
else:
    _ENTITIES = sorted(html.entities.html5)
    _PIECES = st.one_of(
        st.sampled_from([t[i:i + 80] for t in REAL[::5] for i in range(0, min(len(t), 400), 80)]),  # real text
        st.builds(lambda t, e: garble(t, e) or t, st.sampled_from([t[:120] for t in REAL[::7]]),
                  st.sampled_from(MOJIBAKE_ENCODINGS)),                                            # mojibake
        st.sampled_from(_ENTITIES).map(lambda e: "&" + e),                                          # &amp; &eacute &nbsp
        st.sampled_from(["&EACUTE;", "&NTILDE;", "&#233;", "&#x1F600;", "&#0;", "&#xD800;", "&amp", "<b>", "&"]),
        st.sampled_from(sorted(map(chr, LIGATURES))),                                               # ligatures
        st.sampled_from(sorted(map(chr, WIDTH_MAP))),                                               # full/half width
        st.sampled_from(["\u200c", "\u200d", "\u200b", "\u2060", "\ufeff", "\u200e", "\u202e"]),    # joiners, marks
        st.sampled_from(sorted(map(chr, CONTROL_CHARS)) + [chr(c) for c in range(0x80, 0xa0)]),    # controls, C1
        st.sampled_from(["\r", "\r\n", "\n", "\n\n\n", "\u2028", "\u2029", "\x85", "\t", "  ", "\xa0"]),
        st.sampled_from(["\x1b[31m", "\x1b[0m", "e\u0301", "\u0301", "\ud83d\ude00", "\ud800", "Ã ", "Â ", "â€™"]),
        st.text(max_size=8),
    )

    @hypothesis.settings(max_examples=600, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(st.lists(_PIECES, max_size=10).map("".join))
    def test_property_repair_equals_fix_text(text):
        assert_same_as_fix_text(text)


if hypothesis is not None:
    _WS = st.one_of(st.sampled_from([" ", "  ", "\t", "\n", "\n\n\n", "\r", "\r\n", "\x85", "\u2028", "\xa0",
                                     "\u3000", "\u2009", "\x00", "\x07", "\x7f", "\u200b", "\ufeff", "\x9f"]),
                    st.sampled_from(["a", "word", "é", "日本", "."]), st.text(max_size=4))

    @hypothesis.settings(max_examples=800, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(st.lists(_WS, max_size=20).map("".join))
    def test_property_clean_whitespace_equals_every_step(text):
        assert clean_whitespace(text) == clean_whitespace_reference(text)
        if _SPECIAL.search(text) is None:  # normalize_text's shortcut for text with no special character
            assert clean_whitespace(text, plain=True) == clean_whitespace_reference(text)

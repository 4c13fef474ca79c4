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

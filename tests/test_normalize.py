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

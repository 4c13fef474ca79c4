"""Undeclared (or stale-declared) legacy-encoded pages go to detection (``curate/readers/text.py``): a guess named
outside the web encodings (charset_normalizer's ``euc_jis_2004`` for EUC-JP, ``shift_jis_2004`` for short KOI8-R
text) must not set the page aside as ``invalid_utf8`` when a web encoding decodes it (probe r01)."""
import pytest

from curate.readers import read_file
from curate.readers.text import decode

JA = "日本語のテキストです。これは文字コードの試験です。東京と大阪の天気は晴れでしょう。" * 4
# short Russian texts in KOI8-R, in the fortune format (a line, then "\t\t-- author"), undeclared: the detector's free
# guess for them is shift_jis_2004 (refused) and nothing else was tried
RU = [
    "Лучше синица в руках, чем журавль в небе.\n\t\t-- Пословица",
    "Без труда не выловишь и рыбку из пруда.\n\t\t-- Пословица",
    "Семь раз отмерь, один раз отрежь.\n\t\t-- Русская пословица",
    "Тише едешь - дальше будешь.\n\t\t-- Русская пословица",
]
# the first Russian fortune that was set aside as an undeclared KOI8-R page (Debian fortunes-ru, via
# /work/shared/corpora/lang/fortunes.jsonl; BSD / GPL-2+)
FORTUNE = "Боюсь, что земной шар - пробный.\n\t\t-- Евгений Кащеев"


def _page(head: str, body: str) -> str:
    return f"<html><head>{head}<title>t</title></head><body><p>{body}</p></body></html>"


@pytest.mark.parametrize("head", ["", '<meta charset="utf-8">'], ids=["undeclared", "stale-utf8-meta"])
def test_euc_jp_page_without_a_right_declaration_is_decoded(head):
    page = _page(head, JA)
    assert decode(page.encode("euc_jp")) == (page, True)


@pytest.mark.parametrize("text", RU)
def test_short_undeclared_koi8r_text_is_decoded(text):
    assert decode(text.encode("koi8_r"), html=False) == (text, True)
    page = _page("", text)
    assert decode(page.encode("koi8_r")) == (page, True)


def test_short_undeclared_koi8r_page_is_decoded():
    page = _page("", FORTUNE)
    assert decode(page.encode("koi8_r")) == (page, True)


def test_undeclared_euc_jp_html_file_is_a_document_not_invalid_utf8(tmp_path):
    path = tmp_path / "ja.html"
    path.write_bytes(_page("", JA).encode("euc_jp"))
    items = [it for it in read_file(str(path), "html") if it[0] in ("doc", "drop")]
    assert [it[0] for it in items] == ["doc"], items
    assert JA[:20] in items[0][1]["text"]


def test_a_declared_encoding_still_decides():
    """Detection is the last resort: a right declaration is read as before."""
    page = _page('<meta charset="euc-jp">', JA)
    assert decode(page.encode("euc_jp")) == (page, True)
    page = _page("", RU[0])
    assert decode(page.encode("koi8_r"), b"text/html; charset=koi8-r") == (page, True)

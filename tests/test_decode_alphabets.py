"""Undeclared text in a single-byte Latin encoding is read in the one whose letters make one language's words
(``curate.readers.alphabets``), not in another that detection finds as clean: ISO-8859-2 Czech and Polish came
out as windows-1250 or ISO-8859-4 mojibake (``ą`` for ``š``, ``ľ`` for ``ž``)."""
import pytest

from curate.readers.alphabets import best_cjk, best_latin, fit
from curate.readers.text import decode

# sentences written for these tests
CZECH = ("Šťastný člověk si v září koupil žluťoučkého koně, který úpěl ďábelské ódy. "
         "Příští týden pojedeme do Plzně a pak na Šumavu.")
POLISH = ("Zażółć gęślą jaźń. W środę pojechaliśmy nad jezioro, gdzie łabędzie pływały między trzcinami, "
          "a świerszcze grały aż do późnej nocy.")
SPANISH = "¿Qué hora es? ¡Ya es tarde! El niño comió una piña en el 3º piso."
GERMAN = "© 2024 Müller & Söhne: Grüße aus Köln, wo die Straßen früh leer sind."
HUNGARIAN = "Árvíztűrő tükörfúrógép: a hűtőszekrényben öt tojás és egy üveg tej van."


def _page(text: str) -> str:
    return f"<html><head><title>t</title></head><body><p>{text}</p></body></html>"


@pytest.mark.parametrize("text,codec", [
    (CZECH, "iso8859_2"), (CZECH, "cp1250"), (POLISH, "iso8859_2"), (POLISH, "cp1250"),
    (HUNGARIAN, "iso8859_2"), (SPANISH, "cp1252"), (SPANISH, "iso8859_1"), (GERMAN, "cp1252"),
    (GERMAN, "iso8859_15"),
])
def test_undeclared_latin_text_is_read_in_its_encoding(text, codec):
    page = _page(text)
    got, ok = decode(page.encode(codec), b"", html=True)
    assert ok and got == page


def test_the_language_decides_between_clean_decodings():
    body = _page(CZECH).encode("iso8859_2")
    assert body.decode("cp1250") != _page(CZECH)  # decodes, but as other letters
    assert fit(body.decode("iso8859_2")) == 1.0 > fit(body.decode("cp1250"))
    assert best_latin(body, "cp1250") == "iso8859-2"


def test_punctuation_before_a_word_is_not_taken_for_a_letter():
    # ``¡`` and ``¿`` are letters in ISO-8859-2 (Ą, ż): Spanish must stay Spanish
    body = _page(SPANISH).encode("cp1252")
    assert best_latin(body, "cp1252") == "cp1252"


def test_non_latin_guesses_are_left_alone():
    body = "Съешь же ещё этих мягких французских булок".encode("koi8_r")
    assert best_latin(body, "koi8-r") == "koi8-r"


@pytest.mark.parametrize("text,codec", [
    ("おりがみをつくろう", "euc_jp"),            # kana only: Hangul jamo in EUC-KR
    ("きょうのイソップ童話", "euc_jp"),
    ("今天天氣很好，我們去公園散步吧。", "big5"),
    ("今天天气很好，我们去公园散步吧。", "gbk"),
    ("오늘은 날씨가 좋아서 공원에 갔다.", "euc_kr"),
])
def test_undeclared_east_asian_text_is_read_in_its_encoding(text, codec):
    page = _page(text)
    got, ok = decode(page.encode(codec), b"", html=True)
    assert ok and got == page


def test_text_in_other_scripts_is_not_taken_for_east_asian():
    # Cyrillic and accented Latin letters that an East Asian set holds stay what they are
    for text, codec in (("Епъл иска да купи английски стартъп", "euc_jp"), ("Dnes je krásné počasí.", "euc_jp")):
        body = _page(text).encode(codec)
        assert best_cjk(body, codec) == codec


@pytest.mark.parametrize("codec,text", [("euc_jp", "日本語の文章はここにあります。これはテストです。"),
                                        ("shift_jis", "日本語の文章はここにあります。これはテストです。"),
                                        ("gbk", "中文的文章在这里。这是一个测试。"),
                                        ("euc_kr", "한국어 문장은 여기에 있습니다. 이것은 시험입니다. ")])
@pytest.mark.parametrize("pad", [0, 1])
def test_a_long_undeclared_page_is_read_wherever_the_detection_sample_ends(codec, text, pad):
    # the detector reads the first 200,000 bytes: cut inside a two-byte character it refused the right encoding,
    # so such a page was set aside or read as mojibake depending on one byte; the page ends mid-character too
    # (a record truncated at a length limit)
    line = (text * 20 + "\n").encode(codec)
    body = (b" " * pad + b"<html><body><p>" + line * (300_000 // len(line) + 1))[:300_001]
    got, ok = decode(body, b"", html=True)
    assert ok and got == body.decode(codec, errors="ignore")

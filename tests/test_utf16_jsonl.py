"""A JSONL file in UTF-16 (with a byte order mark, as PowerShell's ``>`` writes it, or without one) or UTF-32 is
read as that encoding: 3 documents were 4 set-aside rows (3 invalid_utf8 and a malformed_record for the NUL
after the last newline), with nothing saying UTF-16 (probe r16)."""
import codecs
import gzip
import json

import pytest

from curate.readers import plan_splits, read_file, read_split

TEXTS = ["Grüße aus Köln, schöne Äpfel. " * 3 + str(i) for i in range(3)]
LINES = "".join(json.dumps({"id": f"d{i}", "text": t}, ensure_ascii=False) + "\n" for i, t in enumerate(TEXTS))


def _items(path):
    return list(read_file(str(path), "jsonl"))


@pytest.mark.parametrize("form, data", [
    ("utf-16 BOM LE", codecs.BOM_UTF16_LE + LINES.encode("utf-16-le")),
    ("utf-16 BOM BE", codecs.BOM_UTF16_BE + LINES.encode("utf-16-be")),
    ("utf-16-le no BOM", LINES.encode("utf-16-le")),
    ("utf-16-le CRLF", codecs.BOM_UTF16_LE + LINES.replace("\n", "\r\n").encode("utf-16-le")),
    ("utf-32 BOM", LINES.encode("utf-32")),
])
def test_utf16_and_utf32_jsonl_are_read(tmp_path, form, data):
    path = tmp_path / "u.jsonl"
    path.write_bytes(data)
    items = _items(path)
    docs = [it[1] for it in items if it[0] == "doc"]
    assert [d["text"] for d in docs] == TEXTS, items
    assert [d["id"] for d in docs] == ["d0", "d1", "d2"]
    assert not [it for it in items if it[0] == "drop"]
    key = "jsonl_utf32_files" if form.startswith("utf-32") else "jsonl_utf16_files"
    assert ("count", key, 1) in items


def test_utf16_jsonl_line_ids_and_bad_lines_count_as_in_utf8(tmp_path):
    """Line numbers (ids of records without one) and set-aside lines are those of the same file in UTF-8."""
    text = '{"text": "one line of text here"}\n' + "not json\n" + "\n" + '{"text": "three"}\n'
    (tmp_path / "a.jsonl").write_bytes(codecs.BOM_UTF16_LE + text.encode("utf-16-le"))
    (tmp_path / "b.jsonl").write_bytes(text.encode("utf-8"))
    a = [(it[0], it[1]["id"].replace("a.jsonl", "x"), it[2] if it[0] == "drop" else None)
         for it in _items(tmp_path / "a.jsonl") if it[0] in ("doc", "drop")]
    b = [(it[0], it[1]["id"].replace("b.jsonl", "x"), it[2] if it[0] == "drop" else None)
         for it in _items(tmp_path / "b.jsonl") if it[0] in ("doc", "drop")]
    assert a == b == [("doc", "x:1", None), ("drop", "x:2", "malformed_record"), ("doc", "x:4", None)]


def test_a_large_utf16_jsonl_is_one_split(tmp_path):
    """Splits are cut at byte ranges found as UTF-8 line ends: a UTF-16 file is read whole, in one split."""
    many = "".join(json.dumps({"text": f"document number {i} " * 20}) + "\n" for i in range(400))
    for name, data in (("big.jsonl", codecs.BOM_UTF16_LE + many.encode("utf-16-le")),
                       ("big.jsonl.gz", gzip.compress(codecs.BOM_UTF16_LE + many.encode("utf-16-le")))):
        path = tmp_path / name
        path.write_bytes(data)
        splits = plan_splits(str(path), "jsonl", target_bytes=4096, index_path=str(tmp_path / f"{name}.idx"))
        assert len(splits) == 1, splits
        docs = [it for s in splits for it in read_split(s) if it[0] == "doc"]
        assert len(docs) == 400 and docs[-1][1]["text"].startswith("document number 399 ")


def test_an_odd_utf16_tail_is_one_replacement_not_a_crash(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_bytes(codecs.BOM_UTF16_LE + LINES.encode("utf-16-le") + b"{")  # half a code unit at the end
    items = _items(path)
    assert len([it for it in items if it[0] == "doc"]) == 3
    assert [it[2] for it in items if it[0] == "drop"] == ["malformed_record"]  # the "\ufffd" line

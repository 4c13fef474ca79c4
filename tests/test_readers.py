"""Readers: every input record becomes a document, a counted skip, or a set-aside row with a reason."""
import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

from curate.readers import infer_format, read_file


def collect(path, fmt, **kw):
    docs, drops, skips = [], [], {}
    for item in read_file(str(path), fmt, **kw):
        if item[0] == "doc":
            docs.append(item[1])
        elif item[0] == "drop":
            drops.append((item[1], item[2]))
        elif item[0] == "count":
            skips["count:" + item[1]] = skips.get("count:" + item[1], 0) + item[2]
        else:
            skips[item[1]] = skips.get(item[1], 0) + 1
    return docs, drops, skips


def test_warc_keeps_html_responses_and_counts_other_records(sample_dir):
    docs, drops, skips = collect(sample_dir / "iana.warc.gz", "warc")
    assert skips["request"] == 171 and skips["revisit"] == 123 and skips["warcinfo"] == 1
    html = [d for d in docs if d["content_type"] == "text/html"]
    assert len(html) + len(drops) == 20  # the crawl's 20 HTML responses
    assert all(d["url"].startswith("http") and d["id"] for d in docs)
    assert len({d["id"] for d in docs}) == len(docs)


def test_non_utf8_pages_are_decoded_with_their_charset(sample_dir):
    docs, drops, _ = collect(sample_dir / "web-pages-87.warc.gz", "warc")
    assert len(docs) + len(drops) == 87
    assert not any("\ufffd" in d["text"] for d in docs), "a page was decoded with the wrong charset"


def test_arc_files_are_read(data_dir):
    docs, drops, skips = collect(data_dir / "readers" / "example.arc", "warc")
    assert len(docs) == 1 and docs[0]["url"]


def test_warc_gz_in_one_gzip_member_is_read_whole(data_dir):
    # example-bad.warc.gz.bad is one intact gzip member holding six WARC records (not one member per
    # record, as warcio wants): nothing is damaged, every record is read.
    docs, drops, skips = collect(data_dir / "readers" / "example-bad.warc.gz.bad", "warc")
    assert not drops and len(docs) == 2
    assert skips == {"warcinfo": 1, "request": 2, "revisit": 1, "count:warc_single_gzip_members": 1}


def test_truncated_gzip_keeps_what_came_before(tmp_path, sample_dir):
    raw = (sample_dir / "web-pages-87.warc.gz").read_bytes()
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(raw[: len(raw) // 2])
    docs, drops, _ = collect(cut, "warc")
    assert 20 < len(docs) < 87
    assert drops[-1][1] in ("truncated_gzip", "malformed_record")


def test_jsonl_bad_lines_are_set_aside_with_reasons(tmp_path):
    p = tmp_path / "mixed.jsonl"
    big = "word " * (11 * 1024 * 1024 // 5)
    lines = [
        json.dumps({"id": "a", "text": "A fine document."}).encode(),
        b'{"id": "b", "text": "broken json',
        b'{"id": "c", "text": "bad \xff\xfe bytes"}',
        json.dumps({"id": "d", "text": ""}).encode(),
        json.dumps({"id": "e", "body": "no text field"}).encode(),
        json.dumps({"id": "f", "text": "nul\x00\x00 junk"}).encode(),
        json.dumps({"id": "g", "text": big}).encode(),
        json.dumps({"text": "no id here"}).encode(),
    ]
    p.write_bytes(b"\n".join(lines) + b"\n")
    docs, drops, _ = collect(p, "jsonl")
    assert [d["id"] for d in docs] == ["a", "mixed.jsonl:8"]
    assert [(r["id"], reason) for r, reason in drops] == [
        ("mixed.jsonl:2", "malformed_record"), ("mixed.jsonl:3", "invalid_utf8"), ("d", "empty_document"),
        ("e", "missing_text"), ("f", "binary_content"), ("g", "too_large"),
    ]


def test_jsonl_compressed_variants(tmp_path):
    rows = [{"id": str(i), "text": f"document number {i}"} for i in range(50)]
    payload = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(payload))
    (tmp_path / "a.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(payload))
    for name in ("a.jsonl.gz", "a.jsonl.zst"):
        assert infer_format(name) == "jsonl"
        docs, drops, _ = collect(tmp_path / name, "jsonl")
        assert [d["id"] for d in docs] == [r["id"] for r in rows] and not drops


def test_truncated_jsonl_gz(tmp_path):
    payload = "".join(json.dumps({"text": f"line {i} " * 20}) + "\n" for i in range(2000)).encode()
    blob = gzip.compress(payload)
    (tmp_path / "t.jsonl.gz").write_bytes(blob[: len(blob) // 2])
    docs, drops, _ = collect(tmp_path / "t.jsonl.gz", "jsonl")
    assert 0 < len(docs) < 2000
    assert drops[-1][1] == "truncated_gzip"


def test_parquet_and_arrow_tables(tmp_path):
    table = pa.table({"id": ["x", None], "text": ["hello world", "second doc"], "url": ["http://a", None]})
    pq.write_table(table, tmp_path / "t.parquet")
    docs, drops, _ = collect(tmp_path / "t.parquet", "parquet")
    assert [d["id"] for d in docs] == ["x", "t.parquet:2"] and docs[0]["url"] == "http://a"
    import pyarrow.feather as feather
    feather.write_feather(table.drop_columns(["text"]), tmp_path / "bad.arrow")
    docs, drops, _ = collect(tmp_path / "bad.arrow", "arrow")
    assert not docs and drops[0][1] == "missing_text"


def test_binary_junk_file_is_set_aside(tmp_path):
    p = tmp_path / "junk.warc"
    p.write_bytes(bytes(range(256)) * 100)
    docs, drops, _ = collect(p, "warc")
    assert not docs and drops and drops[0][1] == "malformed_record"

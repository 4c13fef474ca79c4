"""Readers: every input record becomes a document, a counted skip, or a set-aside row with a reason."""
import bz2
import gzip
import io
import json
import lzma

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from curate.readers import infer_format, plan_splits, read_file, read_split

COMPRESS = {"gz": gzip.compress, "zst": zstandard.ZstdCompressor().compress, "bz2": bz2.compress, "xz": lzma.compress}


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


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_utf16_and_byte_order_marks_are_decoded(tmp_path, codec):
    """A byte order mark decides before any label, and UTF-16 without one is known by its NULs: such a page
    was set aside as binary_content (UTF-8 decodes it, a NUL per character) or kept as mojibake."""
    from curate.readers.text import decode

    page = "<html><head><meta charset='iso-8859-1'></head><body><p>Grüße aus Köln, 東京から.</p></body></html>"
    (tmp_path / "p.html").write_bytes(page.encode(codec))
    docs, drops, _ = collect(tmp_path / "p.html", "html")
    assert not drops and docs[0]["text"] == page
    if codec in ("utf-16", "utf-8-sig"):  # a mark beats the HTTP header's label too
        assert decode(page.encode(codec), b"text/html; charset=windows-1252") == (page, True)


def test_text_with_stray_nuls_is_not_taken_for_utf16():
    from curate.readers.text import decode

    body = b"<p>" + b"a\x00" * 10 + b"plain ASCII text with a few NULs, not UTF-16 at all</p>" * 20
    assert decode(body) == (body.decode("utf-8"), True)


@pytest.mark.parametrize("headers", [b"X-A: b\r\n" * 20000, b"X-Big: " + b"a" * 200_000 + b"\r\n"])
def test_a_response_with_very_long_http_headers_keeps_its_page(tmp_path, headers):
    """HTTP headers longer than 64 KiB made the payload empty (set aside as empty_document: the page lost)."""
    page = b"<html><body><p>" + b"the page itself " * 50 + b"</p></body></html>"
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + headers + b"\r\n" + page
    record = (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:1>\r\nWARC-Target-URI: http://x/\r\n"
              b"Content-Type: application/http; msgtype=response\r\nContent-Length: %d\r\n\r\n" % len(http))
    (tmp_path / "h.warc").write_bytes(record + http + b"\r\n\r\n")
    docs, drops, _ = collect(tmp_path / "h.warc", "warc")
    assert not drops and docs[0]["text"] == page.decode()


def test_a_list_of_content_codings_is_undone_in_reverse_order():
    """'Content-Encoding: gzip, gzip' (seen on real servers) was taken as undecoded bytes (invalid_utf8)."""
    from curate.readers.warc import MAX_CONTENT_CODINGS, _decode_content

    page = b"<p>hello</p>"
    assert _decode_content(gzip.compress(gzip.compress(page)), "gzip, gzip", 1000) == (page, False)
    assert _decode_content(gzip.compress(page), "identity, gzip", 1000) == (page, False)
    assert _decode_content(gzip.compress(gzip.compress(b"a" * 5000)), "gzip, gzip", 1000)[1]  # bounded per layer
    many = page
    for _ in range(MAX_CONTENT_CODINGS + 1):
        many = gzip.compress(many)
    assert _decode_content(many, ", ".join(["gzip"] * (MAX_CONTENT_CODINGS + 1)), 1000) == (many, False)


def test_zstd_and_brotli_content_codings_are_undone_and_bounded():
    """'Content-Encoding: zstd' (RFC 8878, sent by current servers) was left undecoded (invalid_utf8)."""
    import brotli
    import zstandard

    from curate.readers.warc import _decode_content

    page = b"<p>hello</p>"
    zstd = zstandard.ZstdCompressor().compress
    assert _decode_content(zstd(page), "zstd", 1000) == (page, False)
    assert _decode_content(brotli.compress(page), "br", 1000) == (page, False)
    assert _decode_content(gzip.compress(zstd(page)), "zstd, gzip", 1000) == (page, False)
    bomb = _decode_content(zstd(b"a" * 10_000_000), "zstd", 1000)  # never more than max_doc_bytes + 1 out
    assert bomb[1] and len(bomb[0]) == 1001
    assert _decode_content(b"not zstd", "zstd", 1000) == (b"not zstd", False)  # a wrong label: taken as it is


def test_arc_files_are_read(data_dir):
    docs, drops, skips = collect(data_dir / "readers" / "example.arc", "warc")
    assert len(docs) == 1 and docs[0]["url"]


def test_warc_gz_in_one_gzip_member_is_read_whole(data_dir):
    # example-bad.warc.gz.bad is one intact gzip member holding six WARC records (not one member per
    # record, as warcio wants): nothing is damaged, every record is read. One of its two HTML responses is a
    # "302 Found" redirect stub, set aside as http_status (it was a document before HTTP statuses were read).
    docs, drops, skips = collect(data_dir / "readers" / "example-bad.warc.gz.bad", "warc")
    assert [reason for _, reason in drops] == ["http_status"] and len(docs) == 1
    assert drops[0][0]["text"].startswith("HTTP status 302 Found\n\n")
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
    (tmp_path / "a.jsonl.bz2").write_bytes(bz2.compress(payload))
    (tmp_path / "a.jsonl.xz").write_bytes(lzma.compress(payload))
    for name in ("a.jsonl.gz", "a.jsonl.zst", "a.jsonl.bz2", "a.jsonl.xz"):
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


@pytest.mark.parametrize("ext", ["bz2", "xz"])
def test_truncated_and_corrupt_bz2_xz_keep_what_decodes(tmp_path, ext):
    compress = COMPRESS[ext]
    parts = [("".join(json.dumps({"id": f"s{k}-{i}", "text": f"stream {k} line {i} " * 8}) + "\n" for i in range(300))).encode()
             for k in range(3)]
    streams = [compress(b) for b in parts]
    # the file ends inside the last stream: the first two streams' lines and the complete ones before the cut
    cut = b"".join(streams)[: len(streams[0]) + len(streams[1]) + len(streams[2]) // 2]
    (tmp_path / f"t.jsonl.{ext}").write_bytes(cut)
    docs, drops, _ = collect(tmp_path / f"t.jsonl.{ext}", "jsonl")
    assert 600 <= len(docs) < 900 and [r for _, r in drops] == [f"truncated_{ext}"]
    # a damaged middle stream: the streams on either side are read whole
    mid = streams[1][:40] + bytes(b ^ 0x5A for b in streams[1][40:80]) + streams[1][80:]
    (tmp_path / f"c.jsonl.{ext}").write_bytes(streams[0] + mid + streams[2])
    docs, drops, _ = collect(tmp_path / f"c.jsonl.{ext}", "jsonl")
    ids = {d["id"] for d in docs}
    assert {f"s0-{i}" for i in range(300)} | {f"s2-{i}" for i in range(300)} <= ids
    assert [r for _, r in drops] == [f"corrupt_{ext}"]


def test_parquet_and_arrow_tables(tmp_path):
    table = pa.table({"id": ["x", None], "text": ["hello world", "second doc"], "url": ["http://a", None]})
    pq.write_table(table, tmp_path / "t.parquet")
    docs, drops, _ = collect(tmp_path / "t.parquet", "parquet")
    assert [d["id"] for d in docs] == ["x", "t.parquet:2"] and docs[0]["url"] == "http://a"
    import pyarrow.feather as feather
    feather.write_feather(table.drop_columns(["text"]), tmp_path / "bad.arrow")
    docs, drops, _ = collect(tmp_path / "bad.arrow", "arrow")
    assert not docs and drops[0][1] == "missing_text"


def test_jsonl_integers_longer_than_python_converts_do_not_set_the_line_aside(tmp_path):
    """Valid JSON with a number of over 4,300 digits (Python's int conversion limit raises ValueError): the line
    was set aside as malformed_record, text and all; the number is now kept as its digits."""
    p = tmp_path / "big.jsonl"
    p.write_text(json.dumps({"id": "a", "text": "kept text"})[:-1] + ', "n": ' + "7" * 5000 + "}\n"
                 + '{"id": ' + "1" * 5000 + ', "text": "id of digits"}\n'
                 + '{"id": "b", "text": "broken", "n": 12' + "\n")
    docs, drops, _ = collect(p, "jsonl")
    from curate.readers.text import MAX_ID_CHARS, bounded_field

    # (an id over MAX_ID_CHARS is kept shortened: tests/test_reader_long_ids.py)
    assert [(d["id"], d["text"]) for d in docs] == [("a", "kept text"),
                                                   (bounded_field("1" * 5000, MAX_ID_CHARS), "id of digits")]
    assert [(r["id"], reason) for r, reason in drops] == [("big.jsonl:3", "malformed_record")]


_READ_IN_A_CHILD = """
import json, sys
from curate.readers import read_file
out = [[it[0], it[1]["id"], it[2] if it[0] == "drop" else it[1]["text"]] for it in read_file(sys.argv[1], "arrow")
       if it[0] in ("doc", "drop")]
print(json.dumps(out))
"""


def test_arrow_batches_whose_offsets_point_outside_their_data_are_set_aside(tmp_path):
    """Arrow IPC readers map a file's buffers unchecked: offsets past the data (a damaged or crafted file) took
    pyarrow outside its memory, a segmentation fault that ended the run without a word. Such a batch is now
    one ``corrupt_batch`` row (an id column that does not hold together is left unread); the batches around it
    are read. Read in a child, so a crash fails the test only."""
    import subprocess
    import sys

    import numpy as np

    def bad(type_, width, data):  # two values, the first offset far past the data (the last one in bounds)
        offsets = pa.py_buffer(np.array([0, 900_000_000, len(data)], dtype=width).tobytes())
        return pa.Array.from_buffers(type_, 2, [None, offsets, pa.py_buffer(data)])

    good = pa.record_batch({"id": pa.array(["a", "b"]), "text": pa.array(["one", "two"])})
    batches = [good,
               pa.record_batch({"id": pa.array(["c", "d"]), "text": bad(pa.string(), np.int32, b"onetwo")}),
               pa.record_batch({"id": bad(pa.string(), np.int32, b"cd"), "text": pa.array(["one", "two"])}),
               good]
    path = tmp_path / "damaged.arrow"
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_file(f, good.schema) as w:
        for b in batches:
            w.write_batch(b)
    large = tmp_path / "damaged_large.arrow"
    lb = pa.record_batch({"text": bad(pa.large_binary(), np.int64, b"onetwo")})
    with pa.OSFile(str(large), "wb") as f, pa.ipc.new_file(f, lb.schema) as w:
        w.write_batch(lb)
    got = {}
    for p in (path, large):
        r = subprocess.run([sys.executable, "-c", _READ_IN_A_CHILD, str(p)], capture_output=True, text=True)
        assert r.returncode == 0, (p.name, r.returncode, r.stderr[-500:])
        got[p.name] = json.loads(r.stdout)
    # damaged texts: the batch is set aside; a damaged id column is not read (the rows' own ids by position)
    assert got["damaged.arrow"] == [["doc", "a", "one"], ["doc", "b", "two"],
                                    ["drop", "damaged.arrow:batch1", "corrupt_batch"],
                                    ["doc", "damaged.arrow:5", "one"], ["doc", "damaged.arrow:6", "two"],
                                    ["doc", "a", "one"], ["doc", "b", "two"]]
    assert got["damaged_large.arrow"] == [["drop", "damaged_large.arrow:batch0", "corrupt_batch"]]


def test_id_and_url_columns_python_cannot_hold_keep_their_rows(tmp_path):
    """A timestamp or date64 id past Python's datetime range made ``to_pylist`` raise OverflowError: the whole
    file became one ``reader_error`` row, its texts lost. Such values now become text (Arrow's own rendering)
    and the rows are read."""
    import pyarrow.feather as feather

    ids = pa.array([0, 2 ** 62, -2 ** 62], pa.timestamp("s"))
    table = pa.table({"id": ids, "url": ids, "text": ["alpha text", "beta text", "gamma text"]})
    feather.write_feather(table, tmp_path / "t.arrow")
    pq.write_table(pa.table({"id": pa.array([0, 2 ** 62, -2 ** 62], pa.date64()), "text": table["text"]}),
                   tmp_path / "d.parquet")
    for name, fmt in (("t.arrow", "arrow"), ("d.parquet", "parquet")):
        docs, drops, _ = collect(tmp_path / name, fmt)
        assert not drops and [d["text"] for d in docs] == ["alpha text", "beta text", "gamma text"], name
        assert docs[0]["id"].startswith("1970-01-01") and len({d["id"] for d in docs}) == 3, name


def test_binary_junk_file_is_set_aside(tmp_path):
    p = tmp_path / "junk.warc"
    p.write_bytes(bytes(range(256)) * 100)
    docs, drops, _ = collect(p, "warc")
    assert not docs and drops and drops[0][1] == "malformed_record"


# --- splits: every record lands once, with the same id, whatever the split size --------------------

import random  # noqa: E402

import pyarrow.feather as feather  # noqa: E402

from curate.readers import plan_splits, read_split  # noqa: E402


def _items(items):
    """Comparable items: counts summed (a split-wise read reports them per split)."""
    out, counts = [], {}
    for it in items:
        if it[0] == "count":
            counts[it[1]] = counts.get(it[1], 0) + it[2]
        else:
            out.append(it)
    return out, counts


def _split_read(path, fmt, target):
    splits = plan_splits(str(path), fmt, target_bytes=target)
    json.dumps(splits)  # splits travel to tasks: JSON-serialisable
    return splits, _items(it for s in splits for it in read_split(s))


def _jsonl_lines(n=60, seed=0):
    rnd = random.Random(seed)
    lines = []
    for i in range(n):
        rec = {"text": f"doc {i} " + "w" * rnd.randint(0, 90)}
        if i % 3:
            rec["id"] = f"r{i}"
        lines.append(json.dumps(rec).encode())
        if i % 17 == 5:
            lines.append(b"")  # blank lines are not records but count as lines
        if i % 23 == 7:
            lines.append(b"{not json")
    return lines


def _assert_split_invariant(path, fmt, targets, min_splits=2):
    whole = _items(read_file(str(path), fmt))
    assert whole[0], "nothing read"
    ids = [it[1]["id"] for it in whole[0] if it[0] != "skip"]
    assert len(ids) == len(set(ids))
    most = 1
    for target in targets:
        splits, got = _split_read(path, fmt, target)
        most = max(most, len(splits))
        assert got == whole, f"{path.name}: {len(splits)} splits of {target} bytes differ from the whole read"
    assert most >= min_splits, f"{path.name}: never split"
    return whole


def test_plain_jsonl_splits_at_line_boundaries(tmp_path):
    p = tmp_path / "plain.jsonl"
    p.write_bytes(b"\r\n".join(_jsonl_lines()) + b"\n")  # CRLF line ends too
    size = p.stat().st_size
    whole = _assert_split_invariant(p, "jsonl", [1, 13, 97, 1000, size], min_splits=60)
    docs = [it[1] for it in whole[0] if it[0] == "doc"]
    assert docs[0]["id"] == "plain.jsonl:1" and docs[1]["id"] == "r1"
    # a cut inside a record: the record goes whole to the split where it starts
    cut = p.read_bytes().index(b"doc 10 ") + 3
    splits = plan_splits(str(p), "jsonl", target_bytes=cut)
    first = [it[1]["id"] for it in read_split(splits[0]) if it[0] == "doc"]
    second = [it[1]["id"] for it in read_split(splits[1]) if it[0] == "doc"]
    assert first[-1] == "r10" and second[0] == "r11"
    # splits cut anywhere (not at a line start) still give each line once, with the same ids
    raw = p.read_bytes()
    cuts = [0, cut, cut + 1, len(raw) // 2, len(raw) - 3]
    hand = [{"path": str(p), "format": "jsonl", "start": a, "stop": b, "newlines": raw[:max(a - 1, 0)].count(b"\n")}
            for a, b in zip(cuts, cuts[1:] + [None])]
    assert _items(it for s in hand for it in read_split(s)) == whole


def _members(blob: bytes, sizes, compress) -> bytes:
    """Cut ``blob`` into members of the given sizes (mid-line, as bgzip and pzstd do)."""
    out, pos, k = [], 0, 0
    while pos < len(blob):
        n = sizes[k % len(sizes)]
        out.append(compress(blob[pos:pos + n]))
        pos, k = pos + n, k + 1
    return b"".join(out)


@pytest.mark.parametrize("ext", ["gz", "zst", "bz2", "xz"])
def test_compressed_jsonl_splits_by_member_even_when_members_cut_lines(tmp_path, ext):
    payload = b"\n".join(_jsonl_lines(200)) + b"\n"
    compress = COMPRESS[ext]
    p = tmp_path / f"multi.jsonl.{ext}"
    p.write_bytes(_members(payload, [700, 1, 333, 2048, 95], compress))
    whole = _assert_split_invariant(p, "jsonl", [1, 50, 600, 5000, 1 << 30], min_splits=20)
    # unsplit, the same documents as one member holds
    single = tmp_path / f"single.jsonl.{ext}"
    single.write_bytes(compress(payload))
    texts = [it[1]["text"] for it in whole[0] if it[0] == "doc"]
    assert texts == [it[1]["text"] for it in read_file(str(single), "jsonl") if it[0] == "doc"]


@pytest.mark.parametrize("ext", ["gz", "zst", "bz2", "xz"])
def test_single_stream_jsonl_splits_by_decompressed_ranges(tmp_path, ext):
    payload = b"\n".join(_jsonl_lines(400)) + b"\n"
    compress = COMPRESS[ext]
    p = tmp_path / f"one.jsonl.{ext}"
    p.write_bytes(compress(payload))
    splits = plan_splits(str(p), "jsonl", target_bytes=512)
    assert len(splits) > 1 and all("dstart" in s for s in splits)
    whole = _assert_split_invariant(p, "jsonl", [512, 2000])
    # ids of a single-member file are plain line numbers
    assert any(it[1]["id"] == f"one.jsonl.{ext}:1" for it in whole[0])


def _warc_bytes(n, gz, seed=1):
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    rnd = random.Random(seed)
    buf = io.BytesIO()
    w = WARCWriter(buf, gzip=gz)
    for i in range(n):
        body = (f"<html><body><p>page {i} " + "text " * rnd.randint(1, 300) + "</p></body></html>").encode()
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(f"http://example.com/{i}", "response", payload=io.BytesIO(body),
                                            http_headers=http))
        if i % 4 == 1:
            w.write_record(w.create_warc_record(f"http://example.com/{i}", "request", payload=io.BytesIO(b"GET / HTTP/1.1\r\n\r\n")))
    return buf.getvalue()


@pytest.mark.parametrize("gz", [True, False])
def test_warc_splits_by_record(tmp_path, gz):
    p = tmp_path / ("c.warc.gz" if gz else "c.warc")
    p.write_bytes(_warc_bytes(40, gz))
    whole = _assert_split_invariant(p, "warc", [1, 700, 4000, 1 << 30], min_splits=40)
    assert sum(it[0] == "doc" for it in whole[0]) == 40
    assert sum(it[0] == "skip" for it in whole[0]) == 10


def test_warc_zst_one_frame_per_record_splits(tmp_path, sample_dir):
    from warcio.archiveiterator import ArchiveIterator

    c = zstandard.ZstdCompressor()
    frames = []
    with open(sample_dir / "web-pages-87.warc.gz", "rb") as f:
        for rec in ArchiveIterator(f):
            buf = io.BytesIO()
            from warcio.warcwriter import WARCWriter

            WARCWriter(buf, gzip=False).write_record(rec)
            frames.append(c.compress(buf.getvalue()))
    p = tmp_path / "pages.warc.zst"
    p.write_bytes(b"".join(frames))
    whole = _assert_split_invariant(p, "warc", [1, 50_000], min_splits=80)
    assert sum(it[0] == "doc" for it in whole[0]) == 87


def test_real_warc_splits(sample_dir):
    _assert_split_invariant(sample_dir / "web-pages-87.warc.gz", "warc", [1, 100_000], min_splits=80)


def test_parquet_splits_by_row_group_and_arrow_by_batch(tmp_path):
    n = 100
    table = pa.table({"id": [None if i % 4 == 0 else f"p{i}" for i in range(n)],
                      "text": [f"text of row {i} " * (i % 7 + 1) for i in range(n)]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=9)
    whole = _assert_split_invariant(tmp_path / "t.parquet", "parquet", [1, 800, 1 << 30], min_splits=12)
    assert [it[1]["id"] for it in whole[0]][:2] == ["t.parquet:1", "p1"]
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as sink:
        with pa.ipc.new_file(sink, table.schema) as w:
            for batch in table.to_batches(max_chunksize=11):
                w.write_batch(batch)
    whole = _assert_split_invariant(tmp_path / "t.arrow", "arrow", [1, 1500, 1 << 30], min_splits=10)
    assert len(whole[0]) == n and [it[1]["id"] for it in whole[0]][4] == "t.arrow:5"


def test_an_arrow_split_walks_only_its_own_batches(tmp_path, monkeypatch):
    """The plan counts the rows before each split, so reading the last split reads the headers of its own
    batches only (walking every batch of the file for every split made a file of many batches quadratic)."""
    from curate.readers import tables

    table = pa.table({"text": [f"text of row {i}" for i in range(200)]})
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as sink:
        with pa.ipc.new_file(sink, table.schema) as w:
            for batch in table.to_batches(max_chunksize=2):
                w.write_batch(batch)
    splits = plan_splits(str(tmp_path / "t.arrow"), "arrow", target_bytes=1000)
    last = splits[-1]
    assert len(splits) > 3 and last["rows_before"] == 2 * last["first"]
    walked = []
    real = tables._batch_sizes
    monkeypatch.setattr(tables, "_batch_sizes", lambda m: walked.append(1) or real(m))
    items = list(read_split(last))
    assert len(walked) == 100 - last["first"]
    assert [it[1]["id"] for it in items][0] == f"t.arrow:{last['rows_before'] + 1}"
    assert [it[1]["text"] for it in items] == [f"text of row {i}" for i in range(last["rows_before"], 200)]


def test_zstd_skippable_frames_are_skipped(tmp_path):
    # pzstd writes a skippable frame (its index) before every frame
    import struct

    payload = b"\n".join(_jsonl_lines(150)) + b"\n"
    c = zstandard.ZstdCompressor()
    skip = struct.pack("<II", 0x184D2A50, 4) + b"\x00\x01\x02\x03"
    pieces = [payload[i:i + 900] for i in range(0, len(payload), 900)]
    p = tmp_path / "pz.jsonl.zst"
    p.write_bytes(b"".join(skip + c.compress(piece) for piece in pieces))
    whole = _assert_split_invariant(p, "jsonl", [1, 400, 1 << 30], min_splits=len(pieces))
    plain = tmp_path / "pz.jsonl"
    plain.write_bytes(payload)
    assert [it[1]["text"] for it in whole[0]] == [it[1]["text"] for it in read_file(str(plain), "jsonl")]


def test_a_reader_bug_sets_the_rest_of_the_split_aside(tmp_path, monkeypatch):
    from curate.readers import jsonl

    p = tmp_path / "a.jsonl"
    p.write_text('{"text": "one"}\n{"text": "two"}\n')

    def broken(*args, **kwargs):
        yield ("doc", {"id": "x", "text": "one", "source": str(p), "url": "", "content_type": "text/plain"})
        raise KeyError("a bug")

    monkeypatch.setattr(jsonl, "read", broken)
    items = list(read_file(str(p), "jsonl"))
    assert [it[0] for it in items] == ["doc", "drop"] and items[1][2] == "reader_error"
    assert "KeyError" in items[1][1]["text"]


@pytest.mark.parametrize("target", [300, 2000, 12000])
def test_single_stream_gzip_with_an_index_reads_only_its_range(tmp_path, target):
    payload = b"\n".join(_jsonl_lines(600)) + b"\n"
    p = tmp_path / "one.jsonl.gz"
    p.write_bytes(gzip.compress(payload))
    index = tmp_path / "plans" / "one.gzidx"
    splits = plan_splits(str(p), "jsonl", target_bytes=target, index_path=str(index))
    json.dumps(splits)
    assert len(splits) >= len(payload) // target // 2 and all(s.get("index") == str(index) for s in splits)
    assert index.exists() and not list(index.parent.glob(".*.tmp"))
    whole = _items(read_file(str(p), "jsonl"))
    # cut at line starts: a record on each side of every cut, each read once, with the ids of the whole read
    starts = [s["dstart"] for s in splits]
    assert all(payload[a - 1:a] == b"\n" for a in starts[1:])
    assert all(s["newlines"] == payload[:s["dstart"]].count(b"\n") for s in splits)
    per_split = [_items(read_split(s))[0] for s in splits]
    assert all(per_split[k] for k in range(len(splits)))
    assert _items(it for part in per_split for it in part) == whole
    # the index gone (removed with the run's plans): the same records, read from the start of the file
    index.unlink()
    assert _items(it for s in splits for it in read_split(s)) == whole


def test_a_gzip_that_is_not_one_intact_member_gets_no_index(tmp_path):
    payload = b"\n".join(_jsonl_lines(300)) + b"\n"
    blob = gzip.compress(payload)
    cases = {"trunc.jsonl.gz": blob[: len(blob) // 2], "trail.jsonl.gz": blob + b"junk after the member",
             "two.jsonl.gz": gzip.compress(payload[:100]) + gzip.compress(payload[100:]),
             "bad.jsonl.gz": blob[:200] + bytes(40) + blob[240:]}
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        index = tmp_path / f"{name}.gzidx"
        splits = plan_splits(str(p), "jsonl", target_bytes=500, index_path=str(index))
        assert not index.exists() and not any("index" in s for s in splits), name
        assert _items(it for s in splits for it in read_split(s)) == _items(read_file(str(p), "jsonl")), name


def test_the_read_step_splits_a_one_stream_gzip_through_its_index_and_removes_it(tmp_path, sample_dir):
    """A run over one ``gzip file.jsonl``: several read tasks, the documents and ids of an unsplit run, and
    the seek index gone once the read step is done (kept with ``keep_plans``)."""
    from curate.executors.local import LocalExecutor
    from curate.pipeline import load_pipeline
    from curate.runner import run_pipeline
    from curate.shards import read_shard

    def run(name, extra):
        out = tmp_path / name
        toml = tmp_path / f"{name}.toml"
        toml.write_text(f'[pipeline]\nname = "t"\noutput = "{out}"\nshard_rows = 100\n{extra}\n'
                        f'[[sources]]\npath = "{sample_dir / "prose.jsonl.gz"}"\n[[stages]]\ntype = "normalize"\n')
        run_pipeline(load_pipeline(toml), LocalExecutor(2), progress=False)
        manifest = json.loads((out / "manifest.json").read_text())
        ids = [i for e in manifest["shards"] for i in read_shard(out / e["path"]).column("id").to_pylist()]
        return out, ids, json.loads((out / "steps/00_read/_splits.json").read_text())

    _, whole, _ = run("whole", "split_bytes = 1073741824")
    out, split, plan = run("split", "split_bytes = 1000000")
    (splits,) = [v["splits"] for v in plan.values()]
    assert len(splits) >= 4 and all(s.get("index") for s in splits)
    assert sorted(split) == sorted(whole) and len(set(whole)) == len(whole) == 426
    assert not (out / "plans").exists()
    kept, ids, _ = run("kept", "split_bytes = 1000000\nkeep_plans = true")
    assert sorted(ids) == sorted(whole) and list((kept / "plans/00_read").glob("*.gzidx"))


def test_plain_latin1_jsonl_named_gz_is_read_as_lines(tmp_path):
    p = tmp_path / "latin.jsonl.gz"
    p.write_bytes(b'{"text": "caf\xe9"}\n{"text": "fine"}\n')
    docs, drops, _ = collect(p, "jsonl")
    assert [d["text"] for d in docs] == ["fine"] and [r for _, r in drops] == ["invalid_utf8"]

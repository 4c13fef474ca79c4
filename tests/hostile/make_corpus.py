"""Build a corpus of hostile input files, and say what a reader must make of each.

Every file is made here (nothing large is committed): lone surrogate escapes, bogus charsets (``punycode``,
``idna``, ``base64``), WARC.gz files cut or corrupted inside a record, lying Content-Lengths, truncated
.jsonl.zst/.jsonl.gz, a gzip WARC in one member, stray NUL bytes, empty files, giant lines, invalid JSON,
non-object JSON, wrong field types, BOMs, CRLF, mixed encodings, ARC (and ARC records whose length lies, runs
short, is not a number or is absurd, cut or corrupted .arc.gz), Parquet with missing or odd columns or a broken
footer, a truncated Arrow file, zip bombs in ``Content-Encoding``, text columns of every string-like Arrow type
(``string_view`` as Polars writes, ``binary_view``, dictionaries of them), dictionary-encoded repeated texts.

``build(root)`` writes the files under ``root/<format>/`` and returns, per file (path relative to root):
``{"format", "docs", "drops": {reason: n}, "skips", "counts": {key: n}}``: what was planted. The corpus is
also written as ``root/expected.json``.

    python tests/hostile/make_corpus.py /tmp/hostile      # then: curate run over /tmp/hostile/<format>/*
"""
from __future__ import annotations

import argparse
import gzip
import io
import json
import random
import shutil
import uuid
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data" / "readers"


def _expect(fmt, docs=0, drops=None, skips=0, counts=None):
    return {"format": fmt, "docs": docs, "drops": drops or {}, "skips": skips, "counts": counts or {}}


# --- WARC helpers -------------------------------------------------------------------------------

def _page(i: int, words: int = 40, meta: str = "") -> bytes:
    return (f"<html><head>{meta}<title>page {i}</title></head><body><p>page {i}: "
            + "hostile crawl text " * words + "</p></body></html>").encode()


def _http(body: bytes, ctype: str = "text/html; charset=utf-8", extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\n{extra}Content-Length: {len(body)}\r\n\r\n".encode() + body


def _record(block: bytes, rtype: str = "response", i: int = 0, length: int | None = None, with_length: bool = True) -> bytes:
    rid = uuid.UUID(int=random.Random(i * 7919 + len(block)).getrandbits(128))
    head = (f"WARC/1.0\r\nWARC-Type: {rtype}\r\nWARC-Record-ID: <urn:uuid:{rid}>\r\n"
            f"WARC-Target-URI: http://hostile.example/{i}\r\nWARC-Date: 2024-01-01T00:00:00Z\r\n"
            "Content-Type: application/http; msgtype=response\r\n")
    if with_length:
        head += f"Content-Length: {len(block) if length is None else length}\r\n"
    return head.encode() + b"\r\n" + block + b"\r\n\r\n"


def _responses(n: int, start: int = 0) -> list[bytes]:
    return [_record(_http(_page(i)), i=i) for i in range(start, start + n)]


def _gz_members(records: list[bytes]) -> tuple[bytes, list[int]]:
    """Records as one gzip member each (as crawlers write WARC.gz); also each member's offset."""
    out, offsets = bytearray(), []
    for r in records:
        offsets.append(len(out))
        out += gzip.compress(r, mtime=0)
    return bytes(out), offsets


def _corrupt_middle(blob: bytes, start: int, end: int) -> bytes:
    """Overwrite bytes in the middle of the deflate data of the member at blob[start:end]."""
    mid = start + (end - start) // 2
    return blob[:mid] + bytes(b ^ 0x5A for b in blob[mid:mid + 24]) + blob[mid + 24:]


def build_warc(d: Path) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    e = {}
    # charsets: HTTP or meta names that are not web text encodings must not crash or swallow the file
    recs = [
        _record(_http(_page(0), "text/html; charset=punycode"), i=0),
        _record(_http(_page(1, meta='<meta charset="punycode">'), "text/html"), i=1),
        _record(_http(_page(2, meta='<meta charset="idna">'), "text/html"), i=2),
        _record(_http(_page(3), "text/html; charset=base64"), i=3),
        _record(_http(_page(4, meta='<meta http-equiv="Content-Type" content="text/html; charset=unicode_escape">'), "text/html"), i=4),
        _record(_http("<html><body><p>Привет, мир! Это страница в кодировке windows-1251.</p></body></html>".encode("cp1251"),
                      "text/html; charset=windows-1251"), i=5),
        _record(_http(_page(6), "text/html; charset=rot13"), i=6),
    ]
    (d / "charsets.warc.gz").write_bytes(_gz_members(recs)[0])
    e["charsets.warc.gz"] = _expect("warc", docs=7)

    # a WARC.gz cut inside its 4th record
    blob, offs = _gz_members(_responses(5))
    (d / "cut.warc.gz").write_bytes(blob[: offs[3] + (offs[4] - offs[3]) // 2])
    e["cut.warc.gz"] = _expect("warc", docs=3, drops={"truncated_gzip": 1})

    # a member corrupted in its middle: the records after it are read
    blob, offs = _gz_members(_responses(6))
    (d / "corrupt-member.warc.gz").write_bytes(_corrupt_middle(blob, offs[2], offs[3]))
    e["corrupt-member.warc.gz"] = _expect("warc", docs=5, drops={"corrupt_gzip": 1})

    # Content-Length too large (runs into the next header), too small, absurdly large
    recs = _responses(4)
    block = _http(_page(1))
    recs[1] = _record(block, i=1, length=len(block) + 500)
    (d / "long-length.warc").write_bytes(b"".join(recs))
    e["long-length.warc"] = _expect("warc", docs=3, drops={"bad_content_length": 1})
    for extra in (6, 9):  # a few bytes too long: the claimed end falls inside the next record's "WARC/1.0"
        recs[1] = _record(block, i=1, length=len(block) + extra)
        (d / f"long-by-{extra}.warc").write_bytes(b"".join(recs))
        e[f"long-by-{extra}.warc"] = _expect("warc", docs=3, drops={"bad_content_length": 1})
    recs[1] = _record(block, i=1, length=len(block) - 40)
    (d / "short-length.warc").write_bytes(b"".join(recs))
    e["short-length.warc"] = _expect("warc", docs=3, drops={"bad_content_length": 1})
    recs[1] = _record(block, i=1, length=10 ** 12)
    (d / "huge-length.warc").write_bytes(b"".join(recs))
    e["huge-length.warc"] = _expect("warc", docs=3, drops={"bad_content_length": 1})
    recs[1] = _record(block, i=1, length=len(block) + 500)
    (d / "long-length.warc.gz").write_bytes(_gz_members(recs)[0])
    e["long-length.warc.gz"] = _expect("warc", docs=3, drops={"bad_content_length": 1})

    # junk between records; a record without Content-Length; zero-length records; binary junk
    recs = _responses(3)
    (d / "junk-between.warc").write_bytes(recs[0] + b"this is not a record\r\n\r\n" + recs[1] + recs[2])
    e["junk-between.warc"] = _expect("warc", docs=3, drops={"malformed_record": 1})
    (d / "no-length.warc").write_bytes(recs[0] + _record(_http(_page(9)), i=9, with_length=False) + recs[1])
    e["no-length.warc"] = _expect("warc", docs=2, drops={"malformed_record": 1})
    (d / "zero-length.warc").write_bytes(_record(b"", i=1) + _record(b"", "resource", i=2) + recs[2])
    e["zero-length.warc"] = _expect("warc", docs=1, drops={"empty_document": 1}, skips=1)
    (d / "binary.warc").write_bytes(random.Random(5).randbytes(20000).replace(b"WARC/", b"XXXX/"))
    (d / "random.warc.gz").write_bytes(random.Random(6).randbytes(20000))  # not gzip at all: set aside whole
    e["random.warc.gz"] = _expect("warc", drops={"wrong_compression": 1})
    e["binary.warc"] = _expect("warc", drops={"malformed_record": 1})
    (d / "empty.warc").write_bytes(b"")
    e["empty.warc"] = _expect("warc")
    (d / "empty.warc.gz").write_bytes(b"")
    e["empty.warc.gz"] = _expect("warc")
    (d / "not-warc.warc.gz").write_bytes(gzip.compress(b"just some text, gzipped, that is no WARC at all\n" * 50))
    e["not-warc.warc.gz"] = _expect("warc", drops={"malformed_record": 1})

    # one gzip member for the whole WARC (not one per record): read whole, counted
    shutil.copy(DATA / "example-bad.warc.gz.bad", d / "one-member.warc.gz.bad")
    # (one of its two HTML responses is a "302 Found" redirect stub: http_status)
    e["one-member.warc.gz.bad"] = _expect("warc", docs=1, drops={"http_status": 1}, skips=4,
                                          counts={"warc_single_gzip_members": 1})

    # a stray NUL is text; a page of NULs is binary; a gzip bomb in Content-Encoding is too large
    nul_page = _page(1, 200).replace(b"page 1:", b"page\x001:")
    bomb = gzip.compress(b"a" * (40 << 20))
    recs = [
        _record(_http(nul_page), i=1),
        _record(_http(b"\x00" * 5000 + b"<p>x</p>"), i=2),
        _record(_http(bomb, extra="Content-Encoding: gzip\r\n"), i=3),
        _record(_http(gzip.compress(_page(4)), extra="Content-Encoding: gzip\r\n"), i=4),
        _record(_http(b"\x89PNG\r\n\x1a\n" + bytes(200), "image/png"), i=5),
    ]
    (d / "payloads.warc.gz").write_bytes(_gz_members(recs)[0])
    e["payloads.warc.gz"] = _expect("warc", docs=2, drops={"binary_content": 1, "too_large": 1}, skips=1)

    # LF-only line ends (some old writers); a header block larger than any real one; a page whose declared
    # charset is wrong (latin-1 bytes labelled utf-8); a member whose gzip header is smashed
    lf = [_record(_http(_page(i)).replace(b"\r\n", b"\n"), i=i).replace(b"\r\n", b"\n") for i in (1, 2)]
    (d / "lf-only.warc").write_bytes(b"".join(lf))
    e["lf-only.warc"] = _expect("warc", docs=2)
    giant = b"WARC/1.0\r\nWARC-Type: response\r\nX-Junk: " + b"j" * (100 << 10) + b"\r\n\r\n"
    recs = _responses(2)
    (d / "giant-header.warc").write_bytes(recs[0] + giant + recs[1])
    e["giant-header.warc"] = _expect("warc", docs=2, drops={"malformed_record": 1})
    french = "Le café de la gare sert une crème brûlée très appréciée. Les élèves, naïfs, déjeunent à la façade. "
    latin = f"<html><body><p>{french * 6}</p></body></html>".encode("latin-1")
    blob, offs = _gz_members([_record(_http(latin, "text/html; charset=utf-8"), i=1)] + _responses(2, 5))
    (d / "wrong-charset.warc.gz").write_bytes(blob)
    e["wrong-charset.warc.gz"] = _expect("warc", docs=3)
    smashed = blob[: offs[1]] + b"\x1f\x8b\x08\xff\xff" + blob[offs[1] + 5:]
    (d / "smashed-header.warc.gz").write_bytes(smashed)
    e["smashed-header.warc.gz"] = _expect("warc", docs=2, drops={"corrupt_gzip": 1})

    shutil.copy(DATA / "example.arc", d / "example.arc")
    e["example.arc"] = _expect("warc", docs=1, skips=1)
    return e


# --- ARC ----------------------------------------------------------------------------------------

def _arc_record(url: str, body: bytes, length=None, mime: str = "text/html") -> bytes:
    return f"{url} 10.0.0.1 20240101000000 {mime} {len(body) if length is None else length}\n".encode() + body + b"\n"


def build_arc(d: Path) -> dict:
    """ARC files whose records lie about their length: each must cost only its own record."""
    d.mkdir(parents=True, exist_ok=True)
    e = {}
    desc = _arc_record("filedesc://hostile.arc", b"1 0 Hostile\nURL IP-address Archive-date Content-type Archive-length\n",
                       mime="text/plain")
    bodies = [_http(_page(i)) for i in range(5)]
    recs = [_arc_record(f"http://arc.example/{i}", b) for i, b in enumerate(bodies)]

    def variant(length) -> list[bytes]:
        r = list(recs)
        r[1] = _arc_record("http://arc.example/1", bodies[1], length)
        return r

    (d / "ok.arc").write_bytes(desc + b"".join(recs))
    e["ok.arc"] = _expect("warc", docs=5, skips=1)
    for name, length in (("long-length.arc", len(bodies[1]) + 3000), ("short-length.arc", len(bodies[1]) - 60),
                         ("huge-length.arc", 10 ** 12)):
        (d / name).write_bytes(desc + b"".join(variant(length)))
        e[name] = _expect("warc", docs=4, drops={"bad_content_length": 1}, skips=1)
    (d / "non-numeric-length.arc").write_bytes(desc + b"".join(variant("12x")))
    e["non-numeric-length.arc"] = _expect("warc", docs=4, drops={"malformed_record": 1}, skips=1)
    (d / "negative-length.arc").write_bytes(desc + b"".join(variant("-1")))
    e["negative-length.arc"] = _expect("warc", docs=4, drops={"malformed_record": 1}, skips=1)
    members = [gzip.compress(r) for r in [desc] + variant(len(bodies[1]) + 3000)]
    (d / "long-length.arc.gz").write_bytes(b"".join(members))
    e["long-length.arc.gz"] = _expect("warc", docs=4, drops={"bad_content_length": 1}, skips=1)
    members = [gzip.compress(r) for r in [desc] + recs]
    (d / "cut.arc.gz").write_bytes(b"".join(members)[:-40])
    e["cut.arc.gz"] = _expect("warc", docs=4, drops={"truncated_gzip": 1}, skips=1)
    (d / "cut.arc").write_bytes((desc + b"".join(recs))[:-300])
    e["cut.arc"] = _expect("warc", docs=4, drops={"truncated_record": 1}, skips=1)
    (d / "blank-lines.arc").write_bytes(desc + recs[0] + b"\n" * (3 << 20) + b"".join(recs[1:]))  # 3 MB of blank lines
    e["blank-lines.arc"] = _expect("warc", docs=5, skips=1)
    start = sum(len(m) for m in members[:3])
    (d / "corrupt-member.arc.gz").write_bytes(_corrupt_middle(b"".join(members), start, start + len(members[3])))
    e["corrupt-member.arc.gz"] = _expect("warc", docs=4, drops={"corrupt_gzip": 1}, skips=1)
    return e


# --- JSONL --------------------------------------------------------------------------------------

def _lines(n: int, prefix: str) -> bytes:
    return "".join(json.dumps({"id": f"{prefix}{i}", "text": f"line {i} " + "words " * (i % 50 + 5)}) + "\n"
                   for i in range(n)).encode()


def build_jsonl(d: Path) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    e = {}
    rows = [{"id": "s1", "text": "lone \ud800 high"},
            {"id": "s2", "text": "lone \udfff low, and \ud83d\ude00 a real pair"},
            {"id": "s3\ud800", "text": "an id with a surrogate", "url": "http://x/\udc00"}]
    (d / "surrogates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="ascii")
    e["surrogates.jsonl"] = _expect("jsonl", docs=3, counts={"surrogates_replaced": 4})

    rows = [{"id": "n1", "text": "a long text " * 100 + "\x00 and more"},
            {"id": "n2", "text": "\x00\x01\x02\x03" * 50 + "abc"}]
    (d / "nul.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    e["nul.jsonl"] = _expect("jsonl", docs=1, drops={"binary_content": 1})

    lines = [b"[1, 2, 3]", b"42", b'"a string"', b"null", b'{"text": 5}', b'{"text": null}', b'{"text": {"a": 1}}',
             b'{"id": {"x": 1}, "text": "a dict id"}', b'{"id": 5, "text": "an int id", "url": 7}',
             b'{"id": "", "text": "an empty id"}', b"{not json", b'{"text": "cut json', b"[" * 100000 + b"]" * 100000,
             b'\xff\xfe{"text": "x"}', b'{"text": "caf\xe9 latin-1"}', b'{"text": "   "}',
             b'{"text": "first", "text": "duplicate key"}', b'{"text": "NaN is accepted", "v": NaN}']
    (d / "types.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    e["types.jsonl"] = _expect("jsonl", docs=5, drops={"malformed_record": 7, "missing_text": 3, "invalid_utf8": 2,
                                                       "empty_document": 1})

    body = [json.dumps({"id": f"b{i}", "text": f"bom and crlf {i}"}).encode() for i in range(3)]
    (d / "bom-crlf.jsonl").write_bytes(b"\xef\xbb\xbf" + body[0] + b"\r\n" + body[1] + b"\r\n\r\n" + body[2])
    e["bom-crlf.jsonl"] = _expect("jsonl", docs=3)

    with open(d / "giant.jsonl", "wb") as f:
        f.write(b'{"id": "giant", "text": "' + b"x" * (22 << 20) + b'"}\n')
        f.write(b'{"id": "big", "text": "' + b"y" * (12 << 20) + b'"}\n')
        f.write(b'{"id": "small", "text": "fine"}\n')
    e["giant.jsonl"] = _expect("jsonl", docs=1, drops={"too_large": 2})

    (d / "empty.jsonl").write_bytes(b"")
    e["empty.jsonl"] = _expect("jsonl")
    (d / "blank.jsonl").write_bytes(b"\n\n   \n\r\n")
    e["blank.jsonl"] = _expect("jsonl")

    # truncated compressed files: what decompresses is kept, the rest is one row
    tiny = _lines(30, "t")
    blob = zstandard.ZstdCompressor().compress(tiny)
    (d / "tiny-truncated.jsonl.zst").write_bytes(blob[: len(blob) // 2])
    e["tiny-truncated.jsonl.zst"] = _expect("jsonl", docs=_complete_lines(blob[: len(blob) // 2], "zstd"),
                                            drops={"truncated_zstd": 1})
    big = _lines(6000, "z")
    blob = zstandard.ZstdCompressor(level=1).compress(big)
    cut = blob[: int(len(blob) * 0.6)]
    (d / "truncated.jsonl.zst").write_bytes(cut)
    e["truncated.jsonl.zst"] = _expect("jsonl", docs=_complete_lines(cut, "zstd"), drops={"truncated_zstd": 1})
    blob = gzip.compress(big, mtime=0)
    cut = blob[: int(len(blob) * 0.6)]
    (d / "truncated.jsonl.gz").write_bytes(cut)
    e["truncated.jsonl.gz"] = _expect("jsonl", docs=_complete_lines(cut, "gzip"), drops={"truncated_gzip": 1})

    # a corrupt member among five: the other four are read
    members = [gzip.compress(_lines(40, f"m{k}-"), mtime=0) for k in range(5)]
    offs = [sum(len(m) for m in members[:k]) for k in range(6)]
    (d / "corrupt-member.jsonl.gz").write_bytes(_corrupt_middle(b"".join(members), offs[2], offs[3]))
    e["corrupt-member.jsonl.gz"] = _expect("jsonl", docs=160, drops={"corrupt_gzip": 1})
    frames = [zstandard.ZstdCompressor(write_checksum=True).compress(_lines(40, f"f{k}-")) for k in range(3)]
    mid = len(frames[0]) + len(frames[1]) // 2
    blob = b"".join(frames)
    (d / "corrupt-frame.jsonl.zst").write_bytes(blob[:mid] + bytes(b ^ 0x5A for b in blob[mid:mid + 16]) + blob[mid + 16:])
    e["corrupt-frame.jsonl.zst"] = _expect("jsonl", docs=80, drops={"corrupt_zstd": 1})

    (d / "not-gzip.jsonl.gz").write_bytes(_lines(5, "p"))
    e["not-gzip.jsonl.gz"] = _expect("jsonl", docs=5)
    (d / "zero-padded.jsonl.gz").write_bytes(gzip.compress(_lines(5, "zp"), mtime=0) + b"\x00" * 1000)
    e["zero-padded.jsonl.gz"] = _expect("jsonl", docs=5)
    (d / "trailing-garbage.jsonl.gz").write_bytes(gzip.compress(_lines(5, "tg"), mtime=0) + b"not gzip at all")
    e["trailing-garbage.jsonl.gz"] = _expect("jsonl", docs=5, drops={"corrupt_gzip": 1})

    # bytes that do not match the name's compression: read as what they are, or set aside whole, never as lines
    (d / "random.jsonl.zst").write_bytes(random.Random(11).randbytes(30000))
    e["random.jsonl.zst"] = _expect("jsonl", drops={"wrong_compression": 1})
    (d / "random.jsonl.gz").write_bytes(random.Random(12).randbytes(3000) + b"\n" + random.Random(13).randbytes(3000))
    e["random.jsonl.gz"] = _expect("jsonl", drops={"wrong_compression": 1})
    (d / "gzip-inside.jsonl.zst").write_bytes(gzip.compress(_lines(7, "gi"), mtime=0))
    e["gzip-inside.jsonl.zst"] = _expect("jsonl", docs=7)
    (d / "zstd-inside.jsonl.gz").write_bytes(zstandard.ZstdCompressor().compress(_lines(6, "zi")))
    e["zstd-inside.jsonl.gz"] = _expect("jsonl", docs=6)
    (d / "zstd-inside.jsonl").write_bytes(zstandard.ZstdCompressor().compress(_lines(4, "zp")))
    e["zstd-inside.jsonl"] = _expect("jsonl", docs=4)
    import bz2
    import lzma

    (d / "bz2-inside.jsonl.gz").write_bytes(bz2.compress(_lines(9, "bz")))
    e["bz2-inside.jsonl.gz"] = _expect("jsonl", docs=9)
    (d / "data.jsonl.xz").write_bytes(lzma.compress(_lines(9, "xz")))
    e["data.jsonl.xz"] = _expect("jsonl", docs=9)
    blob = bz2.compress(big)
    cut = blob[: int(len(blob) * 0.6)]
    (d / "truncated.jsonl.bz2").write_bytes(cut)
    e["truncated.jsonl.bz2"] = _expect("jsonl", docs=bz2.BZ2Decompressor().decompress(cut).count(b"\n"),
                                       drops={"truncated_bz2": 1})
    (d / "header-only.jsonl.bz2").write_bytes(blob[:5])  # shorter than a whole bz2 header
    e["header-only.jsonl.bz2"] = _expect("jsonl", drops={"truncated_bz2": 1})
    (d / "xz-padded.jsonl.xz").write_bytes(lzma.compress(_lines(4, "xa")) + b"\x00" * 8 + lzma.compress(_lines(3, "xb")))
    e["xz-padded.jsonl.xz"] = _expect("jsonl", docs=7)
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("inner.jsonl", _lines(5, "zz"))
    (d / "archive.jsonl.gz").write_bytes(buf.getvalue())
    e["archive.jsonl.gz"] = _expect("jsonl", drops={"unsupported_compression": 1})
    return e


def _complete_lines(blob: bytes, kind: str) -> int:
    d = zlib.decompressobj(31) if kind == "gzip" else zstandard.ZstdDecompressor().decompressobj()
    try:
        out = d.decompress(blob)
    except (zlib.error, zstandard.ZstdError):
        out = b""
    return out.count(b"\n")


# --- HTML, Parquet, Arrow -----------------------------------------------------------------------

def build_html(d: Path) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    e = {}
    for name, meta in [("punycode", '<meta charset="punycode">'), ("idna", '<meta charset="idna">'),
                       ("zlib", '<meta charset="zlib_codec">'), ("unknown", '<meta charset="no-such-codec">')]:
        (d / f"{name}.html").write_bytes(_page(1, meta=meta))
        e[f"{name}.html"] = _expect("html", docs=1)
    (d / "nul.html").write_bytes(_page(2, 100).replace(b"page 2:", b"page\x002:"))
    e["nul.html"] = _expect("html", docs=1)
    (d / "empty.html").write_bytes(b"")
    e["empty.html"] = _expect("html", drops={"empty_document": 1})
    # UTF-16 without a byte order mark (decodes as "UTF-8" with a NUL per character: was binary_content), and
    # one with a mark whose page says another charset (the mark decides)
    (d / "utf16-no-bom.html").write_bytes(_page(7).decode().encode("utf-16-le"))
    e["utf16-no-bom.html"] = _expect("html", docs=1)
    (d / "utf16-bom-latin1-meta.html").write_bytes(_page(8, meta='<meta charset="iso-8859-1">').decode().encode("utf-16"))
    e["utf16-bom-latin1-meta.html"] = _expect("html", docs=1)
    blob = gzip.compress(_page(3, 500), mtime=0)
    (d / "truncated.html.gz").write_bytes(blob[: len(blob) // 2])
    e["truncated.html.gz"] = _expect("html", drops={"truncated_gzip": 1})
    (d / "bomb.html.gz").write_bytes(gzip.compress(b"<p>" + b"a" * (40 << 20), mtime=0))
    e["bomb.html.gz"] = _expect("html", drops={"too_large": 1})
    (d / "plain-named.html.gz").write_bytes(_page(3))  # plain HTML named .gz: read as what it is
    e["plain-named.html.gz"] = _expect("html", docs=1)
    (d / "random.html.gz").write_bytes(random.Random(7).randbytes(4000))
    e["random.html.gz"] = _expect("html", drops={"wrong_compression": 1})
    import bz2
    import lzma

    # bz2 / xz pages: damaged ones are set aside with the compression's reason, sound ones read
    for kind, pack in [("bz2", bz2.compress), ("xz", lzma.compress)]:
        blob = pack(_page(4, 500))
        (d / f"truncated.html.{kind}").write_bytes(blob[: len(blob) // 2])
        e[f"truncated.html.{kind}"] = _expect("html", drops={f"truncated_{kind}": 1})
        bad = bytearray(blob)
        bad[len(bad) // 2] ^= 0xFF
        (d / f"corrupt.html.{kind}").write_bytes(bytes(bad))
        e[f"corrupt.html.{kind}"] = _expect("html", drops={f"corrupt_{kind}": 1})
        (d / f"header-only.html.{kind}").write_bytes(blob[:6])
        e[f"header-only.html.{kind}"] = _expect("html", drops={f"truncated_{kind}": 1})
        (d / f"two-streams.html.{kind}").write_bytes(pack(_page(5)) + pack(_page(6)))
        e[f"two-streams.html.{kind}"] = _expect("html", docs=1)
    (d / "empty.html.bz2").write_bytes(b"")
    e["empty.html.bz2"] = _expect("html", drops={"empty_document": 1})
    return e


def build_parquet(d: Path) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    e = {}
    pq.write_table(pa.table({"id": [f"x{i}" for i in range(5)], "body": ["no text column"] * 5}), d / "no-text.parquet")
    e["no-text.parquet"] = _expect("parquet", drops={"missing_text": 5}, counts={"files_without_text_column": 1})
    pq.write_table(pa.table({"text": pa.array([1, 2, 3, 4], pa.int64())}), d / "int-text.parquet")
    e["int-text.parquet"] = _expect("parquet", drops={"missing_text": 4})
    pq.write_table(pa.table({"text": pa.array([b"fine bytes", b"bad \xff bytes", b"more fine", None], pa.binary())}),
                   d / "binary-text.parquet")
    e["binary-text.parquet"] = _expect("parquet", docs=2, drops={"invalid_utf8": 1, "missing_text": 1})
    pq.write_table(pa.table({"id": pa.array([5, None, 7], pa.int64()),
                             "text": pa.array(["a", "b", "a"]).dictionary_encode(), "url": pa.array([None, 2, 3], pa.int32())}),
                   d / "odd-columns.parquet")
    e["odd-columns.parquet"] = _expect("parquet", docs=3)
    pq.write_table(pa.table({"text": pa.array([], pa.string())}), d / "zero-rows.parquet")
    e["zero-rows.parquet"] = _expect("parquet")
    buf = io.BytesIO()
    pq.write_table(pa.table({"text": [f"row {i}" for i in range(50)]}), buf)
    (d / "broken-footer.parquet").write_bytes(buf.getvalue()[:-20])
    e["broken-footer.parquet"] = _expect("parquet", drops={"corrupt_file": 1})
    (d / "empty.parquet").write_bytes(b"")
    e["empty.parquet"] = _expect("parquet", drops={"corrupt_file": 1})
    # the same short text repeated in a dictionary-encoded column (Parquet dictionary pages; read as a dictionary)
    pq.write_table(pa.table({"text": pa.array(["repeated dictionary text"] * 300).dictionary_encode()}), d / "dictionary.parquet")
    e["dictionary.parquet"] = _expect("parquet", docs=300)
    # a decompression bomb: 300 MiB of NULs stored in ~10 KB (zstd), in a row group after a small one
    bomb = pa.table({"text": ["\0" * (300 << 20)]})
    with pq.ParquetWriter(d / "bomb.parquet", bomb.schema, compression="zstd") as w:
        w.write_table(pa.table({"text": ["a small document before the bomb"]}))
        w.write_table(bomb)
    e["bomb.parquet"] = _expect("parquet", docs=1, drops={"decode_too_large": 1})
    return e


def build_arrow(d: Path) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    e = {}
    schema = pa.schema([("id", pa.string()), ("text", pa.string())])
    sink, ends = io.BytesIO(), []
    with pa.ipc.new_file(sink, schema) as w:
        for k in range(5):
            w.write_batch(pa.record_batch([[f"a{k}-{i}" for i in range(10)], [f"arrow text {k} {i}" for i in range(10)]], schema=schema))
            ends.append(sink.tell())
    (d / "truncated.arrow").write_bytes(sink.getvalue()[: ends[2] + 10])
    e["truncated.arrow"] = _expect("arrow", docs=30, drops={"truncated_arrow": 1})
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, schema) as w:
        w.write_batch(pa.record_batch([["s1", "s2"], ["stream one", "stream two"]], schema=schema))
    (d / "stream.arrow").write_bytes(sink.getvalue())
    e["stream.arrow"] = _expect("arrow", docs=2)
    with pa.ipc.new_file(d / "bomb.arrow", schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_batch(pa.record_batch([["b1"], ["a small document before the bomb"]], schema=schema))
        w.write_batch(pa.record_batch([["b2"], ["\0" * (300 << 20)]], schema=schema))  # ~10 KB stored
    e["bomb.arrow"] = _expect("arrow", docs=1, drops={"decode_too_large": 1})
    (d / "garbage.arrow").write_bytes(random.Random(3).randbytes(5000))
    e["garbage.arrow"] = _expect("arrow", drops={"corrupt_file": 1})
    (d / "empty.arrow").write_bytes(b"")
    e["empty.arrow"] = _expect("arrow", drops={"corrupt_file": 1})
    # every string-like type a writer uses for text (Polars: string_view); a null and a non-UTF-8 value each
    texts = ["view text one", None, "view text two"]
    for name, col in (("string-view", pa.array(texts, pa.string_view())),
                      ("binary-view", pa.array([b"bytes one", b"bad \xff", b"bytes two"], pa.binary_view())),
                      ("dict-string-view", pa.array(texts, pa.string_view()).dictionary_encode()),
                      ("large-string", pa.array(texts, pa.large_string()))):
        t = pa.table({"text": col})
        with pa.ipc.new_file(d / f"{name}.arrow", t.schema, options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
            w.write_table(t)
        bad = {"missing_text": 1} if name != "binary-view" else {"invalid_utf8": 1}
        e[f"{name}.arrow"] = _expect("arrow", docs=2, drops=bad)
    t = pa.table({"text": pa.array(texts, pa.string_view())})
    with pa.ipc.new_stream(d / "string-view-stream.arrow", t.schema) as w:
        w.write_table(t)
    e["string-view-stream.arrow"] = _expect("arrow", docs=2, drops={"missing_text": 1})
    return e


def build(root: Path) -> dict:
    root = Path(root)
    expected = {}
    for fmt, fn in (("warc", build_warc), ("jsonl", build_jsonl), ("html", build_html), ("parquet", build_parquet),
                    ("arrow", build_arrow)):
        for name, exp in fn(root / fmt).items():
            expected[f"{fmt}/{name}"] = exp
    for name, exp in build_arc(root / "warc").items():  # (ARC is read as format "warc")
        expected[f"warc/{name}"] = exp
    (root / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True))
    return expected


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="folder to write the corpus into (about 80 MB)")
    args = ap.parse_args(argv)
    expected = build(Path(args.out))
    print(f"{len(expected)} hostile files under {args.out}; expectations in {args.out}/expected.json")


if __name__ == "__main__":
    main()

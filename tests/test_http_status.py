"""WARC/ARC responses whose HTTP status is not 2xx (error pages, redirect bodies) were kept as documents, with no
status to filter on later (probe r17). They are set aside as ``http_status``, the status line first in the row's
text; counted like every set-aside record."""
import gzip
import uuid

import pytest

from curate.readers import READ_REASONS, read_file

PAGE = ("<html><head><title>Test page</title></head><body><article>"
        + "".join(f"<p>Paragraph {i} of a page about foxes and dogs, long enough to be a page.</p>" for i in range(5))
        + "</article></body></html>").encode()


def _response(uri: str, status: str, body: bytes, ctype: str = "text/html; charset=utf-8",
              version: str = "HTTP/1.1") -> bytes:
    payload = f"{version} {status}\r\nContent-Type: {ctype}\r\n\r\n".encode() + body
    return (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: {uri}\r\n"
            f"WARC-Record-ID: <urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, uri)}>\r\n"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(payload)}\r\n\r\n").encode() \
        + payload + b"\r\n\r\n"


STATUSES = [("200 OK", None), ("203 Non-Authoritative Information", None), ("404 Not Found", 404),
            ("500 Internal Server Error", 500), ("301 Moved Permanently", 301), ("302 Found", 302),
            ("304 Not Modified", 304), ("410 Gone", 410)]


@pytest.mark.parametrize("gz", [False, True])
def test_non_2xx_responses_are_set_aside_with_their_status(tmp_path, gz):
    recs = [_response(f"http://a/{s.split()[0]}", s, b"" if s.startswith("304") else PAGE) for s, _ in STATUSES]
    path = tmp_path / ("p.warc.gz" if gz else "p.warc")
    path.write_bytes(b"".join(gzip.compress(r) for r in recs) if gz else b"".join(recs))
    items = [it for it in read_file(str(path), "warc") if it[0] in ("doc", "drop")]
    assert len(items) == len(STATUSES)  # every response is counted once
    for (status, code), it in zip(STATUSES, items):
        if code is None:
            assert it[0] == "doc" and it[1]["text"] == PAGE.decode(), status
        else:
            assert it[0] == "drop" and it[2] == "http_status", status
            assert it[1]["text"].startswith(f"HTTP status {status}\n\n"), it[1]["text"][:80]
            assert it[1]["url"] == f"http://a/{code}"
            if code != 304:
                assert it[1]["text"].endswith(PAGE.decode())
    assert "http_status" in READ_REASONS


def test_a_non_html_error_response_stays_a_skip_and_a_payload_without_a_status_line_a_page(tmp_path):
    recs = [_response("http://a/img", "404 Not Found", b"\x89PNG....", "image/png")]
    bare = b"garbage line\r\nContent-Type: text/html\r\n\r\n" + PAGE
    recs.append((f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://a/bare\r\n"
                 f"Content-Length: {len(bare)}\r\n\r\n").encode() + bare + b"\r\n\r\n")
    recs.append(_response("http://a/h2", "200", PAGE, version="HTTP/2"))
    recs.append(_response("http://a/h2-404", "404", PAGE, version="HTTP/2"))
    path = tmp_path / "p.warc"
    path.write_bytes(b"".join(recs))
    items = list(read_file(str(path), "warc"))
    assert items[0] == ("skip", "response:image/png")
    assert [it[0] for it in items[1:]] == ["doc", "doc", "drop"]
    assert items[3][2] == "http_status" and items[3][1]["text"].startswith("HTTP status 404\n\n")


def test_arc_responses_with_an_error_status_are_set_aside(tmp_path):
    def rec(url, block):
        return f"{url} 1.2.3.4 20240101000000 text/html {len(block)}\n".encode() + block + b"\n"

    ok = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + PAGE
    missing = b"HTTP/1.0 404 Not Found\r\nContent-Type: text/html\r\n\r\n" + PAGE
    desc = b"1 0 InternetArchive\nURL IP-address Archive-date Content-type Archive-length\n"
    head = f"filedesc://x.arc 0.0.0.0 20240101000000 text/plain {len(desc)}\n".encode() + desc + b"\n"
    path = tmp_path / "x.arc"
    path.write_bytes(head + rec("http://a/ok", ok) + rec("http://a/missing", missing))
    items = [it for it in read_file(str(path), "warc") if it[0] in ("doc", "drop")]
    assert [it[0] for it in items] == ["doc", "drop"]
    assert items[1][2] == "http_status" and items[1][1]["text"].startswith("HTTP status 404 Not Found\n\n")


@pytest.mark.parametrize("status", ["2000 OK", "abc", "+200 OK", "-200", "20 OK", "2_00", ""])
def test_an_http_status_line_that_does_not_parse_is_set_aside_not_kept(tmp_path, status):
    # the block begins with "HTTP/" but holds no three-digit status: not a 2xx response (was kept as a page)
    path = tmp_path / "p.warc"
    path.write_bytes(_response("http://a/odd", status, PAGE) + _response("http://a/ok", "200 OK", PAGE))
    items = [it for it in read_file(str(path), "warc") if it[0] in ("doc", "drop")]
    assert [it[0] for it in items] == ["drop", "doc"]
    assert items[0][2] == "http_status" and items[0][1]["text"].startswith("HTTP status line unreadable: HTTP/1.1")

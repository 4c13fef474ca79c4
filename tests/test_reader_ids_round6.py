"""Readers, sixth round: JSONL's ``max_doc_bytes`` counts the document's text (its UTF-8), not the JSON line
(``\\uXXXX`` escapes made a 6.8 MB text a 10.9 MB line, set aside as too_large under 10 MiB), with the raw
line still bounded; ids a record does not bring (``file:line``, ``file@offset``, ``file:row``) stay unique when
two inputs share a base name (``a/x.jsonl`` and ``b/x.jsonl`` both made ``x.jsonl:1``)."""
from __future__ import annotations

import gzip
import json
import os
import tracemalloc
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest

from curate import readers
from curate.cli import main as curate_main
from curate.readers import id_name, id_prefixes, jsonl, plan_splits, read_file, read_split, split_where
from curate.readers.jsonl import LINE_SLACK, max_line_bytes
from curate.readers.lines import PREFIX


def _items(path, fmt="jsonl", max_doc_bytes=readers.DEFAULT_MAX_DOC_BYTES, target=1 << 62, prefix=None):
    """(kind, id, reason) and the rows of every split of a file; ``prefix``: the split's id_prefix."""
    out = []
    for split in plan_splits(str(path), fmt, target_bytes=target):
        if prefix is not None:
            split = {**split, "id_prefix": prefix}
        out += [it for it in read_split(split, max_doc_bytes=max_doc_bytes) if it[0] in ("doc", "drop")]
    return out


def _verdicts(items):
    return [(it[1]["id"], "doc" if it[0] == "doc" else it[2]) for it in items]


# ------------------------------------------------------------------- JSONL: the limit is on the text

def test_jsonl_limit_counts_the_texts_utf8_not_its_json_escapes(tmp_path):
    # the probe's case, scaled down: a text under the limit written with json.dumps' default escapes is a line
    # over it (the old reader compared the line: too_large); written without escapes it was kept
    limit = 100_000
    text = "café crème " * 6900
    assert len(text.encode()) < limit < len(json.dumps(text))
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"id": "escaped", "text": text}) + "\n"
                 + json.dumps({"id": "raw", "text": text}, ensure_ascii=False) + "\n", encoding="utf-8")
    items = _items(p, max_doc_bytes=limit)
    assert _verdicts(items) == [("escaped", "doc"), ("raw", "doc")]
    assert items[0][1]["text"] == items[1][1]["text"] == text


@pytest.mark.parametrize("char", ["é", "€", "😀", "A"])
def test_jsonl_limit_is_exact_on_the_text_whatever_its_escapes(tmp_path, char):
    # a text of exactly max_doc_bytes in UTF-8 is kept, one byte more is too_large: escaped (\u00e9, \u20ac,
    # a surrogate pair \ud83d\ude00, even \u0041 for "A": 6 bytes for 1, the most a line spends) or not
    limit = 120_000
    n = limit // len(char.encode())
    fits = char * n
    over = fits + "x" * (limit - len(fits.encode()) + 1)
    assert len(fits.encode()) == limit and len(over.encode()) == limit + 1
    escape = (lambda t: "".join(f"\\u{ord(c):04x}" for c in t)) if char == "A" else None
    lines = []
    for i, t in enumerate((fits, over)):
        lines.append(json.dumps({"id": f"raw{i}", "text": t}, ensure_ascii=False))
        esc = json.dumps({"id": f"esc{i}", "text": "PLACEHOLDER"}).replace("PLACEHOLDER", escape(t)) if escape \
            else json.dumps({"id": f"esc{i}", "text": t})
        assert len(esc) > limit
        lines.append(esc)
    p = tmp_path / "in.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    items = _items(p, max_doc_bytes=limit)
    assert _verdicts(items) == [("raw0", "doc"), ("esc0", "doc"), ("raw1", "too_large"), ("esc1", "too_large")]
    assert items[0][1]["text"] == items[1][1]["text"] == fits
    # a too_large row parsed keeps the start of its text, not of its line
    assert items[3][1]["text"] == over[:10000]


def test_jsonl_other_fields_do_not_count_against_the_text(tmp_path):
    # a small text beside a large field is a document: the limit is on the document, not the line
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"id": "meta", "text": "a short text", "html": "<p>" * 200_000}) + "\n")
    assert _verdicts(_items(p, max_doc_bytes=10_000)) == [("meta", "doc")]


def test_jsonl_line_over_the_raw_bound_is_too_large_and_never_parsed(tmp_path, monkeypatch):
    limit = 1000
    bound = max_line_bytes(limit)
    assert bound == 6 * limit + LINE_SLACK
    p = tmp_path / "in.jsonl"
    over = json.dumps({"id": "huge", "text": "short", "pad": "x" * bound})
    under = json.dumps({"id": "fits", "text": "short", "pad": "x" * (bound - 60)})
    assert len(over) > bound >= len(under)
    p.write_text(over + "\n" + under + "\n" + json.dumps({"text": "after"}) + "\n")
    parsed = []
    loads = jsonl.json_files.loads
    monkeypatch.setattr(jsonl.json_files, "loads", lambda s, *a: parsed.append(len(s)) or loads(s, *a))
    items = _items(p, max_doc_bytes=limit)
    assert _verdicts(items) == [("huge", "too_large"), ("fits", "doc"), ("in.jsonl:3", "doc")]
    assert items[0][1]["text"] == over[:PREFIX]  # the start of the line, unparsed
    assert max(parsed) < bound and len(parsed) == 2


def test_jsonl_line_over_the_bound_is_not_held_whole(tmp_path):
    limit = 1000
    p = tmp_path / "big.jsonl"
    with open(p, "w") as f:
        f.write('{"id": "huge", "text": "')
        for _ in range(24):
            f.write("y" * (1 << 20))
        f.write('"}\n{"id": "next", "text": "fine"}\n')
    tracemalloc.start()
    try:
        items = _items(p, max_doc_bytes=limit)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert _verdicts(items) == [("huge", "too_large"), ("next", "doc")]
    assert peak < max_line_bytes(limit) + (8 << 20), peak  # the 24 MiB line never in memory


def test_jsonl_escaped_texts_read_the_same_in_splits(tmp_path):
    limit = 5000
    rows = [{"id": f"r{i}", "text": ("é" * (i * 97 % 3000)) or "x"} for i in range(300)]
    p = tmp_path / "in.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    whole = _items(p, max_doc_bytes=limit)
    split = _items(p, max_doc_bytes=limit, target=8192)
    assert _verdicts(whole) == _verdicts(split)
    assert [v for _, v in _verdicts(whole)] == ["doc" if len(r["text"].encode()) <= limit else "too_large"
                                                for r in rows]
    gz = tmp_path / "in.jsonl.gz"
    gz.write_bytes(b"".join(gzip.compress((json.dumps(r) + "\n").encode()) for r in rows))
    assert [v for _, v in _verdicts(_items(gz, max_doc_bytes=limit, target=4096))] == [v for _, v in _verdicts(whole)]


# ------------------------------------------------------------------ ids: one base name, two inputs

def test_unique_base_names_get_no_prefix():
    assert id_prefixes(["/d/a/x.jsonl", "/d/b/y.jsonl", "rel/z.parquet", "w.warc.gz"]) == {}


def test_shared_base_names_get_the_shortest_unique_ending():
    got = id_prefixes(["/d/a/x.jsonl", "/d/b/x.jsonl", "/d/c/y.jsonl",
                       "/p/m/k/n.jsonl", "/q/o/k/n.jsonl", "/r/s/n.jsonl",
                       "/t.jsonl", "/u/t.jsonl", "/d/a/x.jsonl"])
    assert got == {"/d/a/x.jsonl": "a/x.jsonl", "/d/b/x.jsonl": "b/x.jsonl",
                   "/p/m/k/n.jsonl": "m/k/n.jsonl", "/q/o/k/n.jsonl": "o/k/n.jsonl", "/r/s/n.jsonl": "s/n.jsonl",
                   "/t.jsonl": "/t.jsonl", "/u/t.jsonl": "u/t.jsonl"}
    rel = id_prefixes(["in/a/x.jsonl", "in/b/x.jsonl"])
    assert rel == {"in/a/x.jsonl": "a/x.jsonl", "in/b/x.jsonl": "b/x.jsonl"}


def test_prefixes_are_unique_for_many_inputs():
    paths = [f"/data/{a}/{b}/part-{c}.jsonl" for a in "xyz" for b in "xyz" for c in range(3)] + \
            [f"/data/{a}/part-0.jsonl" for a in "xyz"] + ["/part-0.jsonl", "/data/part-1.jsonl"]
    got = id_prefixes(paths)
    names = [got.get(p, os.path.basename(p)) for p in paths]
    assert len(set(names)) == len(paths)
    for p, n in zip(paths, names):
        assert p.endswith(n) and (n == p or p[-len(n) - 1] == "/")
    assert sum(n.count("/") for n in names) < 3 * len(paths)  # shortest: not whole paths


def _warc(n: int, rid: bool = False) -> bytes:
    body = f"<html><body><p>page {n} with some words in it</p></body></html>".encode()
    block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
    head = (f"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://example.org/{n}\r\n"
            + (f"WARC-Record-ID: <urn:uuid:own-{n}>\r\n" if rid else "")
            + f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(block)}\r\n\r\n")
    return head.encode() + block + b"\r\n\r\n"


def _inputs(d: Path) -> dict[str, str]:
    """One input per format (and one per fallback id form), named ``x.<ext>``; ext -> format."""
    d.mkdir(parents=True)
    (d / "x.jsonl").write_text(json.dumps({"text": "line one"}) + "\n{broken\n" + json.dumps({"id": "own", "text": "t"}) + "\n")
    (d / "x.jsonl.gz").write_bytes(gzip.compress(b'{"text": "member one"}\n') + gzip.compress(b'{"text": "member two"}\n'))
    pq.write_table(pa.table({"text": ["row one", "row two"], "id": [None, "p2"]}), d / "x.parquet")
    with ipc.new_file(d / "x.arrow", pa.schema([("text", pa.string())])) as w:
        w.write_table(pa.table({"text": ["arrow one"]}))
    (d / "x.warc").write_bytes(_warc(1) + _warc(2, rid=True))
    (d / "x.html").write_text("<html><body><p>a page of words</p></body></html>")
    (d / "x.zst.jsonl.gz").write_bytes(b"not gzip at all, nor text \x00\x01\x02")  # set aside whole
    return {"x.jsonl": "jsonl", "x.jsonl.gz": "jsonl", "x.parquet": "parquet", "x.arrow": "arrow",
            "x.warc": "warc", "x.html": "html", "x.zst.jsonl.gz": "jsonl"}


def test_every_fallback_id_begins_with_the_id_prefix(tmp_path):
    files = _inputs(tmp_path / "a")
    for name, fmt in files.items():
        plain = _items(tmp_path / "a" / name, fmt)
        named = _items(tmp_path / "a" / name, fmt, prefix=f"a/{name}")
        assert [it[0] for it in plain] == [it[0] for it in named] and plain, name
        for p, n in zip(plain, named):
            pid, nid = p[1]["id"], n[1]["id"]
            if pid.startswith(name):  # a fallback id: the prefix instead of the base name, the rest the same
                assert nid == f"a/{pid}", (name, pid, nid)
            else:  # the record's own id
                assert nid == pid and pid in ("own", "p2", "own-2"), (name, pid)
    fallback = {it[1]["id"] for name, fmt in files.items() for it in _items(tmp_path / "a" / name, fmt, prefix=f"a/{name}")}
    assert {"a/x.jsonl:1", "a/x.jsonl:2", "a/x.parquet:1", "a/x.arrow:1", "a/x.warc@0", "a/x.html"} <= fallback


def test_reader_error_rows_and_messages_name_the_prefix(tmp_path, monkeypatch):
    p = tmp_path / "x.jsonl"
    p.write_text('{"text": "one"}\n')
    split = {**plan_splits(str(p), "jsonl")[0], "id_prefix": "b/x.jsonl"}
    assert id_name(split) == "b/x.jsonl" and id_name({"path": str(p)}) == "x.jsonl"
    assert "id_prefix" not in split_where(split)

    def boom(*a, **k):
        raise RuntimeError("bug")
        yield

    monkeypatch.setattr(jsonl, "read", boom)
    (item,) = list(read_split(split))
    assert item[2] == "reader_error" and item[1]["id"].startswith("b/x.jsonl:reader_error:")


def test_read_file_keeps_base_name_ids(tmp_path):
    p = tmp_path / "sub" / "x.jsonl"
    p.parent.mkdir()
    p.write_text(json.dumps({"text": "one"}) + "\n")
    assert [it[1]["id"] for it in read_file(str(p), "jsonl")] == ["x.jsonl:1"]


# --------------------------------------------------------------------- a run: distinct, resumable ids
# (these need the planner to give each split its id_prefix: curate/steps.py read_tasks, readers.id_prefixes)

def _toml(tmp_path, pattern, out, stages=""):
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "ids"\noutput = "{out}"\nworkers = 1\n[[sources]]\npath = "{pattern}"\n{stages}')
    return toml


def _rows(out: Path):
    got = []
    for p in sorted(out.glob("data/*.arrow")) + sorted(out.glob("dropped/*/*.arrow")):
        with pa.memory_map(str(p)) as src:
            for r in ipc.open_file(src).read_all().to_pylist():
                got.append((r["id"], os.path.relpath(r["source"], out.parent), r.get("reason"), r.get("duplicate_of")))
    return sorted(got)


def _data(out: Path) -> dict:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.glob("data/*")) + sorted(out.glob("dropped/*/*"))}


def _markers(out: Path) -> dict:
    return {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in (out / "steps" / "00_read" / "_tasks").glob("*.json")}


def test_two_inputs_with_one_base_name_make_distinct_ids(tmp_path):
    # the probe's case: exact_dedup's duplicate_of named "x.jsonl:2", two documents
    d = tmp_path / "in"
    for sub, texts in (("a", ["Alpha text unique to folder a.", "Shared text that appears twice."]),
                       ("b", ["Shared text that appears twice.", "Beta text unique to folder b."])):
        (d / sub).mkdir(parents=True)
        (d / sub / "x.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out"
    toml = _toml(tmp_path, f"{d}/*/x.jsonl", out, '[[stages]]\ntype = "exact_dedup"\n')
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    assert _rows(out) == [("a/x.jsonl:1", "in/a/x.jsonl", None, None), ("a/x.jsonl:2", "in/a/x.jsonl", None, None),
                          ("b/x.jsonl:1", "in/b/x.jsonl", "exact_duplicate", "a/x.jsonl:2"),
                          ("b/x.jsonl:2", "in/b/x.jsonl", None, None)]
    first = _data(out)
    # resumed after losing a read task, and rerun: the same bytes
    marker = sorted((out / "steps" / "00_read" / "_tasks").glob("*.json"))[1]
    marker.unlink()
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    assert _data(out) == first
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    assert _data(out) == first


def test_unique_base_names_keep_their_ids_and_their_finished_tasks(tmp_path, monkeypatch):
    # a run made before prefixes existed (the planner gave none) resumes: inputs with a base name of their own
    # keep their finished tasks and ids; the two that share one are read again, with distinct ids
    d = tmp_path / "in"
    for sub, name in (("a", "x.jsonl"), ("b", "x.jsonl"), ("c", "y.jsonl")):
        (d / sub).mkdir(parents=True)
        (d / sub / name).write_text(json.dumps({"text": f"in {sub}"}) + "\n")
    out = tmp_path / "out"
    toml = _toml(tmp_path, f"{d}/*/*.jsonl", out)
    real = readers.id_prefixes
    monkeypatch.setattr(readers, "id_prefixes", lambda paths: {})
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    assert [r[0] for r in _rows(out)] == ["x.jsonl:1", "x.jsonl:1", "y.jsonl:1"]
    before = _markers(out)
    monkeypatch.setattr(readers, "id_prefixes", real)
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    assert [r[0] for r in _rows(out)] == ["a/x.jsonl:1", "b/x.jsonl:1", "y.jsonl:1"]
    after = _markers(out)
    assert sorted(after) == sorted(before) == ["src00000-0000.json", "src00001-0000.json", "src00002-0000.json"]
    assert after["src00002-0000.json"] == before["src00002-0000.json"]  # y.jsonl: not read again
    assert all(after[k] != before[k] for k in ("src00000-0000.json", "src00001-0000.json"))
    data = _data(out)
    assert curate_main(["run", str(toml), "--quiet"]) == 0
    assert _markers(out) == after and _data(out) == data

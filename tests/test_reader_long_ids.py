"""Ids and urls an input carries are bounded like its text: a 30 MB id was kept whole, and copied into every row
that names it (dedup's ``duplicate_of``, the plans). Shortened ones stay one per distinct input value."""
import json

import pyarrow as pa
import pyarrow.parquet as pq

from curate.readers import read_file
from curate.readers.text import MAX_ID_CHARS, MAX_URL_CHARS

TEXT = "A paragraph of ordinary prose, long enough to be a document of its own."


def test_long_ids_and_urls_are_shortened_and_stay_distinct(tmp_path):
    a, b = "x" * 2_000_000 + "a", "x" * 2_000_000 + "b"
    url = "https://example.org/" + "p" * 200_000
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"id": i, "text": TEXT, "url": url}) + "\n" for i in (a, b, "short")))
    docs = [it[1] for it in read_file(str(f), "jsonl") if it[0] == "doc"]
    assert len(docs) == 3
    assert all(len(d["id"]) <= MAX_ID_CHARS and len(d["url"]) <= MAX_URL_CHARS for d in docs)
    assert docs[0]["id"] != docs[1]["id"] and docs[0]["id"].startswith("xxx") and docs[2]["id"] == "short"
    assert docs[0]["url"].startswith("https://example.org/ppp")


def test_long_ids_of_a_table_are_shortened(tmp_path):
    f = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": ["y" * 500_000 + "1", "y" * 500_000 + "2"], "text": [TEXT, TEXT]}), f)
    docs = [it[1] for it in read_file(str(f), "parquet") if it[0] == "doc"]
    assert len(docs) == 2 and len({d["id"] for d in docs}) == 2
    assert all(len(d["id"]) <= MAX_ID_CHARS for d in docs)

"""Ids that the records do not bring (``file:line``, ``file@member:line``, an HTML file's name) are one per record
in a run: a file whose name is another's id (``x.jsonl.gz@123``, ``x.jsonl:3``) cannot give its records the ids of
the other's records, and ordinary file names keep the ids they always had."""
import gzip
import json
from pathlib import Path

import pytest

from curate.cli import main as curate_main
from curate import readers
from curate.readers import read_file
from curate.shards import read_shard


def _lines(texts: list[str]) -> bytes:
    return "".join(json.dumps({"text": t}) + "\n" for t in texts).encode()


def _members(tmp_path: Path) -> tuple[Path, int]:
    """``x.jsonl.gz``: two gzip members of two lines each; the offset of the second member."""
    first = gzip.compress(_lines(["first member line one", "first member line two"]), mtime=0)
    second = gzip.compress(_lines(["second member line one", "second member line two"]), mtime=0)
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(first + second)
    return path, len(first)


def _ids(path: Path) -> list[str]:
    return [item[1]["id"] for item in read_file(str(path), "jsonl") if item[0] in ("doc", "drop")]


def test_a_file_named_like_a_member_id_does_not_take_that_members_ids(tmp_path):
    multi, offset = _members(tmp_path)
    assert _ids(multi) == ["x.jsonl.gz:1", "x.jsonl.gz:2", f"x.jsonl.gz@{offset}:1", f"x.jsonl.gz@{offset}:2"]
    crafted = tmp_path / f"x.jsonl.gz@{offset}"  # (read as JSONL: a source's `format = "jsonl"`)
    crafted.write_bytes(_lines(["crafted one", "crafted two"]))
    assert not set(_ids(crafted)) & set(_ids(multi))
    assert _ids(crafted) == [f'"x.jsonl.gz@{offset}":1', f'"x.jsonl.gz@{offset}":2']


@pytest.mark.parametrize("name", ["a@b.jsonl", "a:1.jsonl", '"x.jsonl', "a@1:2.jsonl"])
def test_a_name_with_an_id_separator_is_quoted_and_ordinary_names_are_not(name):
    assert readers.safe_id_name(name) == json.dumps(name)
    assert json.loads(readers.safe_id_name(name)) == name
    for ordinary in ("x.jsonl", "dir/x.jsonl.gz", "CC-MAIN-2024 part (1).jsonl.zst", "x%40y.jsonl", 'x".jsonl'):
        assert readers.safe_id_name(ordinary) == ordinary


def test_ids_of_a_crafted_pair_are_unique_through_a_run(tmp_path):
    """Through ``curate run``: every record of both files kept, under ids that are all different."""
    multi, offset = _members(tmp_path)
    crafted = tmp_path / f"x.jsonl.gz@{offset}"
    crafted.write_bytes(_lines(["crafted one", "crafted two"]))
    out = tmp_path / "out"
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "ids"\noutput = "{out}"\n'
                    f'[[sources]]\npath = "{multi}"\n[[sources]]\npath = "{crafted}"\nformat = "jsonl"\n')
    assert curate_main(["run", str(toml), "--quiet", "--workers", "1"]) == 0
    ids = [i for shard in sorted((out / "data").rglob("*.arrow")) for i in read_shard(shard, ["id"]).column("id").to_pylist()]
    assert len(ids) == 6 and len(set(ids)) == 6, ids


def test_an_html_or_table_file_named_like_a_line_id_does_not_take_it(tmp_path):
    """Every reader's ids begin with the same quoted name: an HTML file named ``x.jsonl:3`` (whose id is its name)
    and a Parquet file named ``x.jsonl@62`` (ids ``name:row``) are not line 3 of ``x.jsonl`` or member 62's line."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = tmp_path / "x.jsonl"
    lines.write_bytes(_lines(["one", "two", "three"]))
    page = tmp_path / "x.jsonl:3"
    page.write_text("<html><body><p>A page whose name is an id of another file.</p></body></html>")
    table = tmp_path / "x.jsonl@62"
    pq.write_table(pa.table({"text": ["a row"]}), table)
    jsonl_ids = _ids(lines)
    page_ids = [item[1]["id"] for item in read_file(str(page), "html") if item[0] in ("doc", "drop")]
    table_ids = [item[1]["id"] for item in read_file(str(table), "parquet") if item[0] in ("doc", "drop")]
    assert jsonl_ids == ["x.jsonl:1", "x.jsonl:2", "x.jsonl:3"]
    assert page_ids == ['"x.jsonl:3"'] and table_ids == ['"x.jsonl@62":1']

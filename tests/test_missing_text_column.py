"""A Parquet/Arrow file without the column ``text_field`` names (its text in ``Text``, ``content``, ``body``)
set every row aside as missing_text with nothing saying why (probe r15). Each row's text now names the file's
columns and the text_field setting (as a JSONL record without the field does), the read step counts the file
once, and no column is guessed."""
import json

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

from curate.readers import read_file

TEXT = "The quick brown fox jumps over the lazy dog. " * 5


def _write(path, fmt, table):
    if fmt == "parquet":
        pq.write_table(table, path)
    else:
        feather.write_feather(table, path)


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
def test_a_table_without_the_text_column_names_its_columns(tmp_path, fmt):
    path = tmp_path / f"t.{fmt}"
    _write(path, fmt, pa.table({"id": ["a", "b"], "Text": [TEXT, TEXT], "lang": ["en", "en"]}))
    items = list(read_file(str(path), fmt))
    drops = [it for it in items if it[0] == "drop"]
    assert [it[2] for it in drops] == ["missing_text", "missing_text"]  # one row per input row: counts add up
    assert [it[1]["id"] for it in drops] == ["a", "b"]
    why = drops[0][1]["text"]
    assert 'no column "text"' in why and '"Text"' in why and '"lang"' in why and "text_field" in why, why
    assert TEXT not in why  # nothing is guessed
    assert [it for it in items if it[0] == "count"] == [("count", "files_without_text_column", 1)]
    assert not [it for it in items if it[0] == "doc"]


def test_the_named_column_is_read(tmp_path):
    path = tmp_path / "t.parquet"
    _write(path, "parquet", pa.table({"Text": [TEXT]}))
    docs = [it for it in read_file(str(path), "parquet", text_field="Text") if it[0] == "doc"]
    assert [d[1]["text"] for d in docs] == [TEXT]


def test_a_null_or_numeric_text_is_missing_text_as_before(tmp_path):
    path = tmp_path / "t.parquet"
    _write(path, "parquet", pa.table({"text": [None, TEXT]}))
    items = [it for it in read_file(str(path), "parquet") if it[0] != "count"]
    assert [it[0] for it in items] == ["drop", "doc"] and items[0][1]["text"] == ""
    assert not [it for it in read_file(str(path), "parquet") if it[0] == "count"]


def test_a_jsonl_record_without_the_field_says_so_the_same_way(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"id": "x", "content": TEXT}) + "\n" + json.dumps({"id": "y", "text": None}) + "\n")
    drops = [it for it in read_file(str(path), "jsonl") if it[0] == "drop"]
    assert [it[2] for it in drops] == ["missing_text", "missing_text"]
    why = drops[0][1]["text"]
    assert 'no field "text"' in why and '"content"' in why and '"id"' in why and "text_field" in why, why
    assert drops[1][1]["text"] == ""  # the field is there, null


def test_many_columns_are_listed_up_to_a_limit(tmp_path):
    path = tmp_path / "wide.parquet"
    _write(path, "parquet", pa.table({f"c{i}": [1] for i in range(50)}))
    why = next(it for it in read_file(str(path), "parquet") if it[0] == "drop")[1]["text"]
    assert '"c0"' in why and '"c19"' in why and '"c20"' not in why and "and 30 more" in why


def test_a_run_says_it_once(tmp_path, capsys):
    from curate.cli import main

    _write(tmp_path / "T.parquet", "parquet", pa.table({"Text": [TEXT]}))
    (tmp_path / "p.toml").write_text(f'[pipeline]\nname = "t"\noutput = "{tmp_path / "out"}"\nworkers = 1\n'
                                     f'[[sources]]\npath = "{tmp_path / "T.parquet"}"\n')
    assert main(["run", str(tmp_path / "p.toml")]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["stages"][0]["counters"] == {"files_without_text_column": 1}
    said = capsys.readouterr()
    assert "files without text column" in (said.out + said.err).replace("_", " ")


@pytest.mark.parametrize("fmt", ["parquet", "arrow"])
@pytest.mark.parametrize("column, type_name", [
    (pa.array([[TEXT], ["a", "b"]]), "list<"),
    (pa.array([{"body": TEXT}, {"body": "x"}]), "struct<body: string>"),
    (pa.array([1, 2]), "int64"),
    (pa.array([1.5, None]), "double"),
])
def test_a_text_column_of_another_type_names_its_type(tmp_path, fmt, column, type_name):
    """A ``text`` column holding lists, structs or numbers (a crawl's nested records written as they came)
    sets each row aside as ``missing_text``, and the row's text says what the column holds."""
    path = tmp_path / f"t.{fmt}"
    _write(path, fmt, pa.table({"id": ["a", "b"], "text": column}))
    drops = [it for it in read_file(str(path), fmt) if it[0] == "drop"]
    assert [it[2] for it in drops] == ["missing_text", "missing_text"] and [d[1]["id"] for d in drops] == ["a", "b"]
    for d in drops:
        why = d[1]["text"]
        assert 'the column "text" holds' in why and type_name in why and "text_field" in why, why
    if column.type == pa.list_(pa.string()):  # the value is kept, as JSON (as a JSONL row's is)
        assert drops[0][1]["text"].endswith(f'Its value: {json.dumps([TEXT])}')


def test_a_dictionary_of_texts_is_read_and_a_dictionary_of_numbers_is_named(tmp_path):
    path = tmp_path / "t.arrow"
    _write(path, "arrow", pa.table({"text": pa.array([TEXT, TEXT]).dictionary_encode()}))
    assert [it[0] for it in read_file(str(path), "arrow") if it[0] != "count"] == ["doc", "doc"]
    _write(path, "arrow", pa.table({"text": pa.array([1, 1]).dictionary_encode()}))
    why = next(it for it in read_file(str(path), "arrow") if it[0] == "drop")[1]["text"]
    assert "dictionary<values=int64" in why, why

"""The one place that defines what a document is.

A document is one row of an Arrow table. Every shard carries at least the base columns below;
stages add metadata columns (``lang``, ``lang_score``, quality signals, scores) as they run.
Rows set aside by a stage go to a ``dropped`` shard with two more columns, ``stage`` and ``reason``
(and ``duplicate_of`` where a dedup stage names the document that was kept instead).

Base columns:
- ``id``: the input's own ``id`` field when it has one; otherwise stable: the WARC record id, or
  ``<source file name>:<position>`` for JSONL/Parquet/Arrow/HTML inputs without ids.
- ``text``: the document text (raw HTML until the ``extract`` stage turns it into text).
- ``source``: the input file the document came from (its path as given in the pipeline).
- ``url``: the page URL where known, else "".
- ``content_type``: ``text/html`` for pages that still need extraction, ``text/plain`` otherwise.
"""
from __future__ import annotations

import pyarrow as pa

ID, TEXT, SOURCE, URL, CONTENT_TYPE = "id", "text", "source", "url", "content_type"
LANG, LANG_SCORE = "lang", "lang_score"
STAGE, REASON, DUPLICATE_OF = "stage", "reason", "duplicate_of"

HTML, PLAIN = "text/html", "text/plain"

BASE_SCHEMA = pa.schema(
    [
        pa.field(ID, pa.string(), nullable=False),
        pa.field(TEXT, pa.large_string(), nullable=False),
        pa.field(SOURCE, pa.string(), nullable=False),
        pa.field(URL, pa.string(), nullable=False),
        pa.field(CONTENT_TYPE, pa.string(), nullable=False),
    ]
)

# Reason codes used by the readers for input that cannot become a document (the one table: readers.READ_REASONS
# is this dict). Stages define their own codes next to the rule that produces them.
READ_REASONS = {
    "truncated_gzip": "the file ends inside a gzip member; the records before were kept",
    "truncated_zstd": "the file ends inside a zstd frame; the records before were kept",
    "truncated_bz2": "the file ends inside a bz2 stream; the records before were kept",
    "truncated_xz": "the file ends inside an xz stream; the records before were kept",
    "truncated_record": "the file ends inside a record",
    "truncated_arrow": "an Arrow file or stream that ends early; its complete batches were kept",
    "corrupt_gzip": "a gzip member that does not decode; reading went on at the next member",
    "corrupt_zstd": "a zstd frame that does not decode; reading went on at the next frame",
    "corrupt_bz2": "a bz2 stream that does not decode; reading went on at the next stream",
    "corrupt_xz": "an xz stream that does not decode; reading went on at the next stream",
    "corrupt_row_group": "a Parquet row group that does not decode",
    "corrupt_batch": "an Arrow record batch that does not decode",
    "corrupt_file": "a Parquet/Arrow file whose footer or schema cannot be read",
    "decode_too_large": "a Parquet row group or Arrow batch not decoded: a page or compressed batch of it decodes "
                        "to more than 256 MiB (or twice max_doc_bytes) and to more than 100x its bytes on disk (a "
                        "decompression bomb); one row names it",
    "wrong_compression": "the name says compressed (.gz, .zst, .bz2, .xz) but the bytes are neither that, "
                         "another compression that is read, nor text; the file is set aside whole",
    "unsupported_compression": "zip, 7z or lz4 data (by its magic bytes): not read, set aside whole",
    "bad_content_length": "a WARC or ARC record whose stated length does not match where the next record starts",
    "malformed_record": "a WARC/ARC/JSONL record that could not be parsed, or bytes between records",
    "invalid_utf8": "bytes that are not valid in any detected encoding",
    "http_status": "a WARC/ARC response whose HTTP status is not 2xx (an error page, a redirect's body) or whose "
                   "status line does not parse: the row's text is the status line, a blank line, then the body",
    "binary_content": "more than 5% control characters: not text",
    "empty_document": "no text at all after decoding",
    "too_large": "larger than the reader's max_doc_bytes (the row keeps a prefix only); for JSONL the document's "
                 "text in UTF-8 counts, not its line (escapes and other fields do not), and a line longer than 6 x "
                 "max_doc_bytes + 1 MiB is too_large unparsed",
    "missing_text": "a JSONL/Parquet/Arrow row without a usable text field; where the record or file has no field "
                    "(column) of that name, the row's text names the ones it has and the source's text_field "
                    "setting; where the file's column holds lists, structs or numbers, it names the column's type "
                    "(and keeps the value, as JSON)",
    "duplicate_column": "a Parquet/Arrow file where two or more columns bear the name of the text, id or url "
                        "column: which one to read is unknown, so the file is not read; one row names the columns "
                        "and the rows not read",
    "reader_error": "a bug in the reader hit this file; the rest of the split is not read",
    "read_crashed": "a library crashed the worker reading this split, each time it ran: the split is not read",
}


def empty_table(schema: pa.Schema = BASE_SCHEMA) -> pa.Table:
    return schema.empty_table()


def documents_to_table(rows: list[dict], schema: pa.Schema = BASE_SCHEMA) -> pa.Table:
    """Build a table from dicts that hold at least the base columns (extra keys become columns)."""
    if not rows:
        return empty_table(schema)
    columns = {f.name: [r.get(f.name, "") for r in rows] for f in schema}
    extra = [k for k in rows[0] if k not in columns]
    table = pa.Table.from_pydict(columns, schema=schema)
    for k in extra:
        table = table.append_column(k, pa.array([r.get(k) for r in rows]))
    return table


def with_reason(table: pa.Table, stage: str, reasons, duplicate_of=None) -> pa.Table:
    """Mark rows as set aside: add ``stage``, ``reason`` (and ``duplicate_of``) columns."""
    n = table.num_rows
    if isinstance(reasons, str):
        reasons = [reasons] * n
    out = table.append_column(STAGE, pa.array([stage] * n, pa.string()))
    out = out.append_column(REASON, pa.array(reasons, pa.string()))
    if duplicate_of is None:
        duplicate_of = [None] * n
    return out.append_column(DUPLICATE_OF, pa.array(duplicate_of, pa.string()))

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

# Reason codes used by the reader for input that cannot become a document.
# Stages define their own codes next to the rule that produces them.
READ_REASONS = {
    "truncated_gzip": "the compressed stream ended early or is corrupt; records up to that point were kept",
    "malformed_record": "a WARC/ARC/JSONL record that could not be parsed",
    "invalid_utf8": "bytes that are not valid in any detected encoding",
    "binary_content": "content that is not text (NUL bytes, non-text MIME type)",
    "empty_document": "no text at all after decoding",
    "too_large": "larger than the reader's max_doc_bytes",
    "missing_text": "a JSONL/Parquet row without a usable text field",
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

"""Quarry curation: raw web data (WARC, HTML, JSONL, Parquet, Arrow) to curated Apache Arrow shards."""

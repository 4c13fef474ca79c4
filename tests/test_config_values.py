"""Values that make no sense fail when the pipeline is read, with a message saying what to change (not after
the read step, not with a MemoryError or a traceback from inside a library)."""
from __future__ import annotations

import pytest

from curate.config import ConfigError
from curate.pipeline import parse_pipeline, parse_stage


def _pipeline(**head):
    return {"pipeline": {"output": "out", **head}, "sources": [{"path": "x.jsonl"}], "stages": []}


@pytest.mark.parametrize("value", [0, -1])
def test_max_doc_bytes_must_be_positive(value):
    with pytest.raises(ConfigError, match="max_doc_bytes must be >= 1"):
        parse_pipeline(_pipeline(max_doc_bytes=value))


@pytest.mark.parametrize("key", ["text_field", "id_field"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_field_name_is_refused(key, value):
    """text_field = "" read every document as missing_text."""
    raw = _pipeline()
    raw["sources"][0][key] = value
    with pytest.raises(ConfigError, match=f"sources.*{key} = .*name the field"):
        parse_pipeline(raw)


@pytest.mark.parametrize("value", [0, 1, 4095])
def test_split_bytes_below_a_few_kib_is_refused(value):
    """split_bytes = 1 made every record a read task and a shard of its own (100,000 of each for 2.4 MB)."""
    with pytest.raises(ConfigError, match="split_bytes must be >= 4096"):
        parse_pipeline(_pipeline(split_bytes=value))
    assert parse_pipeline(_pipeline(split_bytes=4096)).split_bytes == 4096


@pytest.mark.parametrize("params, message", [
    ({"bands": 100_000, "rows": 1000}, "at most 1024"),
    ({"bands": 2000, "rows": 1, "threshold": 0.8}, "at most 1024"),  # the band search over 2000 never starts
    ({"bands": 1, "rows": 1, "threshold": 0.9}, "threshold = 0.9 with bands x rows = 1 permutations"),
    ({"bands": 1, "rows": 2, "threshold": 0.9}, "allow more permutations"),
])
def test_minhash_bands_rows(params, message):
    with pytest.raises(ConfigError, match=message):
        parse_stage({"type": "minhash_dedup", **params}, "t")


def test_minhash_sensible_values_pass():
    spec = parse_stage({"type": "minhash_dedup", "bands": 32, "rows": 32, "threshold": 0.8}, "t")
    assert spec.build().banding()[0] * spec.build().banding()[1] <= 1024


@pytest.mark.parametrize("params, message", [
    ({"min_doc_words": 500, "max_doc_words": 100}, "min_doc_words = 500 is above max_doc_words"),
    ({"min_avg_word_length": 12.0}, "min_avg_word_length = 12.0 is above"),
    ({"max_symbol_word_ratio": float("nan")}, "max_symbol_word_ratio = nan"),
])
def test_gopher_quality_ranges(params, message):
    with pytest.raises(ConfigError, match=message):
        parse_stage({"type": "gopher_quality", "words": "regex", **params}, "t")


def test_nan_threshold_of_repetition_refused():
    with pytest.raises(ConfigError, match="dup_line_frac = nan"):
        parse_stage({"type": "gopher_repetition", "words": "regex", "dup_line_frac": float("nan")}, "t")


def test_more_local_workers_than_a_machine_can_hold_refused_at_start():
    import os

    from curate.executors import make_executor

    cpus = os.cpu_count() or 1
    with pytest.raises(ConfigError, match=f"use at most {16 * cpus} here"):
        make_executor("local", workers=16 * cpus + 1)
    make_executor("local", workers=16 * cpus).close()  # oversubscribed but possible: allowed


def test_gopher_min_stop_words_above_the_stop_words_refused():
    with pytest.raises(ConfigError, match="distinct stop_words: every document would be set aside"):
        parse_stage({"type": "gopher_quality", "min_stop_words": 3, "stop_words": ["a", "b", "a"]}, "t")


@pytest.mark.parametrize("value, message", [(-1, "between 0"), (1e300, "and 86400"),
                                            (float("nan"), "finite number")])
def test_extract_timeout_out_of_range_refused(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_stage({"type": "extract", "timeout_s": value}, "t")

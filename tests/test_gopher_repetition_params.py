"""``gopher_repetition``'s limits: a value that would set every document aside, or never mean anything, stops the
run at start naming the key and what to change."""
import json

import pytest

from curate.cli import main as curate_main
from curate.config import ConfigError
from curate.pipeline import parse_stage


def _stage(**params):
    return parse_stage({"type": "gopher_repetition", "words": "regex", **params}, "p.toml: [[stages]] #1")


@pytest.mark.parametrize("n", [2, 3, 4])
def test_top_ngram_frac_zero_is_refused_where_a_single_ngram_is_the_top_one(n):
    with pytest.raises(ConfigError) as e:
        _stage(**{f"top_{n}gram_frac": 0})
    said = str(e.value)
    assert f"top_{n}gram_frac = 0: every document of {n} tokens or more would be set aside" in said
    assert "top_ngram_needs_repeat = true" in said and f"gopher_top_{n}gram in `skip`" in said


def test_top_ngram_frac_zero_means_no_repeat_with_top_ngram_needs_repeat_or_nothing_when_skipped():
    strict = _stage(top_2gram_frac=0, top_ngram_needs_repeat=True)
    assert strict.params["top_2gram_frac"] == 0
    stage = strict.build()
    assert stage.check("one two three four five six seven eight") is None  # no 2-gram repeats
    assert stage.check("one two three one two four five six seven eight nine ten") == "gopher_top_2gram"
    _stage(top_3gram_frac=0, skip=["gopher_top_3gram"])  # the check is off: nothing to refuse


@pytest.mark.parametrize("params, says", [
    ({"top_2gram_frac": -0.1}, "top_2gram_frac = -0.1: must be >= 0"),
    ({"top_3gram_frac": 1.5}, "top_3gram_frac = 1.5: a share, must be between 0 and 1"),
    ({"dup_5gram_frac": float("nan")}, "dup_5gram_frac = nan"),
    ({"dup_para_frac": float("inf")}, "dup_para_frac = inf"),
    ({"top_5gram_frac": 0.1}, "unknown key 'top_5gram_frac'"),
    ({"dup_4gram_frac": 0.1}, "unknown key 'dup_4gram_frac'"),
])
def test_other_nonsense_values_are_refused(params, says):
    with pytest.raises(ConfigError) as e:
        _stage(**params)
    assert says in str(e.value)


def test_the_run_stops_at_start(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"text": f"document {i} with a few words"}) + "\n" for i in range(3)))
    toml = tmp_path / "p.toml"
    toml.write_text(f'[pipeline]\nname = "t"\noutput = "{tmp_path / "out"}"\n[[sources]]\npath = "{src}"\n'
                    '[[stages]]\ntype = "gopher_repetition"\nwords = "regex"\ntop_4gram_frac = 0\n')
    assert curate_main(["run", str(toml), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "top_4gram_frac = 0: every document of 4 tokens or more would be set aside" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()

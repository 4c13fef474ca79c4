"""`pretrain ablate` refuses at start, before any data is made, what it used to drop without a word or let fail
late: a train config `pretrain train` refuses (a top-level key that is not a table, the ablation spec itself or a
blend spec as the config); ``overrides`` of keys the ablation sets in every run (steps, seed, folders, data);
``weights`` whose sum overflows (``[1e308, 1e308]`` became ``weight = 0.0`` in the generated blend) or that give a
folder no share; ``tokens`` whose blend indices cannot fit in memory (failed after tokenizing, asking for "fewer
samples"); variant names one folder on a case-insensitive file system (``b`` and ``B``)."""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from curate.config import ConfigError
from pretrain.ablate.ablation import run_ablation
from pretrain.ablate.spec import load_spec, spec_from_dict
from tests.test_ablate import PROXY, spec_table

from tests.test_ablate_checks import small_data  # noqa: F401 (a fixture)


def _never(run):  # the trainer's command line: no run may start
    raise AssertionError(f"run {run.name} started")


def _quiet(_msg):
    pass


def _nothing_made(out: Path) -> bool:
    return not (out / "data").exists() and not (out / "tokenizer.model").exists() and not (out / "spec.json").exists()


# --- 1. the runs' config goes through `pretrain train`'s checks -------------------------------------------

BAD_CONFIGS = [  # (text before the proxy config, what both refusals say)
    ("hidden = 5  # meant [model] hidden_size\n", r"unknown table \[hidden\]"),
    ("eval = 5\n", r"\[eval\] must be a table"),  # (proxy-tiny.toml has no [eval] table)
]


@pytest.mark.parametrize("head, message", BAD_CONFIGS)
def test_a_config_pretrain_train_refuses_is_refused_by_ablate_at_start(small_data, head, message):
    from pretrain.config import load_config

    config = small_data["tmp"] / "cfg.toml"
    config.write_text(head + PROXY.read_text())
    with pytest.raises(ConfigError, match=message):  # pretrain train --config cfg.toml
        load_config(config)
    out = small_data["tmp"] / "out"
    spec = spec_from_dict(spec_table(small_data, config=str(config)), "spec.toml")
    with pytest.raises(ConfigError, match=message) as e:
        run_ablation(spec, out, log=_quiet, command_for=_never)
    assert f"{config} with the spec's overrides" in str(e.value)
    assert _nothing_made(out)


def test_a_config_override_onto_a_top_level_value_is_refused_not_a_type_error(small_data):
    from pretrain.config import load_config

    config = small_data["tmp"] / "cfg.toml"
    config.write_text("hidden = 5\n" + PROXY.read_text())
    with pytest.raises(ConfigError, match=r"unknown table \[hidden\]"):  # was TypeError: 'int' ... item assignment
        load_config(config, ["hidden.size=3"])


def test_a_spec_naming_itself_as_config_is_refused(small_data):
    from tests.test_ablate import write_spec

    path = small_data["tmp"] / "spec.toml"
    write_spec(path, spec_table(small_data, config=str(small_data["tmp"] / "spec.toml")))
    with pytest.raises(ConfigError, match="is this ablation spec itself"):
        load_spec(path)


def test_an_ablation_or_blend_spec_as_the_config_is_named_for_what_it_is(small_data):
    from pretrain.config import load_config
    from tests.test_ablate import write_spec

    other = small_data["tmp"] / "other_spec.toml"
    write_spec(other, spec_table(small_data))
    blend = small_data["tmp"] / "blend.toml"
    blend.write_text('[[datasets]]\nname = "a"\nprefix = "tokens/a"\nweight = 1\n')
    for config, what in ((other, "is an ablation spec"), (blend, "is a blend spec")):
        with pytest.raises(ConfigError, match=what):
            load_config(config)  # pretrain train says so too
        spec = spec_from_dict(spec_table(small_data, config=str(config)), "spec.toml")
        out = small_data["tmp"] / "out"
        with pytest.raises(ConfigError, match=what):
            run_ablation(spec, out, log=_quiet, command_for=_never)
        assert _nothing_made(out)


# --- 2. overrides of keys the ablation sets ----------------------------------------------------------------

@pytest.mark.parametrize("override, controlled_by", [
    ("train.steps=5", "train.steps: set by the spec's `tokens`"),
    ("train.seed=3", "train.seed: set by the spec's `seeds`"),
    ("model.init_seed=3", "model.init_seed: set by the spec's `seeds`"),
    ("checkpoint.dir=ck", "checkpoint.dir: set by --output"),
    ("log.dir=lg", "log.dir: set by --output"),
    ("data.blend=x.toml", "data.blend: set by the spec's [[variants]]"),
    ("data.kind=synthetic", "data.kind: set by the spec's [[variants]]"),
    ("data.tokenizer=t.model", "data.tokenizer: set by the spec's `tokenizer`"),
    ("data.cache_dir=c", "data.cache_dir: set by --output"),
    ("eval.interval=3", "eval.interval: set by the spec's `eval_points`"),
    ("eval.tasks=[]", "eval.tasks: set by the spec's [[tasks]]"),
])
def test_an_override_of_a_key_the_ablation_sets_is_refused_naming_its_spec_key(small_data, override, controlled_by):
    with pytest.raises(ConfigError, match="overrides set keys the ablation sets") as e:
        spec_from_dict(spec_table(small_data, overrides=["train.lr=1e-3", override]), "spec.toml")
    assert controlled_by in str(e.value)
    assert "train.lr" not in str(e.value)


def test_every_key_refused_is_one_the_run_config_sets_and_the_other_way_round():
    from pretrain.ablate.runs import RUN_KEYS, Run, run_config

    run = Run("a", 1, "/tmp/x", 10, 10240, 1, False)
    tables = run_config({"checkpoint": {"interval": 5}}, run, "b.toml", "t.model", [{"name": "t"}], 2)
    assert tables["checkpoint"]["interval"] == 5  # the config's own interval is kept: not refused
    set_keys = {f"{t}.{k}" for t, values in tables.items() for k in values} - {"checkpoint.interval"}
    assert set_keys == set(RUN_KEYS)


def test_all_refused_overrides_are_named_at_once(small_data):
    with pytest.raises(ConfigError) as e:
        spec_from_dict(spec_table(small_data, overrides=["train.steps=5", "train.seed=3", "checkpoint.dir=c",
                                                         "log.dir=l"]), "spec.toml")
    for key in ("train.steps", "train.seed", "checkpoint.dir", "log.dir"):
        assert f"{key}: set by" in str(e.value)


# --- 3. weights: the blend code's shares --------------------------------------------------------------------

def _weighted(small_data, weights):
    return spec_table(small_data, variants=[
        {"name": "prose", "curated": [str(small_data["prose"]), str(small_data["shuffled"])], "weights": weights},
        {"name": "shuffled", "curated": [str(small_data["shuffled"])]}])


def test_weights_whose_sum_overflows_give_the_shares_the_blend_code_gives(small_data, fake_trainer):
    from pretrain.data.blend_spec import load_blend_spec

    out = small_data["tmp"] / "out"
    spec = spec_from_dict(_weighted(small_data, [1e308, 1e308]), "spec.toml")
    run_ablation(spec, out, log=_quiet, command_for=fake_trainer)
    blend = out / "data" / "prose" / "blend.toml"
    assert [d["weight"] for d in tomllib.loads(blend.read_text())["datasets"]] == [0.5, 0.5]  # was 0.0 and 0.0
    assert [d.weight for d in load_blend_spec(blend).datasets] == [0.5, 0.5]


@pytest.mark.parametrize("weights, message", [
    ([1e-300, 1e300], "no share of the whole"),  # 1e-600 is 0 as a float: a folder listed and never drawn
    ([10 ** 400, 1], "401 digits is too large"),  # was an OverflowError traceback
])
def test_weights_that_give_no_share_are_refused(small_data, weights, message):
    with pytest.raises(ConfigError, match=message):
        spec_from_dict(_weighted(small_data, weights), "spec.toml")


def test_ordinary_and_tiny_weights_keep_their_ratio():
    from pretrain.data.blend import weight_shares

    assert weight_shares([7, 3]) == pytest.approx([0.7, 0.3])
    assert weight_shares([1.5e308, 1e308]) == pytest.approx([0.6, 0.4])
    assert weight_shares([1e-320, 1e-320]) == pytest.approx([0.5, 0.5])


@pytest.fixture
def fake_trainer(tmp_path):
    from tests.test_ablate import FAKE_TRAINER

    script = tmp_path / "fake_trainer.py"
    script.write_text(FAKE_TRAINER)
    return lambda run: [sys.executable, str(script), str(run.config_path)]


# --- 4. tokens whose blend indices cannot fit ---------------------------------------------------------------

def test_tokens_beyond_memory_are_refused_before_tokenizing_naming_tokens(small_data, monkeypatch):
    import curate.host_memory

    monkeypatch.setattr(curate.host_memory, "available_bytes", lambda: 8 * 2 ** 30)
    out = small_data["tmp"] / "out"
    spec = spec_from_dict(spec_table(small_data, tokens=10 ** 20), "spec.toml")
    with pytest.raises(ConfigError, match="tokens = 100,000,000,000,000,000,000 is .* lower tokens") as e:
        run_ablation(spec, out, log=_quiet, command_for=_never)
    assert "samples" not in str(e.value).split("lower tokens")[1]  # the spec has no samples to lower
    assert _nothing_made(out)


def test_the_tokens_suggested_fit(small_data):
    import re

    from pretrain.ablate.runs import check_index_memory, shape_of
    from pretrain.data.blend import least_index_bytes

    have = 3 * 2 ** 30
    spec = spec_from_dict(spec_table(small_data, tokens=10 ** 15), "spec.toml")
    shape = shape_of(spec, have_cuda=False)
    assert least_index_bytes(shape.samples, shape.seq_len) > have
    with pytest.raises(ConfigError, match=r"tokens = ([0-9.e+]+)") as e:
        check_index_memory(spec, shape, have)
    suggested = int(float(re.search(r"tokens = ([0-9.e+]+);", str(e.value)).group(1)))
    fits = spec_from_dict(spec_table(small_data, tokens=suggested), "spec.toml")
    check_index_memory(fits, shape_of(fits, have_cuda=False), have)
    assert suggested > 10 ** 9  # not a needlessly small value
    check_index_memory(spec, shape, None)  # memory unknown: not checked


# --- 6. variant names one folder on a case-insensitive file system ------------------------------------------

def test_variant_names_differing_only_in_case_are_refused(small_data):
    table = spec_table(small_data, baseline="B", variants=[{"name": "b", "curated": [str(small_data["prose"])]},
                                                           {"name": "B", "curated": [str(small_data["shuffled"])]}])
    with pytest.raises(ConfigError, match="'b' and 'B' differ only in case"):
        spec_from_dict(table, "spec.toml")


def test_task_names_differing_only_in_case_are_refused_before_any_data(small_data):
    """Their curves, DIR/curves/TASK_METRIC.png, are one file on a case-insensitive file system."""
    tasks = [{"name": n, "kind": "bpb", "path": str(small_data["eval"])} for n in ("Prose", "prose")]
    out = small_data["tmp"] / "out"
    spec = spec_from_dict(spec_table(small_data, tasks=tasks), "spec.toml")
    with pytest.raises(ConfigError, match="'Prose' and 'prose' differ only in case"):
        run_ablation(spec, out, log=_quiet, command_for=_never)
    assert _nothing_made(out)

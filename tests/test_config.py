"""Training config: TOML tables, --set overrides, and the checks that run before any process group exists, with
messages that say what to change."""
from __future__ import annotations

from pathlib import Path

import pytest

from pretrain.config import (
    ConfigError,
    batch_size_at,
    check,
    finalize,
    load_config,
    padded_vocab,
    parse_override,
    total_train_samples,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "pretrain" / "configs" / "tiny.toml"


SYNTH = ["data.kind='synthetic'", "model.vocab_size=256"]


def cfg(*overrides):
    return load_config(TINY, SYNTH + list(overrides))


def errors(c, world):
    with pytest.raises(ConfigError) as e:
        check(c, world)
    return str(e.value)


def test_tiny_example_config_is_valid():
    shipped = load_config(TINY)  # trains on the repository's sample (the demo blend)
    check(shipped, 1)
    assert shipped.data.kind == "blend" and (ROOT / shipped.data.blend).is_file()
    shipped.parallel.tp = shipped.parallel.pp = 2
    check(shipped, 4)  # and fits the CLI's torchrun example (tp 2 x pp 2)
    c = cfg()
    check(c, 1)
    finalize(c, 1)
    assert c.parallel.dp == 1 and c.model.max_seq_len == c.data.seq_len == 64
    assert c.model.ffn_hidden_size == 4 * c.model.hidden_size


def test_overrides_parse_toml_values():
    assert parse_override("parallel.tp=2") == ("parallel", "tp", 2)
    assert parse_override("train.lr=3e-4") == ("train", "lr", 3e-4)
    assert parse_override("parallel.sequence_parallel=true") == ("parallel", "sequence_parallel", True)
    assert parse_override("data.kind=synthetic") == ("data", "kind", "synthetic")  # bare word: a string
    assert parse_override("train.rampup_batch_size=[32, 32, 1000]") == ("train", "rampup_batch_size", [32, 32, 1000])
    c = cfg("parallel.tp=2", "train.steps=7", "checkpoint.dir=/tmp/x y")
    assert (c.parallel.tp, c.train.steps, c.checkpoint.dir) == (2, 7, "/tmp/x y")
    with pytest.raises(ConfigError, match="table.key=value"):
        parse_override("tp=2")


def test_unknown_keys_and_wrong_types_are_named():
    with pytest.raises(ConfigError, match="unknown key parallel.tensor"):
        cfg("parallel.tensor=2")
    with pytest.raises(ConfigError, match=r"unknown table \[trian\]"):
        cfg("trian.steps=2")
    with pytest.raises(ConfigError, match="train.steps: expected an integer"):
        cfg("train.steps='ten'")
    with pytest.raises(ConfigError, match="parallel.sequence_parallel: expected true or false"):
        cfg("parallel.sequence_parallel=1")


@pytest.mark.parametrize("overrides, world, message", [
    (["parallel.tp=2", "parallel.pp=2"], 6, "world size 6 is not divisible by tp * pp = 2 * 2 = 4"),
    (["parallel.tp=3"], 3, "model.num_heads = 4 is not divisible by parallel.tp = 3"),
    (["parallel.pp=3"], 3, "model.num_layers = 4 is not divisible by pp * vpp = 3 * 1 = 3"),
    (["parallel.pp=2", "parallel.vpp=4"], 2, "not divisible by pp * vpp = 2 * 4 = 8"),
    (["parallel.dp=2", "train.global_batch=12", "train.micro_batch=4"], 2,
     "train.global_batch = 12 is not divisible by micro_batch * dp = 4 * 2 = 8"),
    (["parallel.sequence_parallel=true"], 1, "sequence_parallel = true needs tensor parallelism"),
    (["parallel.tp=2", "model.make_vocab_size_divisible_by=0", "model.vocab_size=255"], 2,
     "vocabulary 255 is not divisible by parallel.tp = 2"),
    (["parallel.dp=4"], 2, "set parallel.dp = 2"),
    (["parallel.vpp=2"], 1, "parallel.vpp = 2 needs pipeline parallelism"),
    (["parallel.pp=2", "train.global_batch=4"], 2, "the pipeline needs at least pp micro-batches"),
    (["parallel.tp=2", "parallel.sequence_parallel=true", "data.seq_len=63"], 2,
     "data.seq_len = 63 is not divisible by parallel.tp = 2"),
    (["train.rampup_batch_size=[4, 4, 100]", "train.micro_batch=8"], 1, "must be multiples of micro_batch * dp"),
    (["data.kind='blend'", "data.blend=''"], 1, "data.blend is not set"),
    (["parallel.pp=2", "train.rampup_batch_size=[4, 4, 100]"], 2, "fewer than pp = 2: start at 8 or more"),
    (["model.norm='batchnorm'"], 1, "model.norm = 'batchnorm': use one of layernorm, rmsnorm"),
])
def test_checks_say_what_to_change(overrides, world, message):
    assert message in errors(cfg(*overrides), world)


def test_all_problems_reported_at_once():
    text = errors(cfg("parallel.tp=3", "parallel.pp=3", "parallel.sequence_parallel=true"), 9)
    assert "num_heads" in text and "num_layers" in text
    assert "tp" in text


def test_vocab_padding_to_128_times_tp():
    assert padded_vocab(50257, 128, 1) == 50304
    assert padded_vocab(50257, 128, 8) == 51200
    assert padded_vocab(256, 128, 2) == 256
    assert padded_vocab(255, 0, 2) == 255
    c = cfg("model.vocab_size=1000", "parallel.tp=4")
    finalize(c, 4)
    assert c.model.padded_vocab_size == 1024 and c.model.vocab_size == 1000


def test_batch_size_rampup_mt_nlg_style():
    """MT-NLG: start 32, +32 per stage, up to the global batch over a sample budget."""
    c = cfg("train.global_batch=128", "train.micro_batch=32", "train.rampup_batch_size=[32, 32, 300]")
    check(c, 1)
    # 3 increments over 300 samples: 100 samples per stage
    assert [batch_size_at(c, n) for n in (0, 64, 96, 100, 199, 200, 299, 300, 10**6)] == \
        [32, 32, 32, 64, 64, 96, 96, 128, 128]
    c.train.steps = 6
    # consumed before each step: 0, 32, 64, 96 (batch 32), 128, 192 (batch 64) -> 256
    assert total_train_samples(c) == 32 * 4 + 64 * 2
    assert total_train_samples(cfg("train.steps=5", "train.global_batch=16")) == 80


@pytest.mark.parametrize("override, message", [
    ("train.lr=-1e-3", "train.lr = -0.001: must be >= 0"),
    ("train.lr=nan", "train.lr = nan: must be a finite number"),
    ("train.min_lr=-1e-5", "train.min_lr = -1e-05: must be >= 0"),
    ("train.min_lr=1.0", "train.min_lr = 1.0 is above train.lr = 0.003"),
    ("train.lr=1e300", "train.lr = 1e+300: above the largest float32"),  # failed inside Adam (no float32 holds it)
    ("train.compile_backend=nonexistent", "train.compile_backend = 'nonexistent': not a torch.compile backend"),
    ("train.warmup_steps=-5", "train.warmup_steps = -5: must be >= 0"),
    ("train.grad_clip=-1", "train.grad_clip = -1.0: must be >= 0 (0 turns clipping off)"),
    ("train.grad_clip=inf", "train.grad_clip = inf: must be a finite number"),
    ("train.beta1=1.0", "train.beta1 = 1.0: must be in [0, 1)"),
    ("train.beta2=-0.1", "train.beta2 = -0.1: must be in [0, 1)"),
    ("train.eps=0", "train.eps = 0.0: must be > 0"),
    ("train.weight_decay=-0.1", "train.weight_decay = -0.1: must be >= 0"),
    ("train.decay_steps=2", "train.decay_steps = 2 is shorter than train.warmup_steps = 5"),
    ("model.init_std=0", "model.init_std = 0.0: must be > 0"),
    ("model.norm_eps=-1e-5", "model.norm_eps = -1e-05: must be > 0"),
    ("model.norm_eps=1e308", "model.norm_eps = 1e+308: must be > 0 and below 1"),
    ("model.vocab_size=0", "model.vocab_size = 0: must be at least 1"),
    ("model.ffn_hidden_size=0", "model.ffn_hidden_size = 0: must be at least 1"),  # was a ZeroDivisionError
    ("model.ffn_hidden_size=-1", "model.ffn_hidden_size = -1: must be at least 1"),
    ("checkpoint.interval=-1", "checkpoint.interval = -1: must be >= 0"),
    ("checkpoint.on_damage='ignore'", "checkpoint.on_damage = 'ignore': use fallback"),
    ("data.order='random'", "data.order = 'random': use stable"),
    ("log.interval=0", "log.interval = 0: must be at least 1"),
    ("train.seed=-1", "train.seed = -1: must be in [0, 2**32 - 1]"),  # numpy raised deep inside the run
    ("model.init_seed=4294967296", "model.init_seed = 4294967296: must be in [0, 2**32 - 1]"),
])
def test_nonsense_values_are_refused_with_what_to_change(override, message):
    assert message in errors(cfg(override), 1)


def test_nonsense_values_stop_the_cli_before_training_without_a_traceback(capsys):
    from pretrain.cli import main

    assert main(["train", "--config", str(TINY), "--set", "data.kind=synthetic", "--set", "model.vocab_size=256",
                 "--set", "train.lr=-3e-4", "--set", "train.beta2=1.5"]) == 2
    err = capsys.readouterr().err
    assert "train.lr = -0.0003: must be >= 0" in err and "train.beta2 = 1.5" in err and "Traceback" not in err


@pytest.mark.parametrize("key", ["checkpoint.dir", "log.dir", "data.cache_dir"])
def test_a_folder_that_is_a_file_or_below_one_is_refused_at_start(key, tmp_path):
    """mkdir raised FileExistsError (a device, a file) or NotADirectoryError (below a file) once the run had
    started: a traceback. Each is named at start; a folder that is missing is made."""
    (tmp_path / "a_file").write_text("x")
    assert f"{key} = '/dev/zero' is not a folder" in errors(cfg(f"{key}='/dev/zero'"), 1)
    below = str(tmp_path / "a_file" / "sub")
    assert f"is below {tmp_path / 'a_file'}, which is not a folder" in errors(cfg(f"{key}='{below}'"), 1)
    check(cfg(f"{key}='{tmp_path / 'new' / 'folder'}'"), 1)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")  # a link to nothing: mkdir fails there too
    assert "dangling' is not a folder" in errors(cfg(f"{key}='{tmp_path / 'dangling'}'"), 1)
    (tmp_path / "real").mkdir()
    (tmp_path / "to_folder").symlink_to(tmp_path / "real")  # a link to a folder is one
    check(cfg(f"{key}='{tmp_path / 'to_folder' / 'run'}'"), 1)


def test_each_problem_is_named_once():
    text = errors(cfg("train.lr=nan", "train.min_lr=-1.0"), 1)
    assert text.count("train.lr = nan") == 1 and text.count("train.min_lr = -1.0") == 1


def test_total_train_samples_of_a_huge_step_count_is_immediate():
    c = cfg("train.steps=100000000000", "train.global_batch=16")
    assert total_train_samples(c) == 16 * 10 ** 11  # was one loop iteration per step
    c = cfg("train.steps=100000000000", "train.global_batch=128", "train.rampup_batch_size=[32, 32, 300]")
    assert total_train_samples(c) == 32 * 4 + 64 * 2 + 96 * 1 + 128 * (10 ** 11 - 7)
    # a ramp over 10^15 samples: was a step at a time through the ramp (`pretrain train` never started)
    c = cfg("train.steps=100000000000", "train.global_batch=16", "train.rampup_batch_size=[4, 4, 1000000000000000]")
    assert 4 * 10 ** 11 <= total_train_samples(c) <= 16 * 10 ** 11


def test_total_train_samples_equals_the_step_by_step_sum_on_random_ramps():
    import random

    from pretrain.config import batch_size_at

    rng = random.Random(1)
    for _ in range(500):
        gbs = rng.choice([1, 3, 8, 96, 1000])
        c = cfg(f"train.global_batch={gbs}", f"train.steps={rng.choice([0, 1, 5, 17, 1000])}")
        if rng.random() < 0.8:
            c.train.rampup_batch_size = [rng.randint(1, gbs), rng.randint(1, gbs), rng.choice([0, 7, 333, 5000])]
        consumed = 0
        for _ in range(c.train.steps):
            consumed += batch_size_at(c, consumed)
        assert total_train_samples(c) == consumed, (c.train.global_batch, c.train.rampup_batch_size, c.train.steps)

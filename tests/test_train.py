"""`pretrain train`: one process through the CLI (loss goes down, metrics.jsonl / TensorBoard / eval), config
errors before any process group, resume to train.steps, data order, LR schedule, batch ramp-up, the real blend
datasets, and `torchrun -m pretrain train` with 2 processes."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pretrain.cli import main as cli_main
from pretrain.config import load_config
from pretrain.model import num_params
from pretrain.data.batches import SyntheticDataset, local_batch
from pretrain.metrics import NonFiniteError
from pretrain.optim import LRSchedule
from tests.distributed_helpers import config_dict, run_distributed, tiny_config, train_losses

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "pretrain" / "configs" / "tiny.toml"
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
SYNTH = ["--set", "data.kind=synthetic", "--set", "model.vocab_size=256"]  # tiny.toml without the demo's tokens


def metrics(log_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines()]


def test_cli_single_process_trains_and_logs(tmp_path):
    args = [sys.executable, "-m", "pretrain", "train", "--config", str(TINY), *SYNTH, "--set", "train.steps=24",
            "--set", "train.eval_interval=12", "--set", f"log.dir='{tmp_path}/log'",
            "--set", f"checkpoint.dir='{tmp_path}/ckpt'", "--set", "checkpoint.interval=0",
            "--set", "data.seq_len=32", "--set", "train.warmup_steps=2"]
    out = subprocess.run(args, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = metrics(tmp_path / "log")
    assert [r["step"] for r in rows] == list(range(1, 25))
    for r in rows:
        assert {"step", "loss", "lr", "grad_norm", "tokens_per_s", "mfu", "hfu"} <= set(r)
        assert r["tokens_per_s"] > 0 and 0 < r["mfu"] < 1 and r["hfu"] == r["mfu"]  # no recompute: HFU = MFU
        assert r["global_batch"] == 16
    assert rows[-1]["loss"] < rows[0]["loss"] - 0.5  # it learns the synthetic sequences
    assert rows[0]["lr"] == pytest.approx(1.5e-3) and rows[1]["lr"] == pytest.approx(3e-3)
    assert [r["step"] for r in rows if "val_loss" in r] == [12, 24]
    assert rows[-1]["val_loss"] < rows[11]["val_loss"]
    assert list((tmp_path / "log" / "tensorboard").glob("events.out.tfevents.*"))
    assert "step 24 | loss" in out.stdout and "of measured matmul peak" in out.stdout  # CPU: no vendor peak
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == "step_00000024"  # the final checkpoint


def test_config_errors_exit_before_any_process_group(monkeypatch, capsys):
    monkeypatch.setenv("WORLD_SIZE", "6")  # as under torchrun --nproc-per-node 6; no rendezvous is attempted
    monkeypatch.setenv("RANK", "0")
    code = cli_main(["train", "--config", str(TINY), *SYNTH, "--set", "parallel.tp=2", "--set", "parallel.pp=2",
                     "--set", "parallel.sequence_parallel=false"])
    assert code == 2
    err = capsys.readouterr().err
    assert "world size 6 is not divisible by tp * pp = 2 * 2 = 4" in err


def test_missing_data_says_how_to_get_it(tmp_path, capsys):
    code = cli_main(["train", "--config", str(TINY), "--set", f"data.tokenizer='{tmp_path}/none.model'"])
    assert code == 2
    assert "make demo" in capsys.readouterr().err
    spec = tmp_path / "b.toml"
    spec.write_text(f'[[datasets]]\nname = "web"\nprefix = "{tmp_path}/web"\nweight = 1.0\n')
    code = cli_main(["train", "--config", str(TINY), "--set", "model.vocab_size=256", "--set", f"data.blend='{spec}'"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"dataset 'web' has no {tmp_path}/web.bin" in err and "data.kind=synthetic" in err


def test_resume_trains_on_to_train_steps(tmp_path):
    common = {"checkpoint.dir": str(tmp_path / "ckpt"), "log.dir": str(tmp_path / "log"), "train.decay_steps": 5}
    first = train_losses(config_dict(tiny_config({**common, "train.steps": 3})))
    assert sorted(first["losses"]) == [1, 2, 3]
    second = train_losses(config_dict(tiny_config({**common, "train.steps": 5})))
    assert sorted(second["losses"]) == [4, 5] and second["consumed_samples"] == 40
    assert [r["step"] for r in metrics(tmp_path / "log")] == [1, 2, 3, 4, 5]
    done = train_losses(config_dict(tiny_config({**common, "train.steps": 5})))  # nothing left to do
    assert done["losses"] == {} and done["step"] == 5


def test_resume_with_a_smaller_global_batch_reads_on_past_the_new_plan(tmp_path):
    """3 steps of 8 samples, then 2 of 4: the new config's plan (5 x 4 = 20 samples) ends before the 24 the
    checkpoint consumed; the data is built for the samples the run reads (it raised IndexError)."""
    common = {"checkpoint.dir": str(tmp_path / "ckpt"), "log.dir": "", "train.decay_steps": 5}
    train_losses(config_dict(tiny_config({**common, "train.steps": 3})))
    second = train_losses(config_dict(tiny_config({**common, "train.steps": 5, "train.global_batch": 4})))
    assert sorted(second["losses"]) == [4, 5] and second["consumed_samples"] == 3 * 8 + 2 * 4


def test_data_parallel_ranks_split_the_global_batch_in_order():
    ds = SyntheticDataset(100, 8, 256, seed=3)
    whole = local_batch(ds, 16, n_micro=4, mbs=2, dp=1, dp_rank=0).numpy()
    assert np.array_equal(whole, np.stack([ds[i] for i in range(16, 24)]))
    r0 = local_batch(ds, 16, n_micro=2, mbs=2, dp=2, dp_rank=0).numpy()
    r1 = local_batch(ds, 16, n_micro=2, mbs=2, dp=2, dp_rank=1).numpy()
    # micro-batch j of rank r: samples 16 + (2 j + r) * 2 + [0, 2)
    assert np.array_equal(r0, whole[[0, 1, 4, 5]]) and np.array_equal(r1, whole[[2, 3, 6, 7]])
    assert np.array_equal(ds[5], SyntheticDataset(100, 8, 256, seed=3)[5])
    assert ds[5].dtype == np.int64 and ds[5].shape == (9,)


def test_lr_warmup_then_cosine_to_floor():
    cfg = load_config(TINY, ["train.lr=1.0", "train.min_lr=0.1", "train.warmup_steps=4", "train.steps=14"])
    s = LRSchedule(cfg)
    assert [s.lr_at(i) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert s.lr_at(4) == 1.0
    assert s.lr_at(9) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))
    assert s.lr_at(14) == s.lr_at(100) == 0.1
    assert all(s.lr_at(i) >= s.lr_at(i + 1) for i in range(4, 20))


@pytest.mark.slow
def test_batch_rampup_under_pipeline_parallelism_matches_one_process():
    """Ramp 4 -> 8 samples: the pipeline runs 2 then 4 micro-batches per step (a schedule per count)."""
    ramp = {"train.rampup_batch_size": [4, 4, 12], "train.steps": 5, "train.lr": 5e-3}
    ref = run_distributed(1, train_losses, config_dict(tiny_config(ramp)))[0]
    pp = run_distributed(2, train_losses, config_dict(tiny_config({**ramp, "parallel.pp": 2})))[0]
    assert ref["consumed_samples"] == pp["consumed_samples"] == 4 + 4 + 4 + 8 + 8
    for step in range(1, 6):
        assert pp["losses"][step] == pytest.approx(ref["losses"][step], rel=1e-5)


@pytest.mark.slow
def test_torchrun_two_processes(tmp_path):
    """`torchrun --nproc-per-node 2 -m pretrain train` (pp = 2) logs the single-process run's losses."""
    common = ["--config", str(TINY), *SYNTH, "--set", "train.steps=4", "--set", "log.tensorboard=false",
              "--set", "model.hidden_size=32", "--set", "data.seq_len=32", "--set", "train.eval_interval=2",
              "--set", "checkpoint.interval=0"]
    one = subprocess.run([sys.executable, "-m", "pretrain", "train", *common, "--set", f"log.dir='{tmp_path}/one'",
                          "--set", f"checkpoint.dir='{tmp_path}/c1'"],
                         cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert one.returncode == 0, one.stdout + one.stderr
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                          "--master-addr", "127.0.0.1", "--master-port", str(_free_port()),
                          "-m", "pretrain", "train", *common, "--set", "parallel.pp=2",
                          "--set", f"log.dir='{tmp_path}/two'", "--set", f"checkpoint.dir='{tmp_path}/c2'"],
                         cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=300)
    assert two.returncode == 0, two.stdout + two.stderr
    a, b = metrics(tmp_path / "one"), metrics(tmp_path / "two")
    assert [r["step"] for r in b] == [1, 2, 3, 4]  # rank 0 alone writes the log
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], rel=1e-5)
        assert ("val_loss" in rb) == ("val_loss" in ra) == (rb["step"] % 2 == 0)
        if "val_loss" in ra:  # evaluation through the pipeline schedule's forward-only mode
            assert rb["val_loss"] == pytest.approx(ra["val_loss"], rel=1e-5)
    meta = json.loads((tmp_path / "c2" / "step_00000004" / "meta.json").read_text())
    assert meta["layout"]["pp"] == 2 and meta["world_size"] == 2


def _free_port() -> int:
    from tests.distributed_helpers import free_port

    return free_port()


def test_trains_on_a_blend_of_indexed_datasets(tmp_path):
    """The real data path: a hand-made .bin/.idx (pretrain.data.indexed writer), a blend spec, the vocabulary size read
    from a sentencepiece model; the trainer reads the train split in order 0, 1, 2, ..."""
    import sentencepiece as spm

    from pretrain.data.blend import build_blend_splits
    from pretrain.data.indexed import IndexedDatasetBuilder

    tok = tmp_path / "tok.model"
    words = [" ".join(f"w{(i * 7 + j) % 50}" for j in range(12)) for i in range(200)]
    with open(tok, "wb") as f:
        spm.SentencePieceTrainer.train(sentence_iterator=iter(words), model_writer=f, vocab_size=40,
                                       model_type="bpe", user_defined_symbols=["<eod>"], minloglevel=2,
                                       num_threads=1)
    from pretrain.data.tokenizer import load_tokenizer

    vocab = load_tokenizer(tok).vocab_size
    assert vocab == 40
    rng = np.random.default_rng(0)
    for name in ("web", "books"):
        with IndexedDatasetBuilder(tmp_path / name, dtype=np.uint16) as b:
            for _ in range(120):
                doc = rng.integers(3, vocab, rng.integers(10, 40))
                b.add_document(np.append(doc, 2))
    spec = tmp_path / "blend.toml"
    spec.write_text(f'split = "90,10,0"\n[[datasets]]\nname = "web"\nprefix = "{tmp_path}/web"\nweight = 0.7\n'
                    f'[[datasets]]\nname = "books"\nprefix = "{tmp_path}/books"\nweight = 0.3\n')
    overrides = {"data.kind": "blend", "data.blend": str(spec), "data.tokenizer": str(tok), "data.seq_len": 16,
                 "train.steps": 3, "train.eval_interval": 3, "train.eval_iters": 1,
                 "data.cache_dir": str(tmp_path / "cache"), "log.dir": str(tmp_path / "log"),
                 "checkpoint.dir": str(tmp_path / "ckpt")}
    raw = config_dict(tiny_config(overrides))
    del raw["model"]["vocab_size"]  # from the tokenizer
    res = train_losses(raw)
    assert sorted(res["losses"]) == [1, 2, 3] and all(math.isfinite(v) for v in res["losses"].values())
    assert math.isfinite(res["val_losses"][3])
    assert list((tmp_path / "cache").rglob("*.npy"))
    saved = json.loads((tmp_path / "ckpt" / "step_00000003" / "model_config.json").read_text())
    assert (saved["vocab_size"], saved["padded_vocab_size"]) == (40, 128)
    train_ds, _, _ = build_blend_splits(str(spec), 16, (24, 8, 0), 7, tmp_path / "cache")
    assert len(train_ds) >= 24
    got = local_batch(train_ds, 8, n_micro=4, mbs=2, dp=1, dp_rank=0).numpy()  # step 2's batch
    assert np.array_equal(got, np.stack([train_ds[i] for i in range(8, 16)]))
    assert got.max() < vocab
    # data tokenized with a larger vocabulary: the run stops naming the token, before the embedding sees it
    with IndexedDatasetBuilder(tmp_path / "wide", dtype=np.uint16) as b:
        for _ in range(120):
            b.add_document(np.append(rng.integers(3, 300, rng.integers(10, 40)), 2))
    spec.write_text(f'split = "90,10,0"\n[[datasets]]\nname = "wide"\nprefix = "{tmp_path}/wide"\nweight = 1\n')
    raw["checkpoint"]["dir"] = str(tmp_path / "ckpt-wide")
    with pytest.raises(ValueError, match=r"token id \d+, outside the model's vocabulary of 40"):
        train_losses(raw)
    assert not list((tmp_path / "ckpt-wide").glob("step_*"))


def test_non_finite_loss_stops_before_any_checkpoint(tmp_path, capsys):
    """lr = 1e30: step 1 is finite and checkpointed, step 2's loss is not; the run stops with a message and
    writes no checkpoint after step 1 (latest stays on it)."""
    ck = tmp_path / "ckpt"
    over = {"train.lr": 1e30, "train.min_lr": 1e30, "train.warmup_steps": 0, "train.grad_clip": 0.0,
            "train.steps": 4, "checkpoint.dir": str(ck), "checkpoint.interval": 1, "log.interval": 4}
    with pytest.raises(NonFiniteError, match=r"step 2: .*not finite.*before writing a checkpoint"):
        train_losses(config_dict(tiny_config(over)))
    assert sorted(p.name for p in ck.glob("step_*")) == ["step_00000001"]
    assert (ck / "latest").read_text().strip() == "step_00000001"
    # the command line: exit code 3 and the message, nothing saved past step 1
    code = cli_main(["train", "--config", str(TINY), *SYNTH, "--set", "train.lr=1e30", "--set", "train.min_lr=1e30",
                     "--set", "train.grad_clip=0.0", "--set", "train.warmup_steps=0", "--set", "train.steps=6",
                     "--set", f"checkpoint.dir='{tmp_path}/c2'", "--set", "checkpoint.interval=3",
                     "--set", "log.dir=''", "--set", "data.seq_len=16", "--set", "model.num_layers=2"])
    assert code == 3
    err = capsys.readouterr().err
    assert "not finite" in err and "no checkpoint was written" in err
    assert not list((tmp_path / "c2").glob("step_*"))


@pytest.mark.slow
def test_metrics_are_fetched_once_per_log_interval(monkeypatch):
    """No host synchronisation per step: 4 more steps with log.interval = 4 cost exactly one more fetch of
    device values (Tensor.item / tolist / float / bool calls), not one per step. (AdamW reads its step counters,
    host-side tensors unless fused or capturable, with .item(): not a device synchronisation, not counted.)"""
    import sys as _sys

    import torch

    calls = {"n": 0}
    for name in ("item", "tolist", "__float__", "__bool__", "__int__"):
        orig = getattr(torch.Tensor, name)

        def wrapper(self, *a, _orig=orig, **k):
            caller = _sys._getframe(1).f_code.co_filename
            if "torch/optim/" not in caller.replace("\\", "/"):
                calls["n"] += 1
            return _orig(self, *a, **k)

        monkeypatch.setattr(torch.Tensor, name, wrapper)
    counts = {}
    for steps in (4, 8):
        calls["n"] = 0
        res = train_losses(config_dict(tiny_config({"train.steps": steps, "log.interval": 4})))
        assert sorted(res["losses"]) == list(range(1, steps + 1))
        counts[steps] = calls["n"]
    assert counts[8] - counts[4] == 1, counts


def test_prefetcher_builds_batches_in_order_and_passes_errors_on():
    import torch

    from pretrain.prefetch import Prefetcher

    ds = SyntheticDataset(200, 8, 256, seed=3)
    plan = [(0, 2), (4, 2), (12, 1)]
    pf = Prefetcher(lambda first, n: local_batch(ds, first, n, 2, 1, 0), plan, torch.device("cpu"))
    for first, n in plan:
        assert torch.equal(pf.next(), local_batch(ds, first, n, 2, 1, 0))
    with pytest.raises(StopIteration):
        pf.next()
    pf.close()
    bad = Prefetcher(lambda first, n: local_batch(ds, first, n, 2, 1, 0), [(0, 1), (199, 1)], torch.device("cpu"))
    bad.next()
    with pytest.raises(IndexError):
        bad.next()
    bad.close()
    # get_batch (one vectorised call) gives the per-sample values
    idx = np.array([5, 0, 17])
    assert np.array_equal(ds.get_batch(idx), np.stack([ds[i] for i in idx]))


@pytest.mark.parametrize("override", ["model.hidden_size=10000000", "data.seq_len=1000000000", "model.num_layers=100000",
                                      # a step's tokens: was an out-of-memory kill after a minute (2^31) or a
                                      # numpy allocation traceback at the first step (10^12)
                                      "train.global_batch=2147483648", "train.global_batch=1000000000000"])
def test_a_config_that_cannot_fit_stops_at_start_saying_what_to_change(override, tmp_path, capsys):
    rc = cli_main(["train", "--config", str(ROOT / "pretrain/configs/tiny.toml"), "--set", "data.kind=synthetic",
                   "--set", "model.vocab_size=64", "--set", "train.steps=1", "--set", override,
                   "--set", f"checkpoint.dir='{tmp_path / 'ck'}'", "--set", "log.dir=''"])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot fit" in err and "lower model.hidden_size" in err and "Traceback" not in err
    assert override.split("=")[0] in err
    assert not (tmp_path / "ck").exists()


def test_the_memory_lower_bound_counts_parameters_from_below():
    import torch

    from pretrain.config import finalize
    from pretrain.fits import param_count
    from pretrain.model import GPT

    for over in ([], ["model.mlp='swiglu'", "model.position='rope'", "model.tie_embeddings=false"]):
        cfg = load_config(ROOT / "pretrain/configs/tiny.toml", ["data.kind='synthetic'", "model.vocab_size=300", *over])
        finalize(cfg, 1)
        with torch.device("meta"):
            real = num_params(GPT(cfg.model))
        assert 0.95 * real <= param_count(cfg) <= real  # never above: the check must not refuse what fits

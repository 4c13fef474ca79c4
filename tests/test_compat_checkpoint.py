"""A checkpoint written by the code before the pretrain/ split (issue 19; tests/data/compat/checkpoint: 1 layer,
hidden 16, vocab 128, 2 steps on synthetic tokens) still resumes to the same losses and generates the same tokens.
The expected values (tests/data/compat/expected.json) were computed by that code, in one thread."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.distributed_helpers import config_dict, run_distributed, tiny_config, train_losses

DATA = Path(__file__).resolve().parent / "data" / "compat"
MODEL = {"model.num_layers": 1, "model.hidden_size": 16, "model.num_heads": 2, "model.vocab_size": 128,
         "data.seq_len": 16}


def expected() -> dict:
    return json.loads((DATA / "expected.json").read_text())


def test_old_checkpoint_resumes_to_the_same_losses(tmp_path):
    shutil.copytree(DATA / "checkpoint", tmp_path / "ckpt")
    cfg = tiny_config({**MODEL, "train.steps": 4, "checkpoint.dir": str(tmp_path / "ckpt")})
    out = run_distributed(1, train_losses, config_dict(cfg))[0]
    assert {str(k): v for k, v in out["losses"].items()} == expected()["losses"]
    assert {str(k): v for k, v in out["grad_norms"].items()} == expected()["grad_norms"]


def test_old_checkpoint_generates_the_same_tokens():
    from pretrain.checkpoint import load_model_for_inference
    from pretrain.generate import generate_ids

    model, _ = load_model_for_inference(DATA / "checkpoint")
    assert generate_ids(model, [1, 2, 3], 8, temperature=0.8, top_k=20, seed=1) == expected()["gen"]

"""`pretrain export-hf`: the exported folder loads in transformers offline, gives Quarry's logits within 1e-4 on the
same tokens (GPT2LMHeadModel and LlamaForCausalLM), greedy-decodes the same tokens, and carries a tokenizer that
encodes like the sentencepiece model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from pretrain.config import Config, finalize  # noqa: E402
from pretrain.export_hf import ExportError, export_model, hf_architecture, rope_interleaved_to_half  # noqa: E402
from pretrain.generate import generate_ids  # noqa: E402
from pretrain.model import GPT, apply_rope, rope_cache  # noqa: E402
from pretrain.data.tokenizer import load_tokenizer  # noqa: E402
from tests.conftest import DATA, ROOT  # noqa: E402

# single-process checkpoint load/save: DCP warns that no process group exists
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")

PROSE = DATA / "hf" / "austen_emma.jsonl"
VOCAB = 400


def prose_lines() -> list[str]:
    return [line for doc in PROSE.read_text().splitlines() for line in json.loads(doc)["text"].splitlines()
            if line.strip()]


def train_quarry_tokenizer(folder, model_type="bpe", vocab_size=VOCAB):
    """Quarry's tokenizer (``pretrain.data.tokenizer.train_tokenizer``: identity normalization, "\\n" piece, byte
    fallback, EOD = </s>) trained on Austen, through a one-shard curation output folder."""
    import pyarrow as pa

    from curate.shards import shard_entry, write_json, write_shard
    from pretrain.data.tokenizer import train_tokenizer

    folder = Path(folder)
    docs = [json.loads(line) for line in PROSE.read_text().splitlines()]
    table = pa.table({"id": [d["id"] for d in docs], "text": [d["text"] for d in docs]})
    write_shard(table, folder / "curated" / "part-00000.arrow")
    write_json({"shards": [shard_entry(folder / "curated" / "part-00000.arrow", folder / "curated")], "dropped": []},
               folder / "curated" / "manifest.json")
    return train_tokenizer(folder / "curated", vocab_size, folder / f"tok_{model_type}.model",
                           model_type=model_type, threads=1).model_path


def cached(tmp_path_factory, name, make):
    """``make(folder)`` once per test session (the tokenizer and checkpoints are shared by several test files)."""
    folder = tmp_path_factory.getbasetemp() / "quarry_shared" / name
    done = folder / ".done.json"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        done.write_text(json.dumps(make(folder)))
    return json.loads(done.read_text())


def quarry_tokenizer(tmp_path_factory, model_type="bpe") -> Path:
    return Path(cached(tmp_path_factory, f"tok_{model_type}", lambda d: train_quarry_tokenizer(d, model_type)))


TRAIN_TOML = """
[model]
hidden_size = 32
num_layers = 2
num_heads = 2
norm = "{norm}"
position = "{position}"
mlp = "{mlp}"
[train]
steps = 4
micro_batch = 2
global_batch = 2
lr = 1e-2
eval_interval = 2
[data]
kind = "synthetic"
tokenizer = "{tokenizer}"
seq_len = 16
[checkpoint]
dir = "{folder}/ckpt"
[log]
dir = "{folder}/logs"
tensorboard = false
"""


def trained_checkpoint(tmp_path_factory, arch="gpt2") -> tuple[Path, Path]:
    """(checkpoint dir, log dir) of a 4-step `pretrain train` run of a tiny GPT-2- or Llama-style model; the run's
    config records the Quarry tokenizer as data.tokenizer."""
    tok = quarry_tokenizer(tmp_path_factory)
    opts = {k: v for k, v in ARCHS[arch].items() if k in ("norm", "position", "mlp")}

    def make(folder):
        (folder / "train.toml").write_text(TRAIN_TOML.format(tokenizer=tok, folder=folder, **opts))
        proc = subprocess.run([sys.executable, "-m", "pretrain", "train", "--config", str(folder / "train.toml")],
                              cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return [str(folder / "ckpt"), str(folder / "logs")]

    ckpt, logs = cached(tmp_path_factory, f"ckpt_{arch}", make)
    return Path(ckpt), Path(logs)


@pytest.fixture(scope="module")
def spm_model(tmp_path_factory):
    return quarry_tokenizer(tmp_path_factory)


def tiny_model(seed=0, **model_kw):
    cfg = Config()
    cfg.data.kind, cfg.data.seq_len = "synthetic", 32
    for k, v in dict(vocab_size=VOCAB, hidden_size=64, num_layers=2, num_heads=4, init_seed=seed).items():
        setattr(cfg.model, k, v)
    for k, v in model_kw.items():
        setattr(cfg.model, k, v)
    finalize(cfg, 1)
    model = GPT(cfg.model).eval()
    # move every weight off its init (norm weights of 1, zero biases) so that a wrong mapping shows
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen))
    return model, cfg.model


ARCHS = {
    "gpt2": dict(norm="layernorm", position="learned", mlp="gelu", bias=True, tie_embeddings=True),
    "gpt2-nobias-untied": dict(norm="layernorm", position="learned", mlp="gelu", bias=False, tie_embeddings=False,
                               norm_eps=1e-6),
    "llama": dict(norm="rmsnorm", position="rope", mlp="swiglu", bias=False, tie_embeddings=False),
    "llama-bias-tied": dict(norm="rmsnorm", position="rope", mlp="swiglu", bias=True, tie_embeddings=True,
                            rope_theta=500.0, norm_eps=1e-6),
}
HF_CLASS = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM"}


@pytest.mark.parametrize("name", list(ARCHS))
def test_export_logits_match(name, spm_model, tmp_path):
    from transformers import AutoModelForCausalLM

    model, cfg = tiny_model(seed=len(name), **ARCHS[name])
    assert cfg.padded_vocab_size > cfg.vocab_size  # the padding rows must be dropped
    tok = load_tokenizer(spm_model)
    out = export_model(model, cfg, tmp_path / "hf", spm_model, eod_id=tok.eod_id)

    hf = AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    assert type(hf).__name__ == HF_CLASS[name.split("-")[0]]
    assert hf.config.vocab_size == VOCAB and hf.config.eos_token_id == tok.eod_id

    text_ids = tok.encode("\n".join(prose_lines()[:20]))[:32]
    rand_ids = torch.randint(0, VOCAB, (32,), generator=torch.Generator().manual_seed(1)).tolist()
    x = torch.tensor([text_ids, rand_ids])
    with torch.no_grad():
        ours = model(x)[..., :VOCAB]
        theirs = hf(input_ids=x).logits
    diff = (ours - theirs).abs().max().item()
    print(f"{name}: {type(hf).__name__} max |logit diff| = {diff:.3g} (logits up to {ours.abs().max():.2f})")
    assert ours.abs().max() > 1.0  # the comparison is not between near-zero logits
    assert diff < 1e-4

    # greedy decoding agrees: HF's generate (KV cache) and Quarry's window loop
    prompt = text_ids[:8]
    ours_ids = generate_ids(model, prompt, max_tokens=12, temperature=0.0)
    theirs_ids = hf.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0, len(prompt):].tolist()
    assert ours_ids == theirs_ids


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_exported_tokenizer_encodes_like_quarry(model_type, tmp_path_factory, tmp_path):
    from transformers import AutoTokenizer

    spm_model = quarry_tokenizer(tmp_path_factory, model_type)
    quarry = load_tokenizer(spm_model)
    model, cfg = tiny_model(**ARCHS["llama"])
    out = export_model(model, cfg, tmp_path / "hf", spm_model, eod_id=quarry.eod_id)
    assert (out / "tokenizer.model").read_bytes() == spm_model.read_bytes()
    tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    assert tok.eos_token_id == quarry.eod_id and tok.unk_token_id == quarry.unk_id
    assert tok.model_max_length == cfg.max_seq_len
    assert len(tok) == VOCAB
    docs = [json.loads(line)["text"] for line in PROSE.read_text().splitlines()]
    samples = docs + prose_lines()[::5] + [
        "  two  spaces,\ttab, digits 1816 and 3.14,\n\nnew paragraph  ",
        "naïve café in Zürich — «quoted» 東京 ✓ 🙂",  # characters outside the training text: byte fallback
        "", " ", "\n"]
    if model_type == "bpe":  # unigram: see export_tokenizer's docstring
        samples.append("text that spells </s>, <s>, <unk>, <pad> and the byte piece <0x41>")
    for text in samples:
        ids = quarry.encode(text)
        assert tok.encode(text, add_special_tokens=False) == ids, text[:80]
        assert tok.encode(text) == ids  # no BOS/EOS added, as in Quarry's tokenization
        assert tok.decode(ids) == quarry.decode(ids)
    with_eod = quarry.encode("The end.") + [quarry.eod_id] + quarry.encode("Next")
    assert tok.decode(with_eod, skip_special_tokens=True) == quarry.decode(with_eod)


@pytest.mark.parametrize("options, named", [
    (dict(norm="layernorm", position="rope", mlp="gelu"), ["model.position = 'rope'"]),
    (dict(norm="rmsnorm", position="rope", mlp="gelu"), ["model.mlp = 'gelu'"]),
    (dict(norm="layernorm", position="rope", mlp="swiglu"), ["model.norm = 'layernorm'"]),
    (dict(norm="rmsnorm", position="learned", mlp="gelu"), ["model.norm = 'rmsnorm'", "model.position"]),
])
def test_unrepresentable_configs_are_refused(options, named, tmp_path):
    model, cfg = tiny_model(**options)
    with pytest.raises(ExportError) as e:
        hf_architecture(cfg)
    for text in named:
        assert text in str(e.value)
    with pytest.raises(ExportError):
        export_model(model, cfg, tmp_path / "hf")
    assert not (tmp_path / "hf").exists()


def test_tokenizer_of_another_vocabulary_is_refused(spm_model, tmp_path):
    model, cfg = tiny_model(**{**ARCHS["gpt2"], "vocab_size": VOCAB + 5})
    with pytest.raises(ExportError, match="vocab_size"):
        export_model(model, cfg, tmp_path / "hf", spm_model)


def test_rope_row_permutation_matches_rotate_half():
    """Quarry rotates (2i, 2i+1); HF Llama rotates (i, i + d/2). Permuting q/k rows per head maps one onto the other."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    B, T, H, D = 2, 7, 3, 8
    x = torch.randn(B, T, H, D, generator=torch.Generator().manual_seed(0))
    ours = apply_rope(x, rope_cache(T, D, 10000.0))  # [B, T, H, D]

    def to_hf(t):  # permute the head-dim features as the export permutes projection rows
        return rope_interleaved_to_half(t.reshape(B * T, H * D).t(), H).t().reshape(B, T, H, D)

    inv = 1.0 / 10000.0 ** (torch.arange(0, D, 2).float() / D)
    freqs = torch.outer(torch.arange(T).float(), inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    xh = to_hf(x).transpose(1, 2)  # HF: [B, H, T, D]
    theirs, _ = apply_rotary_pos_emb(xh, xh, emb.cos()[None], emb.sin()[None])
    torch.testing.assert_close(theirs.transpose(1, 2), to_hf(ours), atol=1e-6, rtol=1e-6)
    # and without the permutation the two conventions differ
    plain, _ = apply_rotary_pos_emb(x.transpose(1, 2), x.transpose(1, 2), emb.cos()[None], emb.sin()[None])
    assert (plain.transpose(1, 2) - ours).abs().max() > 1e-2


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_cli_exports_a_trained_checkpoint(arch, tmp_path_factory, tmp_path, capsys):
    """`pretrain export-hf CKPT OUT` on a checkpoint written by `pretrain train`; the tokenizer is the one the
    run's config recorded."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from pretrain.checkpoint import load_model_for_inference
    from pretrain.cli import main

    ckpt, _ = trained_checkpoint(tmp_path_factory, arch)
    assert main(["export-hf", str(ckpt), str(tmp_path / "hf")]) == 0
    assert HF_CLASS[arch] in capsys.readouterr().out
    hf = AutoModelForCausalLM.from_pretrained(tmp_path / "hf", local_files_only=True).eval()
    assert type(hf).__name__ == HF_CLASS[arch]
    model, cfg = load_model_for_inference(ckpt)
    tok = load_tokenizer(quarry_tokenizer(tmp_path_factory))
    hf_tok = AutoTokenizer.from_pretrained(tmp_path / "hf", local_files_only=True)
    text = prose_lines()[3]
    x = torch.tensor([tok.encode(text)[:16]])
    assert hf_tok(text, return_tensors="pt").input_ids[0, :16].tolist() == x[0].tolist()
    with torch.no_grad():
        diff = (model(x)[..., :cfg.vocab_size] - hf(input_ids=x).logits).abs().max().item()
    print(f"trained {arch} checkpoint -> {HF_CLASS[arch]}: max |logit diff| = {diff:.3g}")
    assert diff < 1e-4


def test_cli_refuses_missing_checkpoint(tmp_path, capsys):
    from pretrain.cli import main

    assert main(["export-hf", str(tmp_path / "none"), str(tmp_path / "hf")]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_an_export_that_fails_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    """The disk fills while the weights are written (safetensors says "os error 28"): the export is an ENOSPC
    OSError (``pretrain`` says it in one line), and the output folder is as it was, new or an earlier export,
    with nothing half-written beside it, so the rerun is not refused as "not empty"; the rerun writes it."""
    from transformers import PreTrainedModel

    from pretrain.export_hf import export_model

    model, cfg = tiny_model(**ARCHS["gpt2"])
    real = PreTrainedModel.save_pretrained

    def disk_full(self, folder, *a, **kw):
        (Path(folder) / "config.json").write_text("{}")  # what was written before the disk filled
        raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")

    out = tmp_path / "hf"
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", disk_full)
    with pytest.raises(OSError) as e:
        export_model(model, cfg, out)
    assert e.value.errno == 28 and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", real)
    export_model(model, cfg, out)  # the rerun
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "quarry_export.json"} <= set(before)
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", disk_full)
    with pytest.raises(OSError):
        export_model(model, cfg, out)  # over the earlier export: it is left whole
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before and sorted(tmp_path.iterdir()) == [out]


def test_an_export_whose_folder_s_parent_cannot_be_written_is_staged_inside_it(tmp_path, monkeypatch):
    """OUT exists and can be written, its parent cannot (no folder can be made beside OUT): the export is
    written in OUT/.export-tmp and moved out of it, which is then gone."""
    from pretrain.export_hf import export_model

    model, cfg = tiny_model(**ARCHS["gpt2"])
    out = tmp_path / "hf"
    out.mkdir()
    real = Path.mkdir

    def mkdir(self, *a, **kw):
        if self.parent == tmp_path and self.name.endswith(".export-tmp"):
            raise PermissionError(1, "Operation not permitted", str(self))
        return real(self, *a, **kw)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    export_model(model, cfg, out)
    names = {p.name for p in out.iterdir()}
    assert {"config.json", "model.safetensors", "quarry_export.json"} <= names and ".export-tmp" not in names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]


def test_a_path_through_a_missing_folder_is_written_where_it_was_checked(tmp_path, monkeypatch):
    """``gone/../hf`` (``gone`` missing): the checks and the staging folder read it as ``./hf``; the final move
    used it as given and failed after the whole export was written. And an ``hf`` holding a user's files is
    refused through such a path too, not written over."""
    from pretrain.export_hf import ExportError, export_model

    model, cfg = tiny_model(**ARCHS["gpt2"])
    monkeypatch.chdir(tmp_path)
    out = export_model(model, cfg, "gone/../hf")
    assert out == tmp_path / "hf" and (tmp_path / "hf" / "model.safetensors").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ExportError, match="not empty"):
        export_model(model, cfg, "gone/../mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"

"""Exporting a Quarry GPT to a Hugging Face ``transformers`` model folder, with its tokenizer.

``pretrain export-hf CHECKPOINT OUT`` writes ``OUT/config.json``, ``OUT/model.safetensors``, the sentencepiece
model as ``OUT/tokenizer.model`` and ``OUT/tokenizer.json`` + ``OUT/tokenizer_config.json`` (a ``tokenizers``
tokenizer built from the sentencepiece model's own settings; it encodes ordinary text to the same ids), so
``AutoModelForCausalLM.from_pretrained(OUT)`` and ``AutoTokenizer.from_pretrained(OUT)`` work offline.

Two architectures can represent a Quarry model exactly:

- ``GPT2LMHeadModel``: ``norm = layernorm``, ``position = learned``, ``mlp = gelu`` (tanh GeLU, so
  ``activation_function = gelu_pytorch_tanh``). q/k/v are concatenated into ``c_attn`` and every Linear is
  transposed into GPT-2's Conv1D ``[in, out]`` layout. ``bias = false`` is exported as zero biases.
- ``LlamaForCausalLM``: ``norm = rmsnorm``, ``position = rope``, ``mlp = swiglu``. Quarry rotates interleaved pairs
  ``(2i, 2i+1)``; HF Llama rotates halves ``(i, i + d/2)``, so the q/k projection rows (and biases) of every head
  are permuted ``[0, 2, 4, ..., 1, 3, 5, ...]``. ``bias = true`` maps to ``attention_bias`` and ``mlp_bias``.

Any other combination raises ``ExportError`` naming the options. The folder must be new, empty, or hold only an
earlier export's files (``quarry_export.json`` and the names an export writes); anything else is refused
(``ExportError``) unless ``force``, so a user's own files are never overwritten by mistake. The vocabulary padding rows are dropped
(HF ``vocab_size`` is the real vocabulary); tied embeddings stay tied (``tie_word_embeddings``).
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import sys
from pathlib import Path

import torch

from pretrain.config import ModelConfig

GPT2_OPTIONS = {"norm": "layernorm", "position": "learned", "mlp": "gelu"}
LLAMA_OPTIONS = {"norm": "rmsnorm", "position": "rope", "mlp": "swiglu"}


class ExportError(ValueError):
    pass


# What an export writes (transformers' save_pretrained included): a folder holding only these, with
# quarry_export.json among them, is an earlier export and is written over without --force.
EXPORT_FILES = frozenset({"config.json", "generation_config.json", "model.safetensors", "model.safetensors.index.json",
                          "tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                          "added_tokens.json", "chat_template.jinja", "quarry_export.json",
                          ".export-tmp"})  # (the folder an export writes in when OUT's parent is read-only)


def check_out_dir(out_dir, force: bool = False) -> None:
    """ExportError when ``out_dir`` exists and holds anything but an earlier export (unless ``force``); the path
    as the export writes it (resolved: "gone/../hf" is ./hf)."""
    out = Path(out_dir).resolve()
    if not out.exists():
        return
    if not out.is_dir():
        raise ExportError(f"{out} is a file, not a folder: choose another output folder")
    names = {p.name for p in out.iterdir()}
    if force or not names or ("quarry_export.json" in names and names <= EXPORT_FILES):
        return
    other = sorted(names - EXPORT_FILES) or sorted(names)
    raise ExportError(f"{out} is not empty and is not an earlier export (it holds {', '.join(other[:5])}"
                      f"{' and more' if len(other) > 5 else ''}); choose a new or empty folder, or pass --force "
                      f"to write the export's files into it (files of the same names are replaced)")


def hf_architecture(cfg: ModelConfig) -> str:
    """``"gpt2"`` or ``"llama"``; ExportError naming the options that neither HF class can represent."""
    got = {k: getattr(cfg, k) for k in GPT2_OPTIONS}
    if got == GPT2_OPTIONS:
        return "gpt2"
    if got == LLAMA_OPTIONS:
        return "llama"

    def diff(want):
        return [f"model.{k} = {got[k]!r} (needs {v!r})" for k, v in want.items() if got[k] != v]

    raise ExportError(
        "this model cannot be exported to Hugging Face transformers: "
        f"GPT2LMHeadModel needs norm=layernorm, position=learned, mlp=gelu, but {', '.join(diff(GPT2_OPTIONS))}; "
        f"LlamaForCausalLM needs norm=rmsnorm, position=rope, mlp=swiglu, but {', '.join(diff(LLAMA_OPTIONS))}")


def rope_interleaved_to_half(w: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Reorder the output rows of a q/k projection (weight [h, in] or bias [h]) from Quarry's interleaved RoPE
    pairs (2i, 2i+1) to HF's rotate_half pairs (i, i + d/2), head by head."""
    d = w.shape[0] // num_heads
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    idx = (torch.arange(num_heads)[:, None] * d + perm[None, :]).reshape(-1)
    return w[idx]


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in model.state_dict().items():
        if hasattr(v, "full_tensor"):  # a DTensor (tensor-parallel / FSDP model)
            v = v.full_tensor()
        out[k] = v.detach().to("cpu")
    return out


def convert_state_dict(state: dict[str, torch.Tensor], cfg: ModelConfig, arch: str) -> dict[str, torch.Tensor]:
    """Quarry ``state_dict`` (names documented in pretrain/model.py) -> HF ``state_dict`` for ``arch``."""
    V, h, f = cfg.vocab_size, cfg.hidden_size, cfg.ffn_hidden_size
    for k in ("embed.weight", "norm.weight"):
        if k not in state:
            raise ExportError(f"state dict has no {k!r}: export needs the whole model (not one pipeline stage)")
    embed = state["embed.weight"]
    dtype = embed.dtype
    if embed.shape[0] < V:
        raise ExportError(f"embedding has {embed.shape[0]} rows but model.vocab_size = {V}")
    head = embed if cfg.tie_embeddings else state["lm_head.weight"]

    def get(key, shape):
        """The tensor, or zeros where the model was built with bias = false / a LayerNorm without bias."""
        return state[key] if key in state else torch.zeros(shape, dtype=dtype)

    sd: dict[str, torch.Tensor] = {}
    if arch == "gpt2":
        sd["transformer.wte.weight"] = embed[:V]
        sd["transformer.wpe.weight"] = state["pos_embed.weight"]
        for i in range(cfg.num_layers):
            q, o = f"layers.{i}.", f"transformer.h.{i}."
            for src, dst in (("attn_norm", "ln_1"), ("mlp_norm", "ln_2")):
                sd[o + dst + ".weight"] = state[q + src + ".weight"]
                sd[o + dst + ".bias"] = get(q + src + ".bias", (h,))
            sd[o + "attn.c_attn.weight"] = torch.cat(
                [state[q + f"attn.{p}_proj.weight"] for p in "qkv"], dim=0).t()
            sd[o + "attn.c_attn.bias"] = torch.cat([get(q + f"attn.{p}_proj.bias", (h,)) for p in "qkv"])
            sd[o + "attn.c_proj.weight"] = state[q + "attn.o_proj.weight"].t()
            sd[o + "attn.c_proj.bias"] = get(q + "attn.o_proj.bias", (h,))
            sd[o + "mlp.c_fc.weight"] = state[q + "mlp.up_proj.weight"].t()
            sd[o + "mlp.c_fc.bias"] = get(q + "mlp.up_proj.bias", (f,))
            sd[o + "mlp.c_proj.weight"] = state[q + "mlp.down_proj.weight"].t()
            sd[o + "mlp.c_proj.bias"] = get(q + "mlp.down_proj.bias", (h,))
        sd["transformer.ln_f.weight"] = state["norm.weight"]
        sd["transformer.ln_f.bias"] = get("norm.bias", (h,))
        sd["lm_head.weight"] = head[:V]
    elif arch == "llama":
        H = cfg.num_heads
        sd["model.embed_tokens.weight"] = embed[:V]
        for i in range(cfg.num_layers):
            q, o = f"layers.{i}.", f"model.layers.{i}."
            sd[o + "input_layernorm.weight"] = state[q + "attn_norm.weight"]
            sd[o + "post_attention_layernorm.weight"] = state[q + "mlp_norm.weight"]
            for p in "qkvo":
                for leaf in ("weight", "bias"):
                    key = q + f"attn.{p}_proj.{leaf}"
                    if key not in state:
                        continue
                    t = state[key]
                    if p in "qk":
                        t = rope_interleaved_to_half(t, H)
                    sd[o + f"self_attn.{p}_proj.{leaf}"] = t
            for p in ("gate", "up", "down"):
                for leaf in ("weight", "bias"):
                    key = q + f"mlp.{p}_proj.{leaf}"
                    if key in state:
                        sd[o + f"mlp.{p}_proj.{leaf}"] = state[key]
        sd["model.norm.weight"] = state["norm.weight"]
        sd["lm_head.weight"] = head[:V]
    else:
        raise ExportError(f"unknown architecture {arch!r}")
    return {k: v.contiguous() for k, v in sd.items()}


def hf_config(cfg: ModelConfig, arch: str, bos_id: int | None = None, eos_id: int | None = None):
    common = dict(vocab_size=cfg.vocab_size, tie_word_embeddings=cfg.tie_embeddings, initializer_range=cfg.init_std,
                  bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=None)
    if arch == "gpt2":
        from transformers import GPT2Config

        return GPT2Config(n_positions=cfg.max_seq_len, n_embd=cfg.hidden_size, n_layer=cfg.num_layers,
                          n_head=cfg.num_heads, n_inner=cfg.ffn_hidden_size,
                          activation_function="gelu_pytorch_tanh",  # Quarry: F.gelu(approximate="tanh")
                          resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=cfg.norm_eps,
                          scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                          reorder_and_upcast_attn=False, **common)
    from transformers import LlamaConfig

    return LlamaConfig(hidden_size=cfg.hidden_size, intermediate_size=cfg.ffn_hidden_size,
                       num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
                       num_key_value_heads=cfg.num_heads, head_dim=cfg.head_dim, hidden_act="silu",
                       max_position_embeddings=cfg.max_seq_len, rms_norm_eps=cfg.norm_eps,
                       rope_parameters={"rope_type": "default", "rope_theta": float(cfg.rope_theta)},
                       attention_bias=cfg.bias, mlp_bias=cfg.bias, attention_dropout=0.0, **common)


def _spm_proto(spm_path: str | Path):
    from transformers.convert_slow_tokenizer import import_protobuf

    model_pb2 = import_protobuf()
    return model_pb2.ModelProto.FromString(Path(spm_path).read_bytes())


def export_tokenizer(spm_path: str | Path, out_dir: str | Path, eod_id: int | None = None,
                     model_max_length: int | None = None) -> None:
    """Copy the sentencepiece model to ``out_dir/tokenizer.model`` and write ``tokenizer.json`` and
    ``tokenizer_config.json`` (``AutoTokenizer`` loads them offline). ``eod_id`` becomes the eos and the bos token
    (Quarry separates training documents with it, as GPT-2 does with ``<|endoftext|>``).
    No BOS/EOS is added on encode, as in Quarry's tokenization. The ``tokenizers`` model follows the
    sentencepiece model's own normalizer settings and pieces (unigram or BPE, byte fallback, user-defined pieces),
    and ``split_special_tokens`` makes text that spells a special token ("</s>") encode as ordinary characters,
    as sentencepiece does. Known differences: (1) decoding: transformers prints control tokens (``</s>``) unless
    ``skip_special_tokens=True``, sentencepiece drops them; (2) unigram models only (BPE, Quarry's default, is
    exact): text that literally spells a control piece ("</s>", "<s>", "<unk>", "<pad>") or a byte piece
    ("<0x41>") may encode to that piece in ``tokenizers``, where sentencepiece never matches such pieces in text."""
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import SpmConverter

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    proto = _spm_proto(spm_path)
    pieces = list(proto.pieces)
    model_type = proto.trainer_spec.model_type  # 1 unigram, 2 bpe, 3 word, 4 char
    if model_type == 1:
        vocab = [(p.piece, p.score) for p in pieces]
    elif model_type == 2:
        vocab = {p.piece: i for i, p in enumerate(pieces)}
    else:
        raise ExportError(f"{spm_path}: sentencepiece model_type {model_type} (word/char) has no tokenizers "
                          f"equivalent here; train the tokenizer with model_type unigram or bpe")
    tok = SpmConverter.build_tokenizer_from_spm_proto(proto, vocab)
    if tok is None:
        raise ExportError(f"{spm_path}: could not convert the sentencepiece model")

    def piece(i):
        return pieces[i].piece if i is not None and 0 <= i < len(pieces) else None

    ts = proto.trainer_spec
    eos = piece(eod_id) if eod_id is not None else piece(ts.eos_id)
    # bos = eos = the end-of-document piece, as GPT-2's <|endoftext|> (see export_model)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=piece(ts.unk_id), bos_token=eos,
                                   eos_token=eos, pad_token=piece(ts.pad_id), clean_up_tokenization_spaces=False,
                                   split_special_tokens=True,
                                   **({"model_max_length": model_max_length} if model_max_length else {}))
    fast.save_pretrained(str(out))
    shutil.copyfile(spm_path, out / "tokenizer.model")


def export_model(model: torch.nn.Module, cfg: ModelConfig, out_dir: str | Path, tokenizer_path: str | Path | None = None,
                 eod_id: int | None = None, force: bool = False) -> Path:
    """Write the HF model folder for an in-memory Quarry ``model`` (a whole ``pretrain.model.GPT``) with config
    ``cfg`` (finalized: vocab_size, padded_vocab_size, ffn_hidden_size, max_seq_len set); with ``tokenizer_path``
    (a sentencepiece .model) the tokenizer too. Returns the folder. A folder holding other files is refused
    unless ``force`` (:func:`check_out_dir`)."""
    check_out_dir(out_dir, force)
    arch = hf_architecture(cfg)
    if cfg.vocab_size is None or cfg.ffn_hidden_size is None or cfg.max_seq_len is None:
        raise ExportError("the model config is not finalized (vocab_size / ffn_hidden_size / max_seq_len unset)")
    bos_id = None
    if tokenizer_path is not None:
        proto = _spm_proto(tokenizer_path)
        if len(proto.pieces) != cfg.vocab_size:
            raise ExportError(f"tokenizer {tokenizer_path} has {len(proto.pieces)} pieces but the model's "
                              f"vocab_size is {cfg.vocab_size}: pass the tokenizer the model was trained with")
        if eod_id is None and proto.trainer_spec.eos_id >= 0:
            eod_id = proto.trainer_spec.eos_id
        # BOS is the end-of-document token, as in GPT-2: training documents follow one, never the sentencepiece
        # BOS, and it is what lm-eval puts before a document or an empty context
        bos_id = eod_id
    sd = convert_state_dict(_state(model), cfg, arch)
    dtype = next(iter(sd.values())).dtype
    hf_cfg = hf_config(cfg, arch, bos_id=bos_id, eos_id=eod_id)
    from transformers import GPT2LMHeadModel, LlamaForCausalLM

    cls = GPT2LMHeadModel if arch == "gpt2" else LlamaForCausalLM
    hf = cls(hf_cfg).to(dtype)
    missing, unexpected = hf.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and cfg.tie_embeddings)]
    if missing or unexpected:
        raise ExportError(f"parameter mapping mismatch: missing {missing}, unexpected {unexpected}")
    out = Path(out_dir).resolve()  # as the checks read it: "gone/../hf" is ./hf there, and must be here too
    staging = _staging(out)  # the folder is written there, then moved into place
    try:
        try:
            hf.save_pretrained(str(staging))
        except Exception as e:  # safetensors' own error type, its errno in the message (disk full)
            from curate.os_errors import errno_of

            code = errno_of(e)
            if code is None:
                raise
            raise OSError(code, os.strerror(code), str(out / "model.safetensors")) from e
        if tokenizer_path is not None:
            export_tokenizer(tokenizer_path, staging, eod_id, model_max_length=cfg.max_seq_len)
        (staging / "quarry_export.json").write_text(json.dumps(
            {"architecture": type(hf).__name__, "quarry_model_config": _jsonable(cfg)}, indent=2) + "\n")
        _ordinary_modes(staging)
        _publish(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def _staging(out: Path) -> Path:
    """An empty folder to write the export in: beside ``out`` (``.NAME.export-tmp``), or inside it where its
    parent cannot be written (an export into a folder of the home directory's parent, say); one left by an
    export that failed or was killed is emptied first."""
    for staging in (out.resolve().parent / f".{out.resolve().name}.export-tmp", out / ".export-tmp"):
        try:
            if staging.exists():
                shutil.rmtree(staging)
            staging.mkdir(parents=True)
            return staging
        except PermissionError:
            continue
    raise PermissionError(errno.EACCES, "Permission denied", str(out))


def _publish(staging: Path, out: Path) -> None:
    """Move the written export into ``out``: the whole folder at once when ``out`` is new, else file by file
    (into an empty folder, an earlier export's, or one ``--force`` allows), ``quarry_export.json`` last. An
    export that fails (disk full) or is killed while writing leaves ``out`` as it was."""
    if not out.exists():
        os.replace(staging, out)
        return
    for path in sorted(staging.iterdir(), key=lambda p: p.name == "quarry_export.json"):
        if (out / path.name).is_dir():
            shutil.rmtree(out / path.name)  # (--force over a folder of that name)
        os.replace(path, out / path.name)


def _ordinary_modes(out: Path) -> None:
    """safetensors writes model.safetensors with mode 0600; give every file of the folder the mode of an
    ordinary file write (0666 less the umask), as the others have."""
    umask = os.umask(0)
    os.umask(umask)
    for path in out.iterdir():
        if path.is_file():
            os.chmod(path, 0o666 & ~umask)


def export_checkpoint(checkpoint, out_dir, tokenizer=None, force: bool = False) -> tuple[Path, str | None]:
    """Export the latest intact checkpoint of ``checkpoint`` to ``out_dir`` with the tokenizer given or recorded
    with it, which must be the one it was trained with (none: a warning, the model alone). Returns (the folder,
    the tokenizer path or None)."""
    from pretrain.checkpoint import LATEST, load_model_for_inference
    from pretrain.data.tokenizer import load_tokenizer
    from pretrain.generate import resolve_tokenizer_path

    ck, out = Path(checkpoint).resolve(), Path(out_dir).resolve()
    if os.path.lexists(ck.parent / LATEST):  # a step_* folder: the checkpoint folder is the one above it
        ck = ck.parent
    if out == ck or ck in out.parents:  # (even with --force: its files would mix with the checkpoint's)
        where = "is the checkpoint folder" if out == ck else f"lies inside the checkpoint folder {ck}"
        raise ExportError(f"{out_dir} {where}: choose an output folder outside it")
    check_out_dir(out_dir, force)  # before the checkpoint is loaded: a refusal costs nothing
    model, cfg = load_model_for_inference(checkpoint)
    tok_path = resolve_tokenizer_path(checkpoint, tokenizer)  # the one it was trained with (its sha256), or refused
    eod_id = None
    if tok_path is None:
        print("warning: no tokenizer recorded with the checkpoint (data.tokenizer) and none given "
              "(--tokenizer): exporting the model without a tokenizer", file=sys.stderr)
    else:
        eod_id = load_tokenizer(tok_path).eod_id
    return export_model(model, cfg, out_dir, tok_path, eod_id, force=force), tok_path


def _jsonable(cfg: ModelConfig) -> dict:
    import dataclasses

    return dataclasses.asdict(cfg)

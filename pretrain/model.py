"""A GPT as a plain ``nn.Module``; parallelism is applied from outside (``pretrain.parallel``).

Token embedding (+ learned position embedding, or RoPE), pre-norm blocks (LayerNorm or RMSNorm),
causal attention through ``scaled_dot_product_attention``, a GeLU (or SwiGLU) MLP, a final norm and an
output head tied to the token embedding. Megatron's init: N(0, 0.02), output projections N(0, 0.02/sqrt(2L)).

Parameter names (``state_dict`` keys), stable under pipeline splitting (layers keep their global index):

    embed.weight                       [V_pad, h]   GPT2: transformer.wte   Llama: model.embed_tokens
    pos_embed.weight                   [S, h]       GPT2: transformer.wpe   (absent with RoPE)
    layers.{i}.attn_norm.{weight,bias} [h]          GPT2: h.{i}.ln_1        Llama: layers.{i}.input_layernorm
    layers.{i}.attn.{q,k,v}_proj.{weight,bias}      GPT2: h.{i}.attn.c_attn (q|k|v concatenated, transposed)
                                       [h, h]       Llama: layers.{i}.self_attn.{q,k,v}_proj
    layers.{i}.attn.o_proj.{weight,bias} [h, h]     GPT2: h.{i}.attn.c_proj (transposed)  Llama: self_attn.o_proj
    layers.{i}.mlp_norm.{weight,bias}  [h]          GPT2: h.{i}.ln_2        Llama: post_attention_layernorm
    layers.{i}.mlp.up_proj.{weight,bias}   [f, h]   GPT2: h.{i}.mlp.c_fc (transposed)   Llama: mlp.up_proj
    layers.{i}.mlp.gate_proj.weight    [f, h]       (SwiGLU only)                       Llama: mlp.gate_proj
    layers.{i}.mlp.down_proj.{weight,bias} [h, f]   GPT2: h.{i}.mlp.c_proj (transposed) Llama: mlp.down_proj
    norm.{weight,bias}                 [h]          GPT2: transformer.ln_f  Llama: model.norm
    lm_head.weight                     [V_pad, h]   tied to embed.weight (the same Parameter when both are here)

Weights are ``nn.Linear`` layout ``[out, in]``; GPT-2's Conv1D stores ``[in, out]``. Rows ``>= vocab_size`` of
the embedding are vocabulary padding (to a multiple of 128 x tp): slice logits ``[..., :vocab_size]`` for use.
Biases exist when ``bias = true`` (GPT-2 style); RMSNorm has no bias.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pretrain.config import ModelConfig
from pretrain.init import init_parameters
from pretrain.recompute import run_block


def _norm_param(w: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor | None:
    """A norm's weight or bias as used in fp32 arithmetic: under autocast first rounded to the autocast dtype, like
    every other weight (and as FSDP's bf16 parameters are), so that every data-parallel layout computes the same."""
    if w is None:
        return None
    if torch.is_autocast_enabled(x.device.type):
        w = w.to(torch.get_autocast_dtype(x.device.type))
    return w.float()


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * _norm_param(self.weight, x)).type_as(x)


class LayerNorm(nn.Module):
    """``nn.LayerNorm`` (same parameters) computed in fp32 whatever the input and parameter dtypes."""

    def __init__(self, dim: int, eps: float, bias: bool):
        super().__init__()
        self.eps, self.normalized_shape = eps, (dim,)
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim)) if bias else None

    def forward(self, x):
        w, b = _norm_param(self.weight, x), _norm_param(self.bias, x)
        with torch.autocast(x.device.type, enabled=False):
            y = F.layer_norm(x.float(), self.normalized_shape, w, b, self.eps)
        return y.type_as(x)


def make_norm(cfg: ModelConfig) -> nn.Module:
    if cfg.norm == "rmsnorm":
        return RMSNorm(cfg.hidden_size, cfg.norm_eps)
    return LayerNorm(cfg.hidden_size, cfg.norm_eps, cfg.bias)


def rope_cache(seq_len: int, head_dim: int, theta: float, device=None) -> torch.Tensor:
    """[seq_len, head_dim // 2, 2] (cos, sin) for rotary position embeddings (rotating pairs 2i, 2i+1)."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    ang = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv)
    return torch.stack([ang.cos(), ang.sin()], dim=-1)


def apply_rope(x: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
    """x: [B, T, H, D]; cache: [>=T, D/2, 2]."""
    T = x.shape[1]
    xs = x.float().unflatten(-1, (-1, 2))
    cos, sin = cache[:T, None, :, 0], cache[:T, None, :, 1]
    x0, x1 = xs[..., 0], xs[..., 1]
    out = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
    return out.flatten(-2).type_as(x)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h = cfg.hidden_size
        self.head_dim = h // cfg.num_heads
        self.q_proj = nn.Linear(h, h, bias=cfg.bias)
        self.k_proj = nn.Linear(h, h, bias=cfg.bias)
        self.v_proj = nn.Linear(h, h, bias=cfg.bias)
        self.o_proj = nn.Linear(h, h, bias=cfg.bias)

    def forward(self, x: torch.Tensor, rope: torch.Tensor | None) -> torch.Tensor:
        B, T, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds num_heads / tp of them
        q = self.q_proj(x).view(B, T, -1, self.head_dim)
        k = self.k_proj(x).view(B, T, -1, self.head_dim)
        v = self.v_proj(x).view(B, T, -1, self.head_dim)
        if rope is not None:
            q, k = apply_rope(q, rope), apply_rope(k, rope)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        h, f = cfg.hidden_size, cfg.ffn_hidden_size
        self.swiglu = cfg.mlp == "swiglu"
        if self.swiglu:
            self.gate_proj = nn.Linear(h, f, bias=cfg.bias)
        self.up_proj = nn.Linear(h, f, bias=cfg.bias)
        self.down_proj = nn.Linear(f, h, bias=cfg.bias)

    def forward(self, x):
        if self.swiglu:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(F.gelu(self.up_proj(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.attn_norm = make_norm(cfg)
        self.attn = Attention(cfg)
        self.mlp_norm = make_norm(cfg)
        self.mlp = MLP(cfg)
        self.recompute = "none"  # none | selective | full (pretrain.recompute)

    def _forward(self, x, rope):
        x = x + self.attn(self.attn_norm(x), rope)
        return x + self.mlp(self.mlp_norm(x))

    def forward(self, x, rope=None):
        return run_block(self._forward, self.recompute, x, rope)


class GPT(nn.Module):
    """Any of ``embed``/``pos_embed``/``norm``/``lm_head`` may be ``None`` and ``layers`` may hold a subset of the
    layers: that is a pipeline stage (``pretrain.parallel.pipeline``). The whole model maps tokens [B, T] to
    logits [B, T, V_pad]; a first stage maps tokens to hidden states, a middle one hidden to hidden."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.config = cfg
        self.embed = nn.Embedding(cfg.padded_vocab_size, cfg.hidden_size)
        self.pos_embed = nn.Embedding(cfg.max_seq_len, cfg.hidden_size) if cfg.position == "learned" else None
        self.layers = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.num_layers)})
        self.norm = make_norm(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.padded_vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight
        if cfg.position == "rope":
            self.register_buffer("rope", torch.empty(cfg.max_seq_len, cfg.head_dim // 2, 2), persistent=False)
        else:
            self.rope = None
        if not any(p.is_meta for p in self.parameters()):
            self.init_weights()

    @torch.no_grad()
    def init_weights(self, seed: int | None = None) -> None:
        """Megatron's init (``pretrain.init``). Each tensor is drawn from its own generator seeded by (seed,
        parameter name), so the weights do not depend on which layers this process holds, on the module
        construction order, or on how the parameters are sharded: a DTensor parameter gets its shard of the values."""
        seed = self.config.init_seed if seed is None else seed
        init_parameters(self.named_parameters(), self.config, seed, self.config.tie_embeddings)
        if self.rope is not None:
            self.rope.copy_(rope_cache(self.config.max_seq_len, self.config.head_dim, self.config.rope_theta,
                                       device=self.rope.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            T = x.shape[1]
            x = self.embed(x)
            if self.pos_embed is not None:
                x = x + self.pos_embed(torch.arange(T, device=x.device))
        for layer in self.layers.values():
            x = layer(x, self.rope)
        if self.norm is not None:
            x = self.norm(x)
        if self.lm_head is not None:
            x = self.lm_head(x)
        return x


def num_params(model: nn.Module, exclude_embeddings: bool = False) -> int:
    seen, n = set(), 0
    for name, p in model.named_parameters():
        if id(p) in seen or (exclude_embeddings and name.startswith(("embed.", "pos_embed."))):
            continue
        seen.add(id(p))
        n += p.numel()
    return n

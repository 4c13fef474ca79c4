"""The training loss: mean token cross entropy in fp32 without an fp32 copy of the whole [tokens, vocab] logits
(``ChunkedCrossEntropy``); under tensor parallelism the vocab-sharded loss of ``loss_parallel``."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

CE_CHUNK_ELEMS = 1 << 26  # logits elements per chunk of the cross entropy (256 MiB in fp32)


class ChunkedCrossEntropy(torch.autograd.Function):
    """Mean token cross entropy of logits [N, V] (any float dtype) in fp32, a chunk of tokens at a time: the fp32
    copy of the logits exists for one chunk only, in forward and in backward (which recomputes the softmax from
    the saved logits and the log-sum-exp)."""

    @staticmethod
    def forward(ctx, logits, labels, chunk):
        lse = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
        total = torch.zeros((), dtype=torch.float32, device=logits.device)
        for i in range(0, logits.shape[0], chunk):
            z = logits[i:i + chunk].float()
            lse[i:i + chunk] = torch.logsumexp(z, dim=-1)
            total += (lse[i:i + chunk] - z.gather(1, labels[i:i + chunk, None])[:, 0]).sum()
        ctx.save_for_backward(logits, labels, lse)
        ctx.chunk = chunk
        return total / logits.shape[0]

    @staticmethod
    def backward(ctx, grad):
        logits, labels, lse = ctx.saved_tensors
        out = torch.empty_like(logits)
        scale = grad.float() / logits.shape[0]
        for i in range(0, logits.shape[0], ctx.chunk):
            p = torch.exp(logits[i:i + ctx.chunk].float() - lse[i:i + ctx.chunk, None])
            p.scatter_add_(1, labels[i:i + ctx.chunk, None], torch.full_like(p[:, :1], -1.0))
            out[i:i + ctx.chunk] = (p * scale).to(out.dtype)
        return out, None, None


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean token loss in fp32, without an fp32 copy of the whole [tokens, vocab] logits (``ChunkedCrossEntropy``).
    Under tensor parallelism ``logits`` is a vocab-sharded DTensor and this must run inside
    ``torch.distributed.tensor.parallel.loss_parallel()`` (each rank holds [tokens, vocab / tp])."""
    if isinstance(logits, DTensor):
        return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))
    flat = logits.flatten(0, 1)
    chunk = max(1, CE_CHUNK_ELEMS // flat.shape[-1])
    return ChunkedCrossEntropy.apply(flat, labels.flatten(0, 1), chunk)

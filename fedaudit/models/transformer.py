"""``transformer``: a small causal (decoder-only, GPT-style) transformer over characters.

For tokens t_1..t_L (B, L) it returns next-token logits (B, L, V):

    h_0 = E[t] + P[0..L-1]                       (token and position embeddings)
    h'  = h + Attn(LN_1(h)),   h_next = h' + MLP(LN_2(h'))      (pre-LN blocks,
                                                  Radford et al. 2019; Xiong et al. 2020)
    Attn(u) = W_o concat_heads softmax(Q K^T / sqrt(d_h) + M) V,  M_ts = -inf for s > t
    MLP(u)  = W_2 GELU(W_1 u),  W_1: d -> 4d
    logits  = W_head LN_f(h_L)

Built only from ``nn.Embedding``, ``nn.Linear`` and ``nn.LayerNorm``, each called once
per forward, so the exact GNQ ghost kernels (:mod:`fedaudit.gnq.kernels`) cover every
parameter: Q, K, V are one ``nn.Linear(d, 3d)`` applied to the (B, L, d) sequence (not
``nn.MultiheadAttention``, whose fused ``in_proj_weight`` is no ``nn.Linear``); the
position embedding is looked up with the positions expanded to (B, L), so its kernel sees
the batch on dim 0; the head is not tied to the token embedding (a parameter used by two
modules would need the cross terms of their gradients, which per-layer kernels do not
see).  No dropout, no BatchNorm: a sequence's gradient depends on that sequence only.

The loss of one sequence is the mean token NLL over its L positions
(:func:`sequence_loss`); the mean of it over a batch is the usual token-mean loss.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from fedaudit.models.registry import register_model
from fedaudit.options import option

__all__ = ["CausalSelfAttention", "CharTransformer", "sequence_loss", "transformer"]


def sequence_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Per-sequence loss (B,): l_i = (1/L) sum_t -log softmax(logits_i,t)[targets_i,t]
    for logits (B, L, V) and int64 targets (B, L)."""
    nll = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")  # (B, L)
    return nll.mean(1)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which position t attends to positions <= t."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        if width % heads:
            raise ValueError(f"heads = {heads} must divide width = {width}")
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        B, L, d = u.shape
        q, k, v = (t.reshape(B, L, self.heads, d // self.heads).transpose(1, 2)
                   for t in self.qkv(u).split(d, dim=-1))  # (B, h, L, d_h) each
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        future = torch.ones(L, L, dtype=torch.bool, device=u.device).triu(1)
        att = scores.masked_fill(future, float("-inf")).softmax(-1)
        return self.out((att @ v).transpose(1, 2).reshape(B, L, d))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: h + Attn(LN(h)), then + MLP(LN(.))."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.norm2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.attn(self.norm1(h))
        return h + self.proj(F.gelu(self.fc(self.norm2(h))))


class CharTransformer(nn.Module):
    """Token + position embeddings, ``layers`` pre-LN blocks, final LayerNorm, linear
    head: logits (B, L, vocab_size) for int64 tokens (B, L) with L <= seq_len."""

    def __init__(self, vocab_size: int, seq_len: int, width: int, layers: int,
                 heads: int) -> None:
        super().__init__()
        self.seq_len = seq_len
        self.tokens = nn.Embedding(vocab_size, width)
        self.positions = nn.Embedding(seq_len, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab_size)
        for m in self.modules():  # GPT-2's initialisation: N(0, 0.02), zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        B, L = tokens.shape
        if L > self.seq_len:
            raise ValueError(f"sequence of {L} tokens; the model takes at most {self.seq_len}")
        pos = torch.arange(L, device=tokens.device).expand(B, L)
        h = self.blocks(self.tokens(tokens) + self.positions(pos))
        return self.head(self.norm(h))


#: the transformer's own keys of the scenario's ``[model]`` table (``--set model.layers=4``,
#: ``scenario.model.layers``); the builder gets them as keyword arguments
OPTIONS = {
    "layers": option(int, 2, "transformer: number of blocks", min=1, max=64),
    "heads": option(int, 4, "transformer: attention heads (must divide model.width)",
                    min=1, max=256),
}


def _check(cfg) -> str | None:
    """The ``[model]`` table's objection to a transformer (validation runs it)."""
    if cfg.width % cfg.heads:
        return f"model.heads = {cfg.heads}: must divide model.width = {cfg.width}"
    return None


@register_model("transformer", inputs="tokens", options=OPTIONS, check=_check)
def transformer(vocab_size: int, seq_len: int, width: int = 64, *, layers: int,
                heads: int) -> nn.Module:
    """A causal character transformer of ``layers`` blocks of width ``width`` with
    ``heads`` heads (about 12 width^2 parameters per block; :data:`OPTIONS`' defaults
    come from :func:`fedaudit.models.build_text_model`); for 2 CPU cores width 64, 2
    layers, seq_len 64-80 (~0.1 M parameters)."""
    return CharTransformer(vocab_size, seq_len, width, layers, heads)

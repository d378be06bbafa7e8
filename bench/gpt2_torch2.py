"""GPT-2 as a PyTorch 2 user would train it: the PyTorch 2 peer of bench/compare_pytorch.py.

The model is tests/parity/gpt2_torch.py's GPT (one model definition: same modules,
parameter names, layouts and init) with one change, attention through
F.scaled_dot_product_attention(q, k, v, is_causal=True) instead of the written-out
mask + softmax; each block's attention module is replaced by one that takes over
its c_attn and c_proj, so named_parameters() and init_weights() are unchanged.

    model = gpt2_sdpa(n_layer, n_head, n_embd, vocab_size, block_size)
    loss = TrainingLoss(model)(idx, targets)    # what torch.compile wraps
    opt, kind, note = adamw(model, lr, weight_decay)   # fused, else foreach

Needs torch >= 2.0 (the PyPI wheel of bench/torch2_venv.sh); not thread-safe, as
any nn.Module.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

from gpt2_torch import GPT, lm_loss, param_groups


class SDPACausalSelfAttention(nn.Module):
    """gpt2_torch.CausalSelfAttention with the fused causal attention kernel.
    c_attn output columns are [q | k | v], each C wide; scale 1/sqrt(D)."""

    def __init__(self, attn):
        super().__init__()
        self.n_head = attn.n_head
        self.n_embd = attn.n_embd
        self.c_attn = attn.c_attn  # (C, 3C), the same Parameter objects
        self.c_proj = attn.c_proj  # (C, C)

    def forward(self, x):
        B, T, C = x.shape  # x: (B, T, C)
        H = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)  # (B, H, T, D)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def gpt2_sdpa(n_layer, n_head, n_embd, vocab_size, block_size):
    model = GPT(n_layer, n_head, n_embd, vocab_size, block_size)
    for block in model.transformer.h:
        # Re-assigning an existing child keeps its place: parameter order is unchanged.
        block.attn = SDPACausalSelfAttention(block.attn)
    return model


class TrainingLoss(nn.Module):
    """forward(idx (B,T), targets (B,T)) -> mean cross-entropy; the loss inside the
    compiled graph, as nanoGPT's model(X, Y) has it."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, idx, targets):
        return lm_loss(self.model(idx), targets)


def first_line(e):
    """'Type: first line' of an exception; for wrappers whose first line only says
    who raised ('backend=... raised:'), the next line too, and the first compiler
    'error:' line when there is one (the environment reason behind a C++ failure)."""
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    msg = type(e).__name__ + (f": {lines[0]}" if lines else "")
    if len(lines) > 1 and lines[0].endswith(":"):
        msg += " " + lines[1]
    err = next((s for s in lines[1:] if "error:" in s), None)
    if err and err not in msg:
        msg += f" [{err}]"
    return msg


def adamw(model, lr, weight_decay):
    """(optimizer, 'fused' | 'foreach', note or None): AdamW(fused=True) where this
    torch has the fused CPU kernel, else AdamW(foreach=True) and a note saying why."""
    try:
        return torch.optim.AdamW(param_groups(model, weight_decay), lr=lr,
                                 fused=True), "fused", None
    except (RuntimeError, TypeError, ValueError) as e:
        return (torch.optim.AdamW(param_groups(model, weight_decay), lr=lr, foreach=True),
                "foreach", f"AdamW(fused=True) unavailable ({first_line(e)}); foreach=True")

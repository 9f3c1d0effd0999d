"""Generation-based information probe (Yang et al. 2020, §3.1, Eq. 1, Fig. 2, Fig. 3, Fig. 8).

A probe is a one-layer Transformer decoder that reads a frozen NMT model's representation
H = {h_1..h_M} of one decoder module ("Input 1", through its cross-attention) and
forced-decodes a word sequence x ("Input 2"); it is trained on the training set to minimize
Eq. 1, PPL(x|H) = sum_n -log P(x_n | x_<n, H), with the NMT model fixed.

Modules probed in every decoder layer (§2.2, Fig. 8), by fairseq sub-layer block:
  TEM        output of the self-attention block (self-attention + Add&Norm);
  SEM        output of the encoder attention itself (before its residual/LayerNorm);
  IFM        output of the layer;
  AddNorm-I  output of the encoder-attention block (SEM + residual, LayerNorm);
  FFN        output of the feed-forward network (fc2, before its residual);
  AddNorm-II output of the FFN block (= IFM in the standard order).
Modules a model lacks (no FFN in the simplified decoder, no TEM in sem-ifm) are skipped.

Readings (the paper gives no further detail):
- Source probe: x is the source sentence (with </s>); the probe attends all of H.
- Target probe: x is the target sentence; "an attention mask to the probing decoder to avoid
  direct copying": the probe predicting x_n may attend only H's positions whose decoder
  input is in x_<n (positions <= n-1, a causal mask on the cross-attention), so it sees what
  the NMT decoder saw when predicting x_n and never x_n itself.
- Reported: per-token recovery perplexity exp(sum NLL / tokens) on a held-out split (Eq. 1
  normalized by length, natural log), with the summed NLL in the JSON as well.
- Probe size: the NMT decoder's width, heads and FFN size; fresh embeddings tied with the
  output projection; Adam.
"""
import math
from typing import Dict, List, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

MODULES = ("TEM", "SEM", "IFM", "AddNorm-I", "FFN", "AddNorm-II")
SIDES = ("source", "target")


def module_sources(model) -> Dict[Tuple[str, int], Tuple[str, str]]:
    """(module, layer 1..N) -> ("block" | "module", name to capture), for what this model has."""
    out = {}
    for i, layer in enumerate(model.decoder.layers):
        prefix = f"decoder.layers.{i}"
        plan = getattr(layer, "plan", ())
        if "self_attn" in plan:
            out[("TEM", i + 1)] = ("block", f"{prefix}.self_attn")
        if "encoder_attn" in plan:
            out[("SEM", i + 1)] = ("module", f"{prefix}.encoder_attn")
            out[("AddNorm-I", i + 1)] = ("block", f"{prefix}.encoder_attn")
        if "ffn" in plan:
            out[("FFN", i + 1)] = ("module", f"{prefix}.fc2")
            out[("AddNorm-II", i + 1)] = ("block", f"{prefix}.ffn")
        out[("IFM", i + 1)] = ("module", prefix)
        for key, (kind, name) in list(out.items()):  # the last block's output is the layer's
            if key[1] == i + 1 and kind == "block" and plan and name == f"{prefix}.{plan[-1]}":
                out[key] = ("module", prefix)
    return out


@torch.no_grad()
def representations(model, sample, sources) -> Dict[Tuple[str, int], torch.Tensor]:
    """Run the frozen model teacher-forced on ``sample``; each probed module's T x B x C output."""
    from .common import capture, capture_blocks

    blocks = sorted({n for kind, n in sources.values() if kind == "block"})
    modules = sorted({n for kind, n in sources.values() if kind == "module"})
    net_input = sample["net_input"]
    with capture(model, modules) as mod_rec, capture_blocks(model, blocks) as block_rec:
        model(**net_input)
    reps = {}
    for key, (kind, name) in sources.items():
        rec = (block_rec if kind == "block" else mod_rec)[name]
        if len(rec) != 1:
            raise RuntimeError(f"{name} ran {len(rec)} times in one forward pass; expected once")
        reps[key] = rec[0]
    return reps


class RecoveryProbe(nn.Module):
    """One-layer Transformer decoder over a representation sequence (Fig. 2)."""

    def __init__(self, vocab_size, padding_idx, dim, heads, ffn_dim, dropout=0.1):
        super().__init__()
        self.padding_idx = padding_idx
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=padding_idx)
        nn.init.normal_(self.embed.weight, std=dim ** -0.5)
        self.scale = math.sqrt(dim)
        self.layer = nn.TransformerDecoderLayer(dim, heads, ffn_dim, dropout=dropout)
        self.dropout = nn.Dropout(dropout)

    @staticmethod
    def positions(length, dim, device):
        """Sinusoidal positions (Vaswani et al. 2017)."""
        pos = torch.arange(length, device=device, dtype=torch.float).unsqueeze(1)
        inv = torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float) * (-math.log(10000.0) / dim))
        pe = torch.zeros(length, dim, device=device)
        pe[:, 0::2] = torch.sin(pos * inv)
        pe[:, 1::2] = torch.cos(pos * inv)[:, : dim // 2]
        return pe

    def forward(self, prev_tokens, memory, memory_padding_mask, causal_memory: bool):
        """Logits B x N x V for ``prev_tokens`` (B x N) reading ``memory`` (M x B x C)."""
        n, m = prev_tokens.size(1), memory.size(0)
        x = self.embed(prev_tokens) * self.scale + self.positions(n, memory.size(2), memory.device)
        x = self.dropout(x).transpose(0, 1)
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        memory_mask = None
        if causal_memory:  # target probe: position n reads h_1..h_n only (decoder inputs x_<n)
            memory_mask = torch.ones(n, m, dtype=torch.bool, device=x.device).triu(1)
        x = self.layer(
            x, memory.float(), tgt_mask=future, memory_mask=memory_mask,
            tgt_key_padding_mask=prev_tokens.eq(self.padding_idx),
            memory_key_padding_mask=memory_padding_mask,
        )
        return F.linear(x.transpose(0, 1), self.embed.weight)


def probe_batch(sample, side, pad, eos):
    """(prev tokens, tokens to recover, causal memory) of ``side`` for a fairseq sample."""
    if side == "target":
        return sample["net_input"]["prev_output_tokens"], sample["target"], True
    src = sample["net_input"]["src_tokens"]
    rows = [s[s.ne(pad)] for s in src]  # fairseq left-pads sources; the probe right-pads
    target = src.new_full((len(rows), max(len(r) for r in rows)), pad)
    prev = target.clone()
    for b, r in enumerate(rows):
        target[b, : len(r)] = r
        prev[b, 0] = eos
        prev[b, 1: len(r)] = r[:-1]
    return prev, target, False


def recovery_nll(probe, rep, sample, side, pad, eos) -> Tuple[torch.Tensor, int]:
    """Eq. 1 summed over the batch: (sum_n -log P(x_n | x_<n, H), number of tokens)."""
    prev, target, causal = probe_batch(sample, side, pad, eos)
    memory_padding = sample["net_input"]["prev_output_tokens"].eq(pad)
    logits = probe(prev, rep, memory_padding, causal)
    nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1), ignore_index=pad, reduction="sum")
    return nll, int(target.ne(pad).sum())


def build_probes(model, task, sides, dropout=0.1):
    """One probe per entry of ``sides`` (the side each recovers), as wide as the NMT decoder
    (its heads and FFN size)."""
    cfg = model.cfg.decoder
    probes = nn.ModuleList()
    for side in sides:
        d = task.source_dictionary if side == "source" else task.target_dictionary
        probes.append(RecoveryProbe(len(d), d.pad(), cfg.embed_dim, cfg.attention_heads, cfg.ffn_embed_dim, dropout))
    return probes.to(next(model.parameters()).device)


def train_and_evaluate(model, task, train_batches, eval_batches, modules=MODULES, sides=SIDES, lr=1e-3, dropout=0.1):
    """Train one probe per probed representation and side on ``train_batches`` (an iterable of
    samples; the frozen model runs once per batch for all probes), then measure Eq. 1 on
    ``eval_batches``. Modules with the same output (e.g. Add&Norm II and IFM) share a probe.
    Returns ({"ppl": {side: {module: [per layer]}}, ...}, probes)."""
    model.eval()
    sources = {k: v for k, v in module_sources(model).items() if k[0] in modules}
    if not sources:
        raise ValueError(f"--modules {list(modules)}: none of them exists in this model (it has {sorted({m for m, _ in module_sources(model)})})")
    reps_needed = sorted(set(sources.values()))
    keys = [(rep, side) for rep in reps_needed for side in sides]
    probes = build_probes(model, task, [side for _, side in keys], dropout)
    probe_of = dict(zip(keys, probes))
    by_rep = {rep: rep for rep in reps_needed}
    optim = torch.optim.Adam(probes.parameters(), lr=lr, betas=(0.9, 0.98))
    pad, eos = task.source_dictionary.pad(), task.source_dictionary.eos()
    probes.train()
    steps = 0
    for sample in train_batches:
        reps = representations(model, sample, by_rep)
        optim.zero_grad()
        for rep, side in keys:
            nll, ntok = recovery_nll(probe_of[(rep, side)], reps[rep], sample, side, pad, eos)
            (nll / max(ntok, 1)).backward()
        optim.step()
        steps += 1
    probes.eval()
    totals = {k: [0.0, 0] for k in keys}
    with torch.no_grad():
        for sample in eval_batches:
            reps = representations(model, sample, by_rep)
            for rep, side in keys:
                nll, ntok = recovery_nll(probe_of[(rep, side)], reps[rep], sample, side, pad, eos)
                totals[(rep, side)][0] += float(nll)
                totals[(rep, side)][1] += ntok
    n_layers = len(model.decoder.layers)
    ppl: Dict[str, Dict[str, List]] = {s: {} for s in sides}
    nll_sum: Dict[str, Dict[str, List]] = {s: {} for s in sides}
    for (module, layer), rep in sorted(sources.items()):
        for side in sides:
            nll, ntok = totals[(rep, side)]
            ppl[side].setdefault(module, [None] * n_layers)[layer - 1] = math.exp(nll / ntok) if ntok else None
            nll_sum[side].setdefault(module, [None] * n_layers)[layer - 1] = nll
    tokens = {side: next(t[1] for k, t in totals.items() if k[1] == side) for side in sides}
    return {"ppl": ppl, "nll_sum": nll_sum, "tokens": tokens, "train_batches": steps, "probes": len(keys)}, probes


def plot(result, title=""):
    """Fig. 3 (TEM/SEM/IFM per layer) and Fig. 8 (IFM operations), source and target rows."""
    from .common import new_figure

    sides = list(result["ppl"])
    fig, axes = new_figure(len(sides), 2, figsize=(9, 3.2 * len(sides)), squeeze=False)
    groups = [("TEM", "SEM", "IFM"), ("AddNorm-I", "FFN", "AddNorm-II")]
    for r, side in enumerate(sides):
        for c, group in enumerate(groups):
            ax = axes[r][c]
            for module in group:
                ys = result["ppl"][side].get(module)
                if ys is None:
                    continue
                ax.plot(range(1, len(ys) + 1), ys, marker="o", label=module)
                ax.set_xticks(range(1, len(ys) + 1))
            ax.set(xlabel="decoder layer", ylabel="recovery PPL",
                   title=f"{side}: {'modules (Fig. 3)' if c == 0 else 'inside IFM (Fig. 8)'}")
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    fig.tight_layout()
    if title:
        fig.suptitle(title, fontsize=9, y=1.02)
    return fig

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
  output projection.
- Training (not in the paper): Adam, linear warm-up then inverse-square-root decay of the
  learning rate, on a random sample of a training split; each probe is evaluated on a
  held-out split every few steps, keeps its best state and stops after ``patience``
  evaluations without improvement. Probes are trained in groups: one group at a time holds
  its probes and optimizer state, streaming batches from the frozen model.
- Baseline (not in the paper): a probe of each side reading an all-zero representation, so
  it can only learn a language model of the side; trained the same way and reported beside
  every module. A module is informative only as far as its PPL is below the baseline's.
"""
import copy
import math
from typing import Dict, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

MODULES = ("TEM", "SEM", "IFM", "AddNorm-I", "FFN", "AddNorm-II")
SIDES = ("source", "target")
ZERO = ("zero", "")  # the baseline's representation: all zeros, as long as the decoder input


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
    reps = {}
    if blocks or modules:
        with capture(model, modules) as mod_rec, capture_blocks(model, blocks) as block_rec:
            model(**net_input)
    for key, (kind, name) in sources.items():
        if (kind, name) == ZERO:
            prev = net_input["prev_output_tokens"]
            reps[key] = prev.new_zeros(prev.size(1), prev.size(0), model.cfg.decoder.embed_dim, dtype=torch.float)
            continue
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




def build_probe(model, task, side, dropout=0.1):
    """A probe recovering ``side``, as wide as the NMT decoder (its heads and FFN size)."""
    cfg = model.cfg.decoder
    d = task.source_dictionary if side == "source" else task.target_dictionary
    probe = RecoveryProbe(len(d), d.pad(), cfg.embed_dim, cfg.attention_heads, cfg.ffn_embed_dim, dropout)
    return probe.to(next(model.parameters()).device)


def lr_factor(step, warmup):
    """Linear warm-up over ``warmup`` steps, then inverse-square-root decay (1 at the peak)."""
    step = max(step, 1)
    if warmup <= 0:
        return 1.0
    return step / warmup if step < warmup else math.sqrt(warmup / step)


@torch.no_grad()
def evaluate(model, probes, batches, pad, eos) -> Dict:
    """Summed Eq. 1 NLL and token count of each probe (key (rep, side)) over ``batches``."""
    totals = {k: [0.0, 0] for k in probes}
    reps_needed = {rep: rep for rep, _ in probes}
    for p in probes.values():
        p.eval()
    for sample in batches:
        reps = representations(model, sample, reps_needed)
        for (rep, side), p in probes.items():
            nll, ntok = recovery_nll(p, reps[rep], sample, side, pad, eos)
            totals[(rep, side)][0] += float(nll)
            totals[(rep, side)][1] += ntok
    return totals


def ppl_of(total):
    nll, ntok = total
    return math.exp(nll / ntok) if ntok else None


def train_group(model, task, keys, train_epochs, valid_batches, lr=5e-4, warmup=100, max_epochs=10,
                max_steps=None, eval_interval=200, patience=3, dropout=0.1):
    """Train one probe per key (rep, side) together, streaming batches from the frozen model.

    ``train_epochs(epoch)`` yields the training batches of one epoch; ``valid_batches()``
    the held-out batches. Every ``eval_interval`` steps (and at the end) each active probe is
    evaluated; it keeps its best state and stops after ``patience`` evaluations without
    improvement. Returns ({key: probe with its best state}, {key: training record}).
    """
    pad, eos = task.source_dictionary.pad(), task.source_dictionary.eos()
    probes = {k: build_probe(model, task, k[1], dropout) for k in keys}
    params = [p for probe in probes.values() for p in probe.parameters()]
    optim = torch.optim.Adam(params, lr=lr, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: lr_factor(step + 1, warmup))
    best = {k: {"valid_ppl": float("inf"), "step": 0, "state": None} for k in keys}
    bad = {k: 0 for k in keys}
    active = set(keys)
    reps_needed = {rep: rep for rep, _ in keys}
    step, last_eval = 0, -1

    def validate():
        totals = evaluate(model, {k: probes[k] for k in active}, valid_batches(), pad, eos)
        for k, total in totals.items():
            ppl = ppl_of(total)
            if ppl is not None and ppl < best[k]["valid_ppl"]:
                best[k].update(valid_ppl=ppl, step=step, state=copy.deepcopy(probes[k].state_dict()))
                bad[k] = 0
            else:
                bad[k] += 1
                if bad[k] >= patience:
                    active.discard(k)

    for epoch in range(max_epochs):
        for sample in train_epochs(epoch):
            reps = representations(model, sample, reps_needed)
            optim.zero_grad(set_to_none=True)  # stopped probes get no gradient: Adam skips them
            for k in active:
                probes[k].train()
                nll, ntok = recovery_nll(probes[k], reps[k[0]], sample, k[1], pad, eos)
                (nll / max(ntok, 1)).backward()
            optim.step()
            sched.step()
            step += 1
            if step % eval_interval == 0:
                validate()
                last_eval = step
            if not active or (max_steps is not None and step >= max_steps):
                break
        if not active or (max_steps is not None and step >= max_steps):
            break
    if last_eval != step and active:
        validate()
    records = {}
    for k in keys:
        if best[k]["state"] is not None:
            probes[k].load_state_dict(best[k]["state"])
        records[k] = {"best_step": best[k]["step"], "valid_ppl": best[k]["valid_ppl"], "steps": step}
    del optim
    return probes, records


def probe_keys(model, modules=MODULES, sides=SIDES, baseline=True, layers=None):
    """(sources: (module, layer) -> rep, keys: [(rep, side)]) with the zero baseline first.
    Modules with the same output (e.g. Add&Norm II and IFM) share a probe. ``layers``: the
    decoder layers to probe (1-based; default all)."""
    n_layers = len(model.decoder.layers)
    bad = [n for n in (layers or []) if not 1 <= n <= n_layers]
    if bad:
        raise ValueError(f"--layers {bad}: the decoder has layers 1..{n_layers}")
    sources = {k: v for k, v in module_sources(model).items() if k[0] in modules and (not layers or k[1] in layers)}
    if not sources:
        have = sorted({m for m, _ in module_sources(model)})
        raise ValueError(f"--modules {list(modules)}: none of them exists in this model (it has {have})")
    reps = ([ZERO] if baseline else []) + sorted(set(sources.values()))
    return sources, [(rep, side) for rep in reps for side in sides]


def run(model, task, train_epochs, valid_batches, test_batches, modules=MODULES, sides=SIDES,
        group_size=8, baseline=True, layers=None, progress=True, **train_kw):
    """Train all probes group by group (``group_size`` probes at a time), then measure Eq. 1
    on ``test_batches()``. Returns {"ppl": {side: {module: [per layer]}}, "baseline_ppl":
    {side: PPL}, ...}."""
    from ..progress import progress as progress_bar

    model.eval()
    sources, keys = probe_keys(model, modules, sides, baseline, layers)
    if group_size < 1:
        raise ValueError(f"--probe-group-size {group_size}: expected at least 1")
    groups = [keys[i: i + group_size] for i in range(0, len(keys), group_size)]
    pad, eos = task.source_dictionary.pad(), task.source_dictionary.eos()
    totals, records = {}, {}
    for n, group in enumerate(progress_bar(groups, show=progress, desc="probe groups", mininterval=0.1), 1):
        probes, recs = train_group(model, task, group, train_epochs, valid_batches, **train_kw)
        totals.update(evaluate(model, probes, test_batches(), pad, eos))
        records.update(recs)
        del probes
    n_layers = len(model.decoder.layers)
    table = {name: {s: {} for s in sides} for name in ("ppl", "nll_sum", "valid_ppl", "best_step")}
    for (module, layer), rep in sorted(sources.items()):
        for side in sides:
            values = {"ppl": ppl_of(totals[(rep, side)]), "nll_sum": totals[(rep, side)][0],
                      "valid_ppl": records[(rep, side)]["valid_ppl"], "best_step": records[(rep, side)]["best_step"]}
            for name, value in values.items():
                table[name][side].setdefault(module, [None] * n_layers)[layer - 1] = value
    out = dict(table)
    if baseline:
        out["baseline_ppl"] = {side: ppl_of(totals[(ZERO, side)]) for side in sides}
        out["baseline_valid_ppl"] = {side: records[(ZERO, side)]["valid_ppl"] for side in sides}
    out["tokens"] = {side: next(t[1] for k, t in totals.items() if k[1] == side) for side in sides}
    out["probes"] = len(keys)
    out["groups"] = len(groups)
    return out


PANELS = ("TEM", "SEM", "IFM", "AddNorm-I", "FFN", "AddNorm-II")


def plot(entries, title=""):
    """Recovery PPL by layer: one row per side, one panel per module (Fig. 3 and Fig. 8), one
    line per checkpoint (its own colour and marker); each checkpoint's zero-representation baseline is a dashed line
    of its colour. A side's panels share one PPL range (the modules compare), marked where it is narrow."""
    from ..outputs import checkpoint_styles, figure_title, mark_narrow_range, new_figure, share_range

    sides = list(entries[0]["ppl"])
    modules = [m for m in PANELS if any(m in e["ppl"][s] for e in entries for s in sides)]
    fig, axes = new_figure(len(sides), len(modules), figsize=(3.0 * len(modules), 2.8 * len(sides)), squeeze=False)
    styles = checkpoint_styles(len(entries))
    for r, side in enumerate(sides):
        for c, module in enumerate(modules):
            ax = axes[r][c]
            for entry, style in zip(entries, styles):
                colour = style["color"]
                label = entry.get("label", "")
                ys = entry["ppl"][side].get(module)
                if ys is not None:
                    ax.plot(range(1, len(ys) + 1), ys, marker=style["marker"], color=colour, label=label)
                    ax.set_xticks(range(1, len(ys) + 1))
                base = entry.get("baseline_ppl", {}).get(side)
                if base is not None:
                    ax.axhline(base, color=colour, linestyle="--", linewidth=1, label=f"{label} zero baseline")
            ax.set(xlabel="decoder layer", ylabel=f"{side} recovery PPL", title=f"{side}: {module}")
            ax.grid(alpha=0.3)
        share_range(axes[r])
        for ax in axes[r]:
            mark_narrow_range(ax)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(4, len(labels)), fontsize=8)
    if title:
        figure_title(fig, title, fontsize=9)
    return fig

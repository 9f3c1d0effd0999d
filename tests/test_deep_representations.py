"""Dou et al. (2018), "Exploiting Deep Representations for NMT": layer aggregation (Eq. 4-7,
Fig. 2), multi-layer attention (Eq. 8), layer diversity (Eq. 9-10), exploitation (Eq. 11),
parameter counts (Table 1), initialization from a vanilla checkpoint (§4.1)."""
import functools
import json
import math
import os

import pytest
import torch
import torch.nn.functional as F
from conftest import SMALL_MODEL_ARGS, run_cli, train_args, with_a_longer_dictionary
from fairseq import checkpoint_utils, options
from fairseq.data import Dictionary, data_utils
from fairseq.tasks.translation import TranslationTask

from fairseq_fusion_tools.analysis import exploitation
from fairseq_fusion.criterions.label_smoothed_cross_entropy_with_diversity import (
    LabelSmoothedCrossEntropyWithDiversityCriterion,
    layer_diversity,
)
from fairseq_fusion import fusion_options
from fairseq_fusion.modules.layer_aggregation import Aggregation
from fairseq_fusion.modules.multilayer_attention import MultiLayerSelfAttention

D, FFN, HEADS = 16, 32, 2


def small(layers=3):
    return [
        "--encoder-embed-dim", str(D), "--decoder-embed-dim", str(D),
        "--encoder-ffn-embed-dim", str(FFN), "--decoder-ffn-embed-dim", str(FFN),
        "--encoder-attention-heads", str(HEADS), "--decoder-attention-heads", str(HEADS),
        "--encoder-layers", str(layers), "--decoder-layers", str(layers),
    ]


def build(arch, *extra, layers=3, sizes=True):
    parser = options.get_training_parser()
    argv = ["unused", "--task", "translation", "-s", "en", "-t", "de", "--arch", arch, "--cpu"]
    args = options.parse_args_and_arch(parser, argv + (small(layers) if sizes else []) + list(extra))
    d = Dictionary()
    for i in range(40):
        d.add_symbol(f"w{i}")
    task = TranslationTask(args, d, d)
    torch.manual_seed(1)
    return task.build_model(args).eval(), task, args


def batch(task, bsz=3, src_len=7, tgt_len=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    src = torch.randint(d.nspecial, len(d), (bsz, src_len), generator=g)
    src[0, :2] = d.pad()  # left padding
    lengths = src.ne(d.pad()).sum(1)
    prev = torch.randint(d.nspecial, len(d), (bsz, tgt_len), generator=g)
    return src, lengths, prev


def layer_io(stack):
    """Hooks recording every layer's input x and output (lists, in call order)."""
    inputs, outputs = [], []
    handles = []
    for layer in stack.layers:
        handles.append(layer.register_forward_pre_hook(lambda m, a: inputs.append(a[0])))
        handles.append(layer.register_forward_hook(lambda m, a, o: outputs.append(o[0] if isinstance(o, tuple) else o)))
    return inputs, outputs, handles


# --- independent reference computations ----------------------------------------------------

def ref_agg(agg, xs):
    """Eq. 7 written out: LN(W2 act(W1 [x;y;z] + b1) + b2 + residual)."""
    z = torch.cat(xs, -1)
    h = z @ agg.fc1.weight.t() + agg.fc1.bias
    h = 1 / (1 + torch.exp(-h)) if agg.function == "sigmoid" else h.clamp(min=0)
    ff = h @ agg.fc2.weight.t() + agg.fc2.bias
    res = {"all": sum(xs), "top": xs[agg.top], "none": 0}[agg.residual]
    y = ff + res
    mu, var = y.mean(-1, keepdim=True), y.var(-1, unbiased=False, keepdim=True)
    return (y - mu) / torch.sqrt(var + 1e-5) * agg.layer_norm.weight + agg.layer_norm.bias


def ref_heads_attention(q, k, v, heads, key_pad=None, causal=False):
    """softmax(q k^T) v per head; q already projected and scaled (T x B x C)."""
    T, B, C = q.shape
    S, hd = k.size(0), C // heads
    qh = q.reshape(T, B, heads, hd)
    kh = k.reshape(S, B, heads, hd)
    vh = v.reshape(S, B, heads, hd)
    scores = torch.einsum("tbhd,sbhd->bhts", qh, kh)
    if causal:
        scores = scores.masked_fill(torch.ones(T, S).triu(1).bool(), float("-inf"))
    if key_pad is not None:
        scores = scores.masked_fill(key_pad[:, None, None, :], float("-inf"))
    out = torch.einsum("bhts,sbhd->tbhd", scores.softmax(-1), vh)
    return out.reshape(T, B, C)


def linear(x, lin):
    return x @ lin.weight.t() + (lin.bias if lin.bias is not None else 0)


# --- AGG (Eq. 7, §3.1.1, Table 4) ------------------------------------------------------------

@pytest.mark.parametrize("function", ["sigmoid", "relu"])
@pytest.mark.parametrize("residual", ["all", "top", "none"])
@pytest.mark.parametrize("n", [2, 3])
@torch.no_grad()
def test_aggregation_function_eq7(function, residual, n):
    torch.manual_seed(0)
    agg = Aggregation(n, D, FFN, function=function, residual=residual, top=1).eval()
    torch.nn.init.normal_(agg.layer_norm.weight)
    torch.nn.init.normal_(agg.layer_norm.bias)
    xs = [torch.randn(5, 2, D) for _ in range(n)]
    assert torch.allclose(agg(xs), ref_agg(agg, xs), atol=1e-5)
    assert agg.fc1.weight.shape == (FFN, n * D) and agg.fc2.weight.shape == (D, FFN)


@torch.no_grad()
def test_aggregation_attention_function():
    """Table 4 "ATTENTION": multi-head attention over the n inputs of a position, averaged."""
    torch.manual_seed(0)
    agg = Aggregation(3, D, FFN, function="attention", residual="all", num_heads=HEADS).eval()
    xs = [torch.randn(4, 2, D) for _ in range(3)]
    seq = torch.stack(xs, 0).reshape(3, 8, D)  # inputs as a length-3 sequence per position
    a = agg.attn
    q = linear(seq, a.q_proj) * (D // HEADS) ** -0.5
    out = linear(ref_heads_attention(q, linear(seq, a.k_proj), linear(seq, a.v_proj), HEADS), a.out_proj)
    expected = F.layer_norm(out.mean(0).reshape(4, 2, D) + sum(xs), (D,), agg.layer_norm.weight, agg.layer_norm.bias)
    assert torch.allclose(agg(xs), expected, atol=1e-5)
    with pytest.raises(ValueError, match="attention"):
        agg.input_weights()


# --- layer aggregation strategies -------------------------------------------------------------

@pytest.mark.parametrize("dense_sum", ["layers", "recursive", None])
@torch.no_grad()
def test_dense_connection_eq4(dense_sum):
    """Eq. 4, both readings of its sum; None = the preset's default (the lower layers' own outputs)."""
    model, task, args = build("transformer_dense", *(["--dense-sum", dense_sum] if dense_sum else []), layers=6)
    assert args.dense_sum == (dense_sum or "layers")
    src, lengths, prev = batch(task)
    _, raw_enc, h1 = layer_io(model.encoder)
    _, raw_dec, h2 = layer_io(model.decoder)
    enc = model.encoder(src, lengths, return_all_hiddens=True)
    feats, extra = model.decoder(prev, encoder_out=enc, features_only=True)
    for states, raw in ((enc["encoder_states"], raw_enc), (extra["inner_states"], raw_dec)):
        for l in range(1, 7):
            if dense_sum == "recursive":  # H^l = Layer(H^{l-1}) + sum_{i<l} H^i
                expected = raw[l - 1] + sum(states[i] for i in range(1, l))
            else:  # H^l = Layer(H^{l-1}) + sum_{i<l} Layer(H^{i-1})
                expected = sum(raw[i - 1] for i in range(1, l + 1))
            assert torch.allclose(states[l], expected, atol=1e-4)
        # the stack output in the layers' own outputs: recursive weights 16, 8, 4, 2, 1, 1 (L = 6)
        weights = [16, 8, 4, 2, 1, 1] if dense_sum == "recursive" else [1] * 6
        assert torch.allclose(states[6], sum(w * r for w, r in zip(weights, raw)), atol=1e-3)
    assert torch.equal(enc["encoder_out"][0], enc["encoder_states"][6])
    assert torch.equal(feats.transpose(0, 1), extra["inner_states"][6])
    vanilla = build("fusion_transformer", layers=6)[0]
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in vanilla.parameters())


def randomize_linear_combination(model):
    for stack in (model.encoder, model.decoder):  # unnormalized matrices, any sign
        for node in stack.layer_combiner.nodes():
            for w in node.weights:
                torch.nn.init.normal_(w.weight, std=0.3)


@torch.no_grad()
def test_linear_combination_eq5_at_the_output():
    """``--linear-combination-at output``: Eq. 5 as written, Ĥ = sum_{l=1}^{L} W_l H^l."""
    model, task, _ = build("transformer_linear_combination", "--linear-combination-at", "output")
    randomize_linear_combination(model)
    assert model.encoder.layers[0].plan == ("self_attn", "ffn")  # layers read their plain input
    src, lengths, _ = batch(task)
    inputs, raw, _ = layer_io(model.encoder)
    out = model.encoder(src, lengths, return_all_hiddens=True)["encoder_out"][0]
    expected = sum(h @ w.weight.t() for h, w in zip(raw, model.encoder.layer_combiner.weights))
    assert torch.allclose(out, expected, atol=1e-4)
    assert len(model.encoder.layer_combiner.weights) == 3


@torch.no_grad()
def test_linear_combination_at_every_layer():
    """Default reading: x^l = sum_{k=0}^{l-1} W^l_k H^k is what layer l computes on, and
    Ĥ = sum_{k=0}^{L} W_k H^k, H^0 the embedding layer, H^k the layers' own outputs."""
    model, task, args = build("transformer_linear_combination", layers=4)
    assert args.linear_combination_at == "every-layer"
    randomize_linear_combination(model)
    src, lengths, prev = batch(task)
    for side in ("encoder", "decoder"):
        stack = getattr(model, side)
        _, raw, _ = layer_io(stack)
        seen = []
        for layer in stack.layers:
            layer.extra_sublayers["linear_combination"].register_forward_hook(lambda m, a, o, seen=seen: seen.append(o))
        enc = model.encoder(src, lengths, return_all_hiddens=True)
        if side == "encoder":
            states, top = enc["encoder_states"], enc["encoder_out"][0]
        else:
            feats, extra = model.decoder(prev, encoder_out=enc, features_only=True)
            states, top = extra["inner_states"], feats.transpose(0, 1)
        h = [states[0]] + raw  # H^0 (embedding layer), H^1..H^4 (own outputs)
        assert all(torch.equal(a, b) for a, b in zip(states, h))  # nothing fed back into the states
        for l, layer in enumerate(stack.layers, start=1):
            ws = layer.extra_sublayers["linear_combination"].weights
            assert len(ws) == l and layer.plan[0] == "linear_combination"
            x_l = sum(h[k] @ ws[k].weight.t() for k in range(l))
            assert torch.allclose(seen[l - 1], x_l, atol=1e-4)
            if side == "encoder":  # the layer computes on x^l: its plain plan on x^l gives H^l
                plan = layer.plan
                layer.set_plan(plan[1:])
                pad = src.eq(task.source_dictionary.pad())
                assert torch.allclose(layer(x_l, encoder_padding_mask=pad if pad.any() else None), h[l], atol=1e-4)
                layer.set_plan(plan)
        ws = stack.layer_combiner.weights
        assert len(ws) == 5
        assert torch.allclose(top, sum(h[k] @ ws[k].weight.t() for k in range(5)), atol=1e-3)


@pytest.mark.parametrize("where", ["every-layer", "output"])
@torch.no_grad()
def test_linear_combination_starts_as_the_vanilla_model(where):
    """§4.1: with a vanilla model's parameters loaded, the fresh combination computes the vanilla model."""
    model, task, _ = build("transformer_linear_combination", "--linear-combination-at", where)
    vanilla, _, _ = build("fusion_transformer")
    missing, unexpected = model.load_state_dict(vanilla.state_dict(), strict=False)
    assert not unexpected and missing and all("linear_combination" in k or "layer_combiner" in k for k in missing)
    src, lengths, prev = batch(task)
    assert torch.allclose(model(src, lengths, prev)[0], vanilla(src, lengths, prev)[0], atol=1e-5)


@torch.no_grad()
def test_iterative_aggregation_eq6():
    model, task, _ = build("transformer_iterative_aggregation", layers=4)
    src, lengths, prev = batch(task)
    inputs, raw, _ = layer_io(model.encoder)
    out = model.encoder(src, lengths, return_all_hiddens=True)["encoder_out"][0]
    aggs = model.encoder.layer_combiner.aggs
    agg = raw[0]  # Ĥ^1 = H^1
    for l in range(2, 5):
        agg = ref_agg(aggs[l - 2], [raw[l - 1], agg])
    assert torch.allclose(out, agg, atol=1e-5)
    for l in range(1, 4):  # nothing is fed back: layer l+1 reads H^l
        assert torch.equal(inputs[l], raw[l - 1])


@pytest.mark.parametrize("layers", [6, 3, 2])
@torch.no_grad()
def test_hierarchical_aggregation_tree(layers):
    """Fig. 2b: Ĥ^1 = AGG(H^1, H^2), Ĥ^i = AGG(H^{2i-1}, H^{2i}, Ĥ^{i-1}); nodes feed layer 2i+1;
    odd L: the last node is AGG(H^L, Ĥ^{(L-1)/2})."""
    model, task, _ = build("transformer_hierarchical_aggregation", layers=layers)
    for stack_name in ("encoder", "decoder"):
        stack = getattr(model, stack_name)
        src, lengths, prev = batch(task)
        inputs, raw, _ = layer_io(stack)
        enc = model.encoder(src, lengths, return_all_hiddens=True)
        if stack_name == "encoder":
            top = enc["encoder_out"][0]
        else:
            feats, _ = model.decoder(prev, encoder_out=enc, features_only=True)
            top = feats.transpose(0, 1)
        aggs, node = stack.layer_combiner.aggs, None
        for i in range(1, layers // 2 + 1):
            xs = [raw[2 * i - 2], raw[2 * i - 1]] + ([node] if i > 1 else [])
            node = ref_agg(aggs[i - 1], xs)
            if 2 * i < layers:
                assert torch.allclose(inputs[2 * i], node, atol=1e-5)  # fed back into the backbone
        if layers % 2:
            node = ref_agg(aggs[-1], [raw[-1], node])
        assert len(aggs) == math.ceil(layers / 2)
        assert torch.allclose(top, node, atol=1e-5)


# --- multi-layer attention (Eq. 8) -------------------------------------------------------------

MLA_READINGS = [  # (--multilayer-attention-projections, --multilayer-attention-layers); first: the presets'
    ("separate", "above-k"), ("shared-query", "all"), ("separate", "all"), ("shared-query", "above-k"),
]


@pytest.mark.parametrize("projections,which", MLA_READINGS)
@pytest.mark.parametrize("k", [2, 3])
@torch.no_grad()
def test_multilayer_attention_eq8(k, projections, which):
    """Eq. 8 at layer 4 of 4: C^4_{-i} = ATT(Q, K^{4-i}, V^{4-i}), i = 1..k, C^4 = AGG(C^4_{-1..-k});
    ``separate``: each C^4_{-i} has its own query and output projections, ``shared-query``: C^4_{-1}'s."""
    extra = ["--multilayer-attention", str(k)]
    if (projections, which) != MLA_READINGS[0]:
        extra += ["--multilayer-attention-projections", projections, "--multilayer-attention-layers", which]
    model, task, args = build("transformer_multilayer_attention", *extra, layers=4)
    assert (args.multilayer_attention_projections, args.multilayer_attention_layers) == (projections, which)
    for stack in (model.encoder, model.decoder):  # which layers attend several layers
        multi = [l for l, layer in enumerate(stack.layers, start=1) if isinstance(layer.self_attn, MultiLayerSelfAttention)]
        assert multi == (list(range(k + 1, 5)) if which == "above-k" else [2, 3, 4])
        for l in multi:
            attn = stack.layers[l - 1].self_attn
            n = min(k, l) - 1  # lower layers beside l-1 (with "all", layer 0 = the embedding layer)
            assert len(attn.lower_k_proj) == len(attn.lower_v_proj) == n
            assert len(getattr(attn, "lower_q_proj", [])) == len(getattr(attn, "lower_out_proj", [])) == \
                (n if projections == "separate" else 0)
    src, lengths, prev = batch(task)
    pad = src.eq(task.source_dictionary.pad())
    attn = model.encoder.layers[3].self_attn
    seen = {}
    attn.register_forward_hook(lambda m, a, kw, o: seen.update(query=kw["query"], out=o[0]), with_kwargs=True)
    states = model.encoder(src, lengths, return_all_hiddens=True)["encoder_states"]
    scale = (D // HEADS) ** -0.5
    q = linear(states[3], attn.q_proj) * scale  # Q^4 from H^3
    cs = [linear(ref_heads_attention(q, linear(states[3], attn.k_proj), linear(states[3], attn.v_proj), HEADS, pad), attn.out_proj)]
    for i in range(2, k + 1):
        h = states[4 - i]
        kk, vv = linear(h, attn.lower_k_proj[i - 2]), linear(h, attn.lower_v_proj[i - 2])
        if projections == "separate":
            qi, out = linear(states[3], attn.lower_q_proj[i - 2]) * scale, attn.lower_out_proj[i - 2]
        else:
            qi, out = q, attn.out_proj
        cs.append(linear(ref_heads_attention(qi, kk, vv, HEADS, pad), out))
    keep = ~pad.t().unsqueeze(-1)  # padded queries are never read
    assert torch.allclose(seen["out"] * keep, ref_agg(attn.agg, cs) * keep, atol=1e-5)
    # layer 1 only has the embedding layer below it: plain self-attention
    assert type(model.encoder.layers[0].self_attn).__name__ == "MultiheadAttention"


FOUR_LAYERS = ("--encoder-layers", "4", "--decoder-layers", "4")
OLD_MLA = ("--multilayer-attention-projections", "shared-query", "--multilayer-attention-layers", "all")
# every reading of the Dou et al. options, including those the contract suite (3 + 3 layers, presets) does not reach
READINGS = {
    "mla_k2": ("transformer_multilayer_attention", ()),
    "mla_k3_4_layers_prenorm": ("transformer_multilayer_attention_k3",
                                FOUR_LAYERS + ("--decoder-normalize-before", "--encoder-normalize-before")),
    "mla_k3_shared_query_all": ("transformer_multilayer_attention_k3", OLD_MLA),
    "mla_k2_shared_query_above_k_4_layers": ("transformer_multilayer_attention",
                                             FOUR_LAYERS + ("--multilayer-attention-projections", "shared-query")),
    "mla_k3_separate_all_prenorm": ("transformer_multilayer_attention_k3", (
        "--multilayer-attention-layers", "all", "--decoder-normalize-before", "--encoder-normalize-before")),
    "hierarchical+mla_k2_4_layers": ("transformer_hierarchical_aggregation", FOUR_LAYERS + ("--multilayer-attention", "2")),
    "dense": ("transformer_dense", ()),
    "dense_recursive": ("transformer_dense", ("--dense-sum", "recursive")),
    "linear_every_layer": ("transformer_linear_combination", ()),
    "linear_output": ("transformer_linear_combination", ("--linear-combination-at", "output")),
    "linear_every_layer+mla_k2_4_layers": ("transformer_linear_combination", FOUR_LAYERS + ("--multilayer-attention", "2")),
    "iterative_attention_agg": ("transformer_iterative_aggregation", ("--aggregation-function", "attention")),
}


@pytest.mark.parametrize("name", sorted(READINGS))
@torch.no_grad()
def test_incremental_decoding_with_reorder_equals_full(name):
    arch, extra = READINGS[name]
    model, task, _ = build(arch, *extra)
    if name.startswith("linear"):  # away from the vanilla start
        randomize_linear_combination(model)
    src, lengths, prev = batch(task, bsz=4)
    beams = torch.tensor([0, 0, 1, 1])  # 2 sentences x 2 hypotheses, as in beam search
    src, lengths = src[beams], lengths[beams]
    enc = model.encoder(src, lengths, return_all_hiddens=True)
    order = torch.tensor([1, 1, 3, 2])  # hypotheses reordered within their sentence
    full = model.get_normalized_probs(model.decoder(prev[order], encoder_out=enc), log_probs=True)
    state, steps = {}, []
    for t in range(prev.size(1)):
        if t == 3:
            model.decoder.reorder_incremental_state_scripting(state, order)
            enc = model.encoder.reorder_encoder_out(enc, order)
        tokens = prev[:, : t + 1] if t < 3 else prev[order][:, : t + 1]
        steps.append(model.get_normalized_probs(model.decoder(tokens, encoder_out=enc, incremental_state=state), log_probs=True))
    inc = torch.cat([torch.cat(steps[:3], 1)[order], torch.cat(steps[3:], 1)], 1)
    assert torch.allclose(inc, full, atol=1e-5)


@pytest.mark.parametrize("name", sorted(READINGS))
def test_reading_keeps_padding_gradients_and_checkpointing(name):
    """The contracts of tests/test_contracts.py for every reading (the suite builds presets at 3 + 3
    layers, where k = 3 multi-layer attention above k has no layer): a padded batch = each sentence
    alone, every parameter gets a gradient, --checkpoint-activations gives the same loss and gradients."""
    arch, extra = READINGS[name]
    model, task, _ = build(arch, *extra, "--dropout", "0.1")
    if name.startswith("linear"):
        randomize_linear_combination(model)
    d = task.source_dictionary
    g = torch.Generator().manual_seed(4)
    srcs = [torch.randint(d.nspecial, len(d), (n,), generator=g) for n in (7, 4, 9)]
    tgts = [torch.randint(d.nspecial, len(d), (n,), generator=g) for n in (5, 8, 3)]
    src = data_utils.collate_tokens(srcs, d.pad(), left_pad=True)
    prev = data_utils.collate_tokens(tgts, d.pad(), left_pad=False)
    lengths = torch.tensor([len(x) for x in srcs])
    with torch.no_grad():
        batched = model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
        for i in range(3):
            alone = model.get_normalized_probs(model(srcs[i][None], lengths[i:i + 1], tgts[i][None]), log_probs=True)
            assert (batched[i, : len(tgts[i])] - alone[0]).abs().max() <= 1e-5, f"sentence {i}"

    def step(m):
        m.train()
        torch.manual_seed(5)
        lprobs = m.get_normalized_probs(m(src, lengths, prev), log_probs=True)
        loss = F.nll_loss(lprobs.flatten(0, 1), prev.flatten(), ignore_index=d.pad(), reduction="sum")
        loss.backward()
        return loss.detach(), {n: p.grad for n, p in m.named_parameters()}

    loss, grads = step(model)
    assert not [n for n, g in grads.items() if g is None or not g.abs().sum() > 0]
    ckpt, _, args = build(arch, *extra, "--dropout", "0.1", "--checkpoint-activations")
    assert args.checkpoint_activations
    ckpt.load_state_dict(model.state_dict())
    loss_ckpt, grads_ckpt = step(ckpt)
    assert abs(loss.item() - loss_ckpt.item()) <= 1e-6 * abs(loss.item())
    for n, g in grads.items():
        assert (g - grads_ckpt[n]).abs().max() <= 1e-6, n


# --- parameter counts (Tables 1-2) --------------------------------------------------------------
# Built at full size on the meta device through fairseq's argparse (presets apply), with untied
# embeddings (source and target embeddings and the softmax matrix, no softmax bias; sinusoidal
# positions), a joint vocabulary of V types on both sides. The totals fix 3V (V_src + 2 V_tgt):
# En-De: 88.0M, 88M, 111M, 264M and 356M all round as printed exactly for V in 28,524..28,588;
# Zh-En: 108M, 131M, 304M and 396M for V in 41,388..41,609 (test_vocabulary_implied_by_the_totals).
# We use the middle of each range.
VOCAB = {"en-de": 28556, "zh-en": 41499}
BASE, BIG = (512, 2048), (1024, 4096)  # (d, FFN size); 6 + 6 layers


def transformer_params(d, ffn, vocab, layers=6):
    """fairseq's post-norm transformer, counted by hand."""
    attn = 4 * (d * d + d)  # q, k, v, out projections with biases
    ffn_block = d * ffn + ffn + ffn * d + d
    norm = 2 * d
    encoder = layers * (attn + ffn_block + 2 * norm)
    decoder = layers * (2 * attn + ffn_block + 3 * norm)
    return encoder + decoder + 3 * vocab * d


def agg_params(n, d, ffn):
    """AGG of n inputs (Eq. 7): FF n*d -> ffn -> d with biases, LayerNorm."""
    return n * d * ffn + ffn + ffn * d + d + 2 * d


def added_params(technique, d, ffn, layers=6):
    """What each Table 1 technique adds to both stacks."""
    mat, attn = d * d, 4 * (d * d + d)
    per_stack = {
        "dense": 0,
        # every layer's input (layer l: l states H^0..H^{l-1}) and the output (L + 1 states)
        "linear": sum(l * mat for l in range(1, layers + 2)),
        "linear_output": layers * mat,  # Eq. 5 as written
        "iterative": (layers - 1) * agg_params(2, d, ffn),  # Ĥ^2..Ĥ^L
        "hierarchical": agg_params(2, d, ffn) + (layers // 2 - 1) * agg_params(3, d, ffn),
        # layers above k: k - 1 separate attentions beside its own + AGG of k inputs
        "mla2": (layers - 2) * (attn + agg_params(2, d, ffn)),
        "mla3": (layers - 3) * (2 * attn + agg_params(3, d, ffn)),
        # shared query: K/V of each lower state; layer l >= 2 attends min(k, l) states, embedding included
        "mla2_shared": (layers - 1) * (attn // 2 + agg_params(2, d, ffn)),
        "mla3_shared": (attn // 2 + agg_params(2, d, ffn)) + (layers - 2) * (attn + agg_params(3, d, ffn)),
    }[technique]
    return 2 * per_stack


@functools.lru_cache(maxsize=None)
def n_params(arch, *extra, vocab=VOCAB["en-de"]):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["unused", "--task", "translation", "-s", "en", "-t", "de", "--arch", arch,
                                                "--criterion", fusion_options.default_criterion(arch), *extra])
    d = Dictionary()
    for i in range(vocab - len(d)):
        d.add_symbol(f"w{i}")
    assert len(d) == vocab
    with torch.device("meta"):
        model = TranslationTask(args, d, d).build_model(args)
    assert not args.share_all_embeddings and not args.share_decoder_input_output_embed
    return sum(p.numel() for p in model.parameters())


def rounds_to(count, printed, decimals):
    """``count`` parameters print as ``printed`` millions with ``decimals`` decimals."""
    return abs(count / 1e6 - printed) < 0.5 * 10 ** -decimals


TABLE1 = [  # row, arch, technique, printed "# Para." (row 1: total; rows 2-7: added)
    (1, "fusion_transformer", None, 88.0),
    (2, "transformer_dense", "dense", 0.0),
    (3, "transformer_linear_combination", "linear", 14.7),
    (4, "transformer_iterative_aggregation", "iterative", 31.5),
    (5, "transformer_hierarchical_aggregation", "hierarchical", 23.1),
    (6, "transformer_multilayer_attention", "mla2", 33.6),
    (7, "transformer_multilayer_attention_k3", "mla3", 37.8),
]


@pytest.mark.parametrize("row,arch,technique,printed", TABLE1, ids=[f"row{r[0]}" for r in TABLE1])
def test_parameter_counts_table1(row, arch, technique, printed):
    base = n_params("fusion_transformer")
    assert base == transformer_params(*BASE, VOCAB["en-de"])
    count = n_params(arch)
    if technique is None:
        assert rounds_to(count, printed, 1)
        return
    assert count - base == added_params(technique, *BASE)
    assert rounds_to(count - base, printed, 1), f"row {row}: +{(count - base) / 1e6:.2f}M, Table 1: +{printed}M"


def test_parameter_counts_of_the_other_readings():
    """The other readings stay reachable, with their own counts (they do not match Table 1)."""
    base = n_params("fusion_transformer")
    counts = {
        "linear_output": n_params("transformer_linear_combination", "--linear-combination-at", "output"),
        "mla2_shared": n_params("transformer_multilayer_attention", *OLD_MLA),
        "mla3_shared": n_params("transformer_multilayer_attention_k3", *OLD_MLA),
        "dense": n_params("transformer_dense", "--dense-sum", "recursive"),
    }
    for technique, count in counts.items():
        assert count - base == added_params(technique, *BASE), technique
    assert [round((counts[t] - base) / 1e6, 1) for t in ("linear_output", "mla2_shared", "mla3_shared")] == [3.1, 36.7, 49.3]


TABLE2 = [  # pair, arch, printed "# Para." (Table 2, "this work")
    ("en-de", "fusion_transformer", BASE, None, 88),
    ("en-de", "transformer_hierarchical_aggregation", BASE, "hierarchical", 111),
    ("en-de", "fusion_transformer_big", BIG, None, 264),
    ("en-de", "transformer_hierarchical_aggregation_big", BIG, "hierarchical", 356),
    ("zh-en", "fusion_transformer", BASE, None, 108),
    ("zh-en", "transformer_hierarchical_aggregation", BASE, "hierarchical", 131),
    ("zh-en", "fusion_transformer_big", BIG, None, 304),
    ("zh-en", "transformer_hierarchical_aggregation_big", BIG, "hierarchical", 396),
]


@pytest.mark.parametrize("pair,arch,size,technique,printed", TABLE2, ids=[f"{r[0]}-{r[4]}M" for r in TABLE2])
def test_parameter_counts_table2(pair, arch, size, technique, printed):
    """Table 2: "+ Deep Representations" = hierarchical aggregation (+ L_diversity, no parameters)."""
    count = n_params(arch, vocab=VOCAB[pair])
    expected = transformer_params(*size, VOCAB[pair]) + (added_params(technique, *size) if technique else 0)
    assert count == expected
    assert rounds_to(count, printed, 0), f"{arch}: {count / 1e6:.2f}M, Table 2: {printed}M"


def test_vocabulary_implied_by_the_totals():
    """The joint vocabularies for which every printed total of a language pair rounds as printed."""
    totals = {
        "en-de": [(BASE, None, 88.0, 1), (BASE, None, 88, 0), (BASE, "hierarchical", 111, 0),
                  (BIG, None, 264, 0), (BIG, "hierarchical", 356, 0)],
        "zh-en": [(BASE, None, 108, 0), (BASE, "hierarchical", 131, 0), (BIG, None, 304, 0), (BIG, "hierarchical", 396, 0)],
    }

    def fits(pair, vocab):
        return all(rounds_to(transformer_params(*size, vocab) + (added_params(t, *size) if t else 0), printed, decimals)
                   for size, t, printed, decimals in totals[pair])

    for pair, (lo, hi) in {"en-de": (28524, 28588), "zh-en": (41388, 41609)}.items():
        assert fits(pair, lo) and fits(pair, hi) and fits(pair, VOCAB[pair])
        assert not fits(pair, lo - 1) and not fits(pair, hi + 1)


# --- layer diversity (Eq. 9-10) ----------------------------------------------------------------

def test_layer_diversity_eq10():
    torch.manual_seed(0)
    states = [torch.randn(4, 2, 5) for _ in range(3)]
    keep = torch.tensor([[True, True, False, False], [True, True, True, True]])
    pairs = []
    for l in range(2):
        terms = []
        for b in range(2):
            for t in range(4):
                if keep[b, t]:
                    a, c = states[l][t, b].tolist(), states[l + 1][t, b].tolist()
                    dot = sum(x * y for x, y in zip(a, c))
                    cos = dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in c))
                    terms.append(1 - cos ** 2)
        pairs.append(sum(terms) / len(terms))
    assert layer_diversity(states, keep).item() == pytest.approx(sum(pairs) / 2, abs=1e-6)
    same = [states[0], 2 * states[0], -states[0]]  # linearly dependent: no diversity
    assert layer_diversity(same, keep).item() == pytest.approx(0, abs=1e-6)


def criterion_step(model, task, lam, sample):
    crit = LabelSmoothedCrossEntropyWithDiversityCriterion(task, False, 0.1, diversity_lambda=lam)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss, _, log = crit(model, sample)
    opt.zero_grad()
    loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        _, _, after = crit(model, sample)
    return log, after


def test_training_step_increases_diversity():
    model, task, args = build("transformer_hierarchical_aggregation", "--dropout", "0")
    src, lengths, prev = batch(task, bsz=4, seed=3)
    target = torch.cat([prev[:, 1:], torch.full((4, 1), task.target_dictionary.eos())], 1)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": target, "ntokens": target.numel()}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    before, with_div = criterion_step(model, task, 1.0, sample)
    model.load_state_dict(state)
    _, without = criterion_step(model, task, 0.0, sample)
    n = sample["ntokens"]
    assert with_div["diversity"] / n > before["diversity"] / n  # the step made layers more diverse
    assert with_div["diversity"] > without["diversity"]  # ... more than likelihood alone
    assert set(before) >= {"diversity", "diversity_encoder", "diversity_decoder"}


def test_default_criterion_of_deep_representations():
    assert fusion_options.default_criterion("transformer_hierarchical_aggregation_big") == \
        "label_smoothed_cross_entropy_with_diversity"
    _, _, args = build("transformer_hierarchical_aggregation_big", "--encoder-layers", "2", "--decoder-layers", "2",
                       sizes=False)
    assert args.encoder_embed_dim == 1024 and args.layer_aggregation == "hierarchical"


# --- bad input, composition -------------------------------------------------------------------

@pytest.mark.parametrize("extra,match", [
    (("--arch", "transformer_hierarchical_aggregation", "--encoder-layers", "1"), "--encoder-layers 1"),
    (("--arch", "fusion_transformer", "--multilayer-attention", "1"), "--multilayer-attention"),
    (("--arch", "transformer_multilayer_attention", "--lexical-shortcuts"), "--lexical-shortcuts"),
])
def test_bad_flags_are_named(extra, match):
    if "--lexical-shortcuts" in extra and not any(f.name == "lexical_shortcuts" for g in fusion_options.GROUPS for f in g.flags):
        pytest.skip("lexical shortcuts are not registered")
    arch = extra[1]
    with pytest.raises(ValueError, match=match):
        build(arch, *extra[2:])


@torch.no_grad()
def test_lexical_shortcuts_compose_with_hierarchical_aggregation():
    if not any(f.name == "lexical_shortcuts" for g in fusion_options.GROUPS for f in g.flags):
        pytest.skip("lexical shortcuts are not registered")
    model, task, _ = build("transformer_hierarchical_aggregation", "--lexical-shortcuts")
    assert model.encoder.layer_combiner is not None
    assert type(model.encoder.layers[1].self_attn).__name__ == "ShortcutMultiheadAttention"
    src, lengths, prev = batch(task)
    enc = model.encoder(src, lengths, return_all_hiddens=True)
    full = model.get_normalized_probs(model.decoder(prev, encoder_out=enc), log_probs=True)
    state = {}
    inc = [model.get_normalized_probs(model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state), log_probs=True)
           for t in range(prev.size(1))]
    assert torch.allclose(torch.cat(inc, 1), full, atol=1e-5)


# --- exploitation score (Eq. 11) ---------------------------------------------------------------

def test_exploitation_score_eq11():
    model, _, _ = build("transformer_hierarchical_aggregation", layers=6)
    result = exploitation.analyze(model)
    group = result["encoder: hierarchical aggregation"]
    assert group["nodes"] == ["Ĥ^1", "Ĥ^2", "Ĥ^3"]
    w = model.encoder.layer_combiner.aggs[1].fc1.weight.detach().abs()  # node 2: [H^3; H^4; Ĥ^1]
    mass = [w[:, j * D:(j + 1) * D].sum().item() for j in range(3)]
    expected = {name: m / sum(mass) for name, m in zip(["H^{2i-1}", "H^{2i}", "Ĥ^{i-1}"], mass)}
    assert group["scores"]["Ĥ^2"] == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ValueError, match="no aggregation nodes"):
        exploitation.analyze(build("transformer_dense")[0])


def test_exploitation_score_of_the_every_layer_linear_combination():
    """Every layer's input combination is a node: at the vanilla start all weight is on H^{l-1}."""
    model, _, _ = build("transformer_linear_combination", layers=3)
    group = exploitation.analyze(model)["decoder: linear combination"]
    assert group["nodes"] == ["x^1", "x^2", "x^3", "Ĥ"]
    assert group["inputs"] == ["H^0", "H^1", "H^2", "H^3"]
    assert group["scores"]["x^3"] == {"H^0": 0.0, "H^1": 0.0, "H^2": 1.0}
    assert group["scores"]["Ĥ"]["H^3"] == 1.0


# --- initialization from a vanilla checkpoint (§4.1), end to end -------------------------------

@pytest.fixture(scope="module")
def vanilla_checkpoint(multi30k_slice, tmp_path_factory):
    save = str(tmp_path_factory.mktemp("vanilla"))
    run_cli(train_args(multi30k_slice, save, arch="transformer", max_update=2,
                       extra=["--no-epoch-checkpoints", "--disable-validation"]))
    return os.path.join(save, "checkpoint_last.pt")


def test_init_from_vanilla_loads_every_vanilla_parameter(multi30k_slice, vanilla_checkpoint):
    vanilla = checkpoint_utils.load_checkpoint_to_cpu(vanilla_checkpoint)["model"]
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [
        multi30k_slice, "--arch", "transformer_hierarchical_aggregation", "--share-all-embeddings",
        "--init-from-vanilla", vanilla_checkpoint, *SMALL_MODEL_ARGS])
    from fairseq import tasks
    task = tasks.setup_task(args)
    model = task.build_model(args)
    own = model.state_dict()
    assert all(torch.equal(own[k], v) for k, v in vanilla.items())
    assert sorted(set(own) - set(vanilla)) and all("layer_combiner" in k for k in set(own) - set(vanilla))
    assert args.init_from_vanilla is None  # consumed: saved checkpoints do not read it again
    args.encoder_layers, args.init_from_vanilla = 3, vanilla_checkpoint
    with pytest.raises(ValueError, match="--init-from-vanilla .* lacks"):
        task.build_model(args)


def test_init_from_vanilla_of_other_dictionaries_names_them(multi30k_slice, vanilla_checkpoint, tmp_path):
    """A vanilla checkpoint trained with another vocabulary: one line naming the embeddings and the dictionaries."""
    from fairseq import tasks

    other = with_a_longer_dictionary(multi30k_slice, tmp_path / "other")
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(other), "--arch", "transformer_hierarchical_aggregation", "--share-all-embeddings",
        "--init-from-vanilla", vanilla_checkpoint, *SMALL_MODEL_ARGS])
    with pytest.raises(ValueError) as refused:
        tasks.setup_task(args).build_model(args)
    assert "embed_tokens.weight has shape" in str(refused.value) and "and dictionaries" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_init_from_vanilla_cli_and_exploitation_heatmap(multi30k_slice, vanilla_checkpoint, tmp_path):
    save = str(tmp_path / "hier")
    cmd = train_args(multi30k_slice, save, arch="transformer_hierarchical_aggregation", max_update=2,
                     extra=["--init-from-vanilla", vanilla_checkpoint, "--no-epoch-checkpoints", "--disable-validation"])
    cmd[cmd.index("label_smoothed_cross_entropy")] = "label_smoothed_cross_entropy_with_diversity"
    proc = run_cli(cmd)
    log = proc.stdout + proc.stderr
    assert "--init-from-vanilla" in log and "freshly initialized" in log and "diversity=" in log
    out = str(tmp_path / "expl")
    run_cli(["fusion-exploitation-score", "--path", os.path.join(save, "checkpoint_last.pt"), "--out", out])
    data = json.load(open(out + ".json"))
    assert os.path.getsize(out + ".png") > 1000
    # Eq. 11 recomputed from the checkpoint's tensors: the first decoder node reads [H^1; H^2] (width 32 each)
    state = torch.load(os.path.join(save, "checkpoint_last.pt"), map_location="cpu", weights_only=False)["model"]
    w = state["decoder.layer_combiner.aggs.0.fc1.weight"].abs()
    half = w.size(1) // 2
    mass = [w[:, :half].sum().item(), w[:, half:].sum().item()]
    scores = data["groups"]["decoder: hierarchical aggregation"]["scores"]["Ĥ^1"]
    assert list(scores.values()) == pytest.approx([m / sum(mass) for m in mass], abs=1e-6)

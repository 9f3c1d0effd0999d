"""Dou et al. (2018), "Exploiting Deep Representations for NMT": layer aggregation (Eq. 4-7,
Fig. 2), multi-layer attention (Eq. 8), layer diversity (Eq. 9-10), exploitation (Eq. 11),
parameter counts (Table 1), initialization from a vanilla checkpoint (§4.1)."""
import json
import math
import os

import pytest
import torch
import torch.nn.functional as F
from conftest import SMALL_MODEL_ARGS, run_cli, train_args
from fairseq import checkpoint_utils, options
from fairseq.data import Dictionary
from fairseq.tasks.translation import TranslationTask

from fairseq_fusion.analysis import exploitation
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

@torch.no_grad()
def test_dense_connection_eq4():
    model, task, _ = build("transformer_dense")
    src, lengths, prev = batch(task)
    _, raw_enc, h1 = layer_io(model.encoder)
    _, raw_dec, h2 = layer_io(model.decoder)
    enc = model.encoder(src, lengths, return_all_hiddens=True)
    _, extra = model.decoder(prev, encoder_out=enc)
    for states, raw in ((enc["encoder_states"], raw_enc), (extra["inner_states"], raw_dec)):
        for l in range(1, 4):  # H^l = Layer(H^{l-1}) + sum_{i<l} H^i
            expected = raw[l - 1] + sum(states[i] for i in range(1, l))
            assert torch.allclose(states[l], expected, atol=1e-5)
    assert torch.equal(enc["encoder_out"][0], enc["encoder_states"][3])
    assert sum(p.numel() for p in model.parameters()) == sum(p.numel() for p in build("fusion_transformer")[0].parameters())


@torch.no_grad()
def test_linear_combination_eq5():
    model, task, _ = build("transformer_linear_combination")
    for w in model.encoder.layer_combiner.weights:  # unnormalized matrices, any sign
        torch.nn.init.normal_(w.weight)
    src, lengths, _ = batch(task)
    _, raw, _ = layer_io(model.encoder)
    out = model.encoder(src, lengths, return_all_hiddens=True)["encoder_out"][0]
    expected = sum(h @ w.weight.t() for h, w in zip(raw, model.encoder.layer_combiner.weights))
    assert torch.allclose(out, expected, atol=1e-4)


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

@pytest.mark.parametrize("k", [2, 3])
@torch.no_grad()
def test_multilayer_attention_eq8(k):
    model, task, _ = build("transformer_multilayer_attention", "--multilayer-attention", str(k))
    src, lengths, prev = batch(task)
    pad = src.eq(task.source_dictionary.pad())
    layer = model.encoder.layers[2]  # layer 3 attends layers 2, 1 (and 0 when k = 3)
    attn = layer.self_attn
    assert isinstance(attn, MultiLayerSelfAttention) and len(attn.lower_k_proj) == k - 1
    seen = {}
    attn.register_forward_hook(lambda m, a, kw, o: seen.update(query=kw["query"], out=o[0]), with_kwargs=True)
    states = model.encoder(src, lengths, return_all_hiddens=True)["encoder_states"]
    q = linear(states[2], attn.q_proj) * (D // HEADS) ** -0.5  # Q^3 from H^2, shared
    cs = [linear(ref_heads_attention(q, linear(states[2], attn.k_proj), linear(states[2], attn.v_proj), HEADS, pad), attn.out_proj)]
    for i in range(2, k + 1):
        h = states[3 - i]
        kk, vv = linear(h, attn.lower_k_proj[i - 2]), linear(h, attn.lower_v_proj[i - 2])
        cs.append(linear(ref_heads_attention(q, kk, vv, HEADS, pad), attn.out_proj))
    keep = ~pad.t().unsqueeze(-1)  # padded queries are never read
    assert torch.allclose(seen["out"] * keep, ref_agg(attn.agg, cs) * keep, atol=1e-5)
    # layer 1 only has the embedding layer below it: plain self-attention
    assert type(model.encoder.layers[0].self_attn).__name__ == "MultiheadAttention"


@pytest.mark.parametrize("arch,extra", [
    ("transformer_multilayer_attention", ()),
    ("transformer_multilayer_attention_k3", ("--decoder-normalize-before", "--encoder-normalize-before")),
    ("transformer_hierarchical_aggregation", ("--multilayer-attention", "2")),
    ("transformer_dense", ()),
    ("transformer_linear_combination", ()),
    ("transformer_iterative_aggregation", ("--aggregation-function", "attention")),
])
@torch.no_grad()
def test_incremental_decoding_with_reorder_equals_full(arch, extra):
    model, task, _ = build(arch, *extra)
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


# --- parameter counts (Table 1, base model) ---------------------------------------------------

def n_params(arch, *extra):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, ["unused", "--task", "translation", "-s", "en", "-t", "de", "--arch", arch, *extra])
    d = Dictionary()
    with torch.device("meta"):
        model = TranslationTask(args, d, d).build_model(args)
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_table1():
    base = n_params("fusion_transformer")
    assert base > 40e6  # the base sizes: d = 512, 6 + 6 layers
    assert n_params("transformer_dense") - base == 0
    assert abs(n_params("transformer_iterative_aggregation") - base - 31.5e6) / 31.5e6 < 0.01
    assert abs(n_params("transformer_hierarchical_aggregation") - base - 23.1e6) / 23.1e6 < 0.01
    d, ffn = 512, 2048
    assert n_params("transformer_linear_combination") - base == 2 * 6 * d * d  # Eq. 5: six d x d W_l per stack
    # Eq. 8 reading: per attended lower layer its K/V projections, per layer one k-input AGG
    agg = lambda n: n * d * ffn + ffn + ffn * d + d + 2 * d  # noqa: E731
    kv = 2 * (d * d + d)
    assert n_params("transformer_multilayer_attention") - base == 2 * 5 * (kv + agg(2))
    assert n_params("transformer_multilayer_attention_k3") - n_params("transformer_multilayer_attention") \
        == 2 * 4 * (kv + agg(3) - agg(2))
    # Table 1: k = 3 adds 4.2M over k = 2 in attention projections: 8 layers x K/V
    assert abs(2 * 4 * kv - 4.2e6) / 4.2e6 < 0.01


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
    for group in data["groups"].values():
        for scores in group["scores"].values():
            assert sum(scores.values()) == pytest.approx(1.0)

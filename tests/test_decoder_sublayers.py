"""Decoder sub-layer orders and simplified decoder (Yang et al. 2020); the information probe is in
tests/test_information_probe.py."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from fairseq_fusion import fusion_options
from fairseq_fusion.errors import FusionError
from fairseq_fusion.modules import decoder_sublayers
from fairseq_fusion.modules.decoder_sublayers import decoder_plan
from conftest import build_model, write_dicts

SMALL = [
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--encoder-layers", "2", "--decoder-layers", "3",
]
VOCAB = 30


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("sublayer_dicts"), VOCAB)


def build(data_dir, arch, *extra, small=True, seed=1):
    model, task, args = build_model(data_dir, arch, "--dropout", "0.0", *(SMALL if small else []), *extra, seed=seed)
    return model.eval(), task, args


def n_params(module):
    return sum(p.numel() for p in module.parameters())


# ---------------------------------------------------------------- the equations (§2.1)

def ln(x, norm):
    return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias, norm.eps)


def att(mha, query, memory, causal=False):
    """Multi-head attention written out (Vaswani et al. 2017), T x B x C."""
    t, b, c = query.shape
    h = mha.num_heads
    d = c // h
    q = F.linear(query, mha.q_proj.weight, mha.q_proj.bias) * d ** -0.5
    k = F.linear(memory, mha.k_proj.weight, mha.k_proj.bias)
    v = F.linear(memory, mha.v_proj.weight, mha.v_proj.bias)
    split = lambda z: z.reshape(z.size(0), b, h, d).permute(1, 2, 0, 3)  # B x H x T x d
    scores = split(q) @ split(k).transpose(-1, -2)
    if causal:
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    out = (scores.softmax(-1) @ split(v)).permute(2, 0, 1, 3).reshape(t, b, c)
    return F.linear(out, mha.out_proj.weight, mha.out_proj.bias)


def tem(layer, x):  # C = LN(ATT(Q, K, V) + L)
    return ln(att(layer.self_attn, x, x, causal=True) + x, layer.self_attn_layer_norm)


def sem_add_norm(layer, x, enc):  # D = LN(ATT(C, K_e, V_e) + C): SEM + Add&Norm I
    return ln(att(layer.encoder_attn, x, enc) + x, layer.encoder_attn_layer_norm)


def ffn_add_norm(layer, x):  # L = LN(FFN(D) + D): FFN + Add&Norm II
    hidden = F.relu(F.linear(x, layer.fc1.weight, layer.fc1.bias))
    return ln(F.linear(hidden, layer.fc2.weight, layer.fc2.bias) + x, layer.final_layer_norm)


EQUATIONS = {
    "transformer_sem_tem_ifm": lambda l, x, e: ffn_add_norm(l, tem(l, sem_add_norm(l, x, e))),
    "transformer_sem_ifm": lambda l, x, e: ffn_add_norm(l, sem_add_norm(l, x, e)),
    "transformer_simplified_decoder": lambda l, x, e: sem_add_norm(l, tem(l, x), e),
    "fusion_transformer": lambda l, x, e: ffn_add_norm(l, sem_add_norm(l, tem(l, x), e)),
}


@pytest.mark.parametrize("arch", sorted(EQUATIONS))
@torch.no_grad()
def test_layer_computes_the_papers_equations(arch, data_dir):
    model, _, _ = build(data_dir, arch)
    layer = model.decoder.layers[1]
    x, enc = torch.randn(5, 2, 16), torch.randn(7, 2, 16)
    out, _, _ = layer(x, enc, None, None, self_attn_mask=model.decoder.buffered_future_mask(x))
    expected = EQUATIONS[arch](layer, x, enc)
    assert (out - expected).abs().max().item() < 1e-5


# ---------------------------------------------------------------- parameters (Table 3)

@pytest.mark.parametrize("arch,d,f,table_ffn,table_self_attn", [
    ("transformer_simplified_decoder", 512, 2048, 12.6, 6.3),
    ("transformer_simplified_decoder_big", 1024, 4096, 50.4, 25.2),
])
def test_parameter_delta_is_the_decoder_ffns(arch, d, f, table_ffn, table_self_attn, data_dir):
    base_arch = "fusion_transformer_big" if arch.endswith("_big") else "fusion_transformer"
    with torch.device("meta"):
        standard, _, _ = build(data_dir, base_arch, "--share-all-embeddings", small=False)
        simplified, _, _ = build(data_dir, arch, small=False)  # the presets share embeddings (footnote 6)
        no_tem, _, _ = build(data_dir, base_arch, "--decoder-sublayer-order", "sem-ifm", "--share-all-embeddings", small=False)
    layers = 6
    ffn = layers * (d * f + f + f * d + d)  # fc1 + fc2 of every decoder layer
    add_norm_ii = layers * 2 * d  # the LayerNorm of Add&Norm II goes with the FFN
    assert n_params(standard) - n_params(simplified) == ffn + add_norm_ii
    assert round(ffn / 1e6, 1) == table_ffn
    self_attn = layers * (4 * d * d + 4 * d)
    assert n_params(standard) - n_params(no_tem) == self_attn + layers * 2 * d
    assert round(self_attn / 1e6, 1) == table_self_attn
    # the encoder keeps its FFNs; the decoder has none
    assert n_params(standard.encoder) == n_params(simplified.encoder)
    names = [n for n, _ in simplified.decoder.named_parameters()]
    assert not [n for n in names if ".fc1." in n or ".fc2." in n or "final_layer_norm" in n]
    assert any(".fc1." in n for n, _ in simplified.encoder.named_parameters())


# footnote 6: "the total number of parameters in Base and Big models are 62.9M and 213.9M
# respectively on En-De" -- fairseq's transformer with one shared embedding table of V symbols
FOOTNOTE6_VOCAB = 36640


def transformer_parameters(d, f, layers, vocab):
    """Parameters of a post-norm fairseq transformer with all embeddings shared, written out."""
    attention = 4 * (d * d + d)
    ffn = d * f + f + f * d + d
    encoder_layer = attention + ffn + 2 * 2 * d
    decoder_layer = 2 * attention + ffn + 3 * 2 * d
    return layers * (encoder_layer + decoder_layer) + vocab * d


@pytest.fixture(scope="module")
def footnote6_dicts(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("footnote6_dicts"), FOOTNOTE6_VOCAB - 4)  # + 4 special symbols


@pytest.mark.parametrize("standard_arch,simplified_arch,d,f,paper_total", [
    ("fusion_transformer", "transformer_simplified_decoder", 512, 2048, 62.9),
    ("fusion_transformer_big", "transformer_simplified_decoder_big", 1024, 4096, 213.9),
])
def test_footnote6_totals_with_shared_embeddings(standard_arch, simplified_arch, d, f, paper_total, footnote6_dicts):
    with torch.device("meta"):
        standard, task, _ = build(footnote6_dicts, standard_arch, "--share-all-embeddings", small=False)
        simplified, _, _ = build(footnote6_dicts, simplified_arch, small=False)
        orders = [build(footnote6_dicts, a, small=False)[0] for a in ("transformer_sem_tem_ifm", "transformer_sem_ifm")]
    assert len(task.source_dictionary) == FOOTNOTE6_VOCAB
    total = transformer_parameters(d, f, 6, FOOTNOTE6_VOCAB)
    assert n_params(standard) == total
    assert round(total / 1e6, 1) == paper_total
    # the simplified model: the footnote's total less Table 3's IFM column (FFN + its LayerNorm)
    assert n_params(simplified) == total - 6 * (d * f + f + f * d + d + 2 * d)
    if d == 512:  # Table 1's orders are base models: same embedding sharing
        assert n_params(orders[0]) == total
        assert n_params(orders[1]) == total - 6 * (4 * (d * d + d) + 2 * d)


def test_standard_checkpoint_does_not_load_strictly_into_simplified(data_dir):
    standard, _, _ = build(data_dir, "fusion_transformer")
    simplified, _, _ = build(data_dir, "transformer_simplified_decoder")
    with pytest.raises(RuntimeError, match=r"decoder\.layers\.0\.fc1\.weight"):
        simplified.load_state_dict(standard.state_dict(), strict=True)


# ---------------------------------------------------------------- plans and composition

@pytest.mark.parametrize("plan,order,simplified,expected", [
    (("self_attn", "encoder_attn", "ffn"), "tem-sem-ifm", True, ("self_attn", "encoder_attn")),
    (("self_attn", "encoder_attn", "ffn"), "sem-tem-ifm", False, ("encoder_attn", "self_attn", "ffn")),
    (("self_attn", "encoder_attn", "ffn"), "sem-ifm", False, ("encoder_attn", "ffn")),
    (("self_attn", "encoder_attn", "ffn"), "sem-ifm", True, ("encoder_attn",)),
    # a phrase cross-attention before encoder attention moves with it, in any order
    (("self_attn", "phrase_attn", "encoder_attn", "ffn"), "sem-tem-ifm", False,
     ("phrase_attn", "encoder_attn", "self_attn", "ffn")),
    (("self_attn", "phrase_attn", "encoder_attn", "ffn"), "sem-ifm", True, ("phrase_attn", "encoder_attn")),
    # sub-layers attached to a removed block stay
    (("pre", "self_attn", "encoder_attn", "mid", "ffn", "post"), "sem-ifm", True,
     ("pre", "encoder_attn", "mid", "post")),
])
def test_decoder_plan(plan, order, simplified, expected):
    assert decoder_plan(plan, order, simplified) == expected


def test_decoder_plan_rejects_plans_without_the_standard_blocks():
    with pytest.raises(ValueError, match="--decoder-sublayer-order"):
        decoder_plan(("self_attn", "ffn"), "sem-tem-ifm", False)


class Recorder(nn.Module):
    """An extra sub-layer (as another technique would add) that scales its input."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(2.0))
        self.calls = 0

    def forward(self, x, st):
        self.calls += 1
        return x * self.scale


@torch.no_grad()
def test_extra_sublayer_attached_first_keeps_its_place(data_dir):
    model, _, args = build(data_dir, "fusion_transformer")
    for layer in model.decoder.layers:  # another technique attaches first ...
        layer.extra_sublayers = nn.ModuleDict({"phrase_attn": Recorder()})
        layer.set_plan(("self_attn", "phrase_attn", "encoder_attn", "ffn"))
    args.decoder_sublayer_order, args.simplified_decoder = "sem-tem-ifm", True
    decoder_sublayers.attach(model, args)  # ... then the sub-layer order
    layer = model.decoder.layers[0]
    assert layer.plan == ("phrase_attn", "encoder_attn", "self_attn")
    x, enc = torch.randn(4, 1, 16), torch.randn(3, 1, 16)
    out, _, _ = layer(x, enc, None, None, self_attn_mask=model.decoder.buffered_future_mask(x))
    expected = tem(layer, sem_add_norm(layer, 2.0 * x, enc))
    assert layer.extra_sublayers["phrase_attn"].calls == 1
    assert (out - expected).abs().max().item() < 1e-5


def test_conflicting_flags_name_both(data_dir):
    with pytest.raises(ValueError, match="--no-cross-attention") as err:
        build(data_dir, "transformer_simplified_decoder", "--no-cross-attention")
    assert "--simplified-decoder" in str(err.value)
    with pytest.raises(FusionError, match="--decoder-sublayer-order 'ifm-sem-tem': expected one of sem-ifm, sem-tem-ifm, "
                       "tem-sem-ifm$"):  # the registry refuses an unknown order (tests/test_flag_values.py: every flag)
        build(data_dir, "fusion_transformer", "--decoder-sublayer-order", "ifm-sem-tem")


def test_flags_are_off_in_the_base_preset(data_dir):
    model, _, args = build(data_dir, "fusion_transformer")
    assert args.decoder_sublayer_order == "tem-sem-ifm" and args.simplified_decoder is False
    assert all(layer.plan == ("self_attn", "encoder_attn", "ffn") for layer in model.decoder.layers)


def surface_fusion_archs():
    from fairseq.models import ARCH_MODEL_REGISTRY

    return [a for a in ("transformer_surface_fusion", "transformer_surface_fusion_soft") if a in ARCH_MODEL_REGISTRY]


@pytest.mark.parametrize("arch", surface_fusion_archs())
@torch.no_grad()
def test_simplified_decoder_composes_with_surface_fusion(arch, data_dir):
    model, task, _ = build(data_dir, arch, "--simplified-decoder")
    plain, _, _ = build(data_dir, arch)
    assert all(layer.plan == ("self_attn", "encoder_attn") for layer in model.decoder.layers)
    assert n_params(plain) - n_params(model) == 3 * (16 * 32 + 32 + 32 * 16 + 16 + 2 * 16)
    d = task.source_dictionary
    src = torch.tensor([[d.pad(), 5, 6, 7, d.eos()], [8, 9, 10, 11, d.eos()]])
    prev = torch.tensor([[d.eos(), 12, 13, 14], [d.eos(), 15, 16, 17]])
    full = model.get_normalized_probs(model(src, torch.tensor([4, 5]), prev), log_probs=True)
    enc = model.encoder.forward_torchscript({"src_tokens": src, "src_lengths": torch.tensor([4, 5])})
    state, steps = {}, []
    for t in range(prev.size(1)):
        out = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
        steps.append(model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True)[:, -1])
    assert (torch.stack(steps, 1) - full).abs().max().item() < 1e-5


# one arch of each other paper, with each option of this one: incremental decoding = full
# forward and every parameter trained, or a clear refusal naming both flags
OTHER_PAPERS = [
    "transformer_lexical_shortcuts", "transformer_hierarchical_aggregation", "transformer_multilayer_attention",
    "transformer_phrase", "transformer_fine_grained_layer_attention", "transformer_surface_fusion_soft",
]
REFUSED = {("transformer_lexical_shortcuts", "sem-ifm"), ("transformer_multilayer_attention", "sem-ifm")}


def registered(archs):
    from fairseq.models import ARCH_MODEL_REGISTRY

    return [a for a in archs if a in ARCH_MODEL_REGISTRY]


@pytest.mark.parametrize("option", ["simplified", "sem-tem-ifm", "sem-ifm"])
@pytest.mark.parametrize("arch", registered(OTHER_PAPERS))
def test_options_compose_with_the_other_papers(arch, option, data_dir):
    extra = ["--simplified-decoder"] if option == "simplified" else ["--decoder-sublayer-order", option]
    if (arch, option) in REFUSED:
        with pytest.raises(ValueError, match="--decoder-sublayer-order sem-ifm"):
            build(data_dir, arch, *extra)
        return
    model, task, args = build(data_dir, arch, *extra, "--dropout", "0.1")
    d = task.source_dictionary
    src = torch.tensor([[d.pad(), 5, 6, 7, d.eos()], [8, 9, 10, 11, d.eos()]])
    lengths = torch.tensor([4, 5])
    prev = torch.tensor([[d.eos(), 12, 13, 14], [d.eos(), 15, 16, 17]])
    with torch.no_grad():
        full = model.get_normalized_probs(model(src, lengths, prev), log_probs=True)
        enc = model.encoder.forward_torchscript({"src_tokens": src, "src_lengths": lengths})
        state, steps = {}, []
        for t in range(prev.size(1)):
            out = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
            steps.append(model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True)[:, -1])
    assert (torch.stack(steps, 1) - full).abs().max().item() < 1e-5
    model.train()
    target = torch.tensor([[12, 13, 14, d.eos()], [15, 16, 17, d.eos()]])
    out = model(src, lengths, prev)
    F.nll_loss(model.get_normalized_probs(out, log_probs=True).view(-1, len(d)), target.view(-1)).backward()
    assert not [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    blocks = [b for b in model.decoder.layers[0].plan if b in ("self_attn", "encoder_attn", "ffn")]
    assert blocks == {"simplified": ["self_attn", "encoder_attn"], "sem-tem-ifm": ["encoder_attn", "self_attn", "ffn"],
                      "sem-ifm": ["encoder_attn", "ffn"]}[option]

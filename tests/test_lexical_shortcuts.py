"""Lexical shortcuts (Emelin et al. 2019): Eq. 5-14 against computations written here, the
variants of §4.2, Table 5's parameter counts, composition with other options, analyses."""
import dataclasses
import json
import math
import os

import pytest
import torch
import torch.nn.functional as F
from fairseq import options, tasks
from fairseq.data import data_utils
from fairseq.sequence_generator import SequenceGenerator

from fairseq_fusion.seams import LayerContext, StackContext
from fairseq_fusion.modules.lexical_shortcuts import ShortcutMultiheadAttention

SMALL = [
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--encoder-layers", "3", "--decoder-layers", "3",
]


def write_dicts(directory, size):
    for lang in ("src", "tgt"):
        with open(os.path.join(directory, f"dict.{lang}.txt"), "w") as f:
            for i in range(size - 4):  # + 4 special symbols
                f.write(f"w{i} {100000 - i}\n")
    return str(directory)


@pytest.fixture(scope="module")
def tiny_dicts(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("ls_dicts"), 40)


def parse(data_dir, arch, extra=()):
    parser = options.get_training_parser()
    return options.parse_args_and_arch(parser, [
        data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", arch,
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--cpu", *extra,
    ])


def build(data_dir, arch, extra=(), seed=1, meta=False):
    args = parse(data_dir, arch, extra)
    task = tasks.setup_task(args)
    torch.manual_seed(seed)
    if meta:
        with torch.device("meta"):
            return task.build_model(args), task, args
    return task.build_model(args), task, args


def batch(task, src_lens, tgt_lens, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary

    def sent(n):
        return torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])])

    srcs, tgts = [sent(n) for n in src_lens], [sent(n) for n in tgt_lens]
    return {
        "src_tokens": data_utils.collate_tokens(srcs, d.pad(), d.eos(), left_pad=True),
        "src_lengths": torch.tensor(src_lens),
        "prev_output_tokens": data_utils.collate_tokens(tgts, d.pad(), d.eos(), move_eos_to_beginning=True),
        "target": data_utils.collate_tokens(tgts, d.pad(), d.eos()),
    }


# --- Eq. 5-12 and 13-14 against an independent computation ----------------------------------


def reference_attention(attn, q_in, k_in, v_in, num_heads, mask=None):
    """Scaled dot-product multi-head attention (Eq. 1-4) with out_proj, from the weights."""
    t, b, d = q_in.shape
    hd = d // num_heads
    q = F.linear(q_in, attn.q_proj.weight, attn.q_proj.bias)
    out = torch.zeros(t, b, d)
    for bi in range(b):
        heads = []
        for h in range(num_heads):
            sl = slice(h * hd, (h + 1) * hd)
            logits = q[:, bi, sl] @ k_in[:, bi, sl].T / math.sqrt(hd)
            if mask is not None:
                logits = logits + mask
            heads.append(torch.softmax(logits, dim=-1) @ v_in[:, bi, sl])
        out[:, bi] = torch.cat(heads, dim=-1)
    return F.linear(out, attn.out_proj.weight, attn.out_proj.bias)


def make_attention(feature_fusion, d=8, heads=2):
    torch.manual_seed(0)
    attn = ShortcutMultiheadAttention(d, heads, self_attention=True, feature_fusion=feature_fusion).eval()
    with torch.no_grad():
        attn.k_gate.bias.normal_()
        attn.v_gate.bias.normal_()
    return attn


def test_gated_shortcuts_match_eq_5_to_12():
    attn = make_attention(feature_fusion=False)
    t, b, d = 5, 2, 8
    E, H = torch.randn(t, b, d), torch.randn(t, b, d)
    k_sc = E @ attn.k_sc_proj.weight.T  # Eq. 5
    v_sc = E @ attn.v_sc_proj.weight.T  # Eq. 6
    k = H @ attn.k_proj.weight.T + attn.k_proj.bias  # Eq. 7
    v = H @ attn.v_proj.weight.T + attn.v_proj.bias  # Eq. 8
    r_k = 1 / (1 + torch.exp(-(k_sc + k + attn.k_gate.bias)))  # Eq. 9
    r_v = 1 / (1 + torch.exp(-(v_sc + v + attn.v_gate.bias)))  # Eq. 10
    k_new = r_k * k_sc + (1 - r_k) * k  # Eq. 11
    v_new = r_v * v_sc + (1 - r_v) * v  # Eq. 12
    causal = torch.triu(torch.full((t, t), float("-inf")), 1)
    expected = reference_attention(attn, H, k_new, v_new, 2, mask=causal)
    st = LayerContext(layer=None, ctx=StackContext(embed=None, states=[E]))
    with torch.no_grad():
        got, _ = attn(H, H, H, attn_mask=causal, need_weights=False, st=st)
    assert torch.allclose(got, expected, atol=1e-5)
    # the gate actually mixes: neither input alone gives the result
    assert not torch.allclose(k_new, k, atol=1e-3) and not torch.allclose(k_new, k_sc, atol=1e-3)


def test_feature_fusion_is_one_projection_split_in_halves():
    """Eq. 13-14: [K^SC; K] = W^K [E; H] with W^K of shape 2d x 2d (bias only on fairseq's K half)."""
    attn = make_attention(feature_fusion=True)
    t, b, d = 4, 3, 8
    E, H = torch.randn(t, b, d), torch.randn(t, b, d)
    outs = {}
    for name in ("k", "v"):
        sc, emb, hid = (getattr(attn, f"{name}_sc_proj"), getattr(attn, f"{name}_embed_proj"), getattr(attn, f"{name}_proj"))
        W = torch.zeros(2 * d, 2 * d)
        W[:d] = sc.weight  # K^SC half reads [E; H]
        W[d:, :d] = emb.weight  # K half, E's columns
        W[d:, d:] = hid.weight  # K half, H's columns (fairseq's k_proj)
        bias = torch.cat([torch.zeros(d), hid.bias])
        fused = torch.cat([E, H], dim=-1) @ W.T + bias
        shortcut, hidden = fused[..., :d], fused[..., d:]
        gate = torch.sigmoid(shortcut + hidden + getattr(attn, f"{name}_gate").bias)
        outs[name] = gate * shortcut + (1 - gate) * hidden
    with torch.no_grad():
        k_new, v_new = attn.gated_key_value(E, H, H)
    assert torch.allclose(k_new, outs["k"], atol=1e-5)
    assert torch.allclose(v_new, outs["v"], atol=1e-5)
    assert attn.k_sc_proj.weight.shape == (d, 2 * d)


def test_nonlexical_source_is_layer_n_minus_2():
    states = [torch.full((3, 1, 4), float(i)) for i in range(4)]  # embedding layer, layers 1-3
    st = LayerContext(layer=None, ctx=StackContext(embed=torch.full((3, 1, 4), -1.0), states=states))
    for idx, expected in [(0, 0.0), (1, 0.0), (2, 1.0), (3, 2.0)]:  # layer n = idx + 1 reads n - 2
        attn = ShortcutMultiheadAttention(4, 2, self_attention=True, nonlexical=True, layer_idx=idx)
        lower = LayerContext(layer=None, ctx=dataclasses.replace(st.ctx, states=states[: idx + 1]))
        assert attn.shortcut_input(lower, 3).eq(expected).all()
    lexical = ShortcutMultiheadAttention(4, 2, self_attention=True, embed="tokens", layer_idx=3)
    assert lexical.shortcut_input(st, 3).eq(-1.0).all()


def test_encoder_shortcuts_read_the_embedding_layer(tiny_dicts):
    """E (default reading) is the encoder's embedding layer output = encoder_states[0]."""
    model, task, _ = build(tiny_dicts, "transformer_lexical_shortcuts", SMALL)
    model.eval()
    seen = {}
    layer = model.encoder.layers[2]
    orig = layer.self_attn.shortcut_input
    layer.self_attn.shortcut_input = lambda st, n: seen.setdefault("e", orig(st, n))
    net = batch(task, [5, 7], [4, 4])
    with torch.no_grad():
        out = model.encoder(net["src_tokens"], net["src_lengths"], return_all_hiddens=True)
    assert torch.equal(seen["e"], out["encoder_states"][0])


# --- Table 5: parameter counts ---------------------------------------------------------------

# Table 5 (thousands); V = 41,070 joined BPE symbols reproduces all five rows with fairseq's
# layers: 44,138,496 non-embedding parameters + 512 V = 65,166K (base), 176,357,376 + 1024 V
# = 218,413K (big)
TABLE5 = {"transformer": 65166, "transformer_lexical_shortcuts": 71470, "transformer_lexical_shortcuts_ff": 84053,
          "transformer_vaswani_wmt_en_de_big": 218413, "transformer_lexical_shortcuts_ff_big": 293935}


@pytest.fixture(scope="module")
def table5_dicts(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("table5_dicts"), 41070)


def n_params(data_dir, arch):
    model, task, _ = build(data_dir, arch, ["--share-all-embeddings"], meta=True)
    assert len(task.source_dictionary) == 41070
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("arch,base", [
    ("transformer_lexical_shortcuts", "transformer"),
    ("transformer_lexical_shortcuts_ff", "transformer"),
    ("transformer_lexical_shortcuts_ff_big", "transformer_vaswani_wmt_en_de_big"),
])
def test_parameter_increase_matches_table5(table5_dicts, arch, base):
    """Exact: 12 attention sub-layers (6 encoder + 6 decoder self-attentions) each add W^{K_SC},
    W^{V_SC} (d x d, no bias; 2d x d with feature-fusion) and the gate biases b^K, b^V; feature-
    fusion adds E's columns of the hidden halves of W^K, W^V (d x d each)."""
    d = 1024 if arch.endswith("_big") else 512
    per_layer = (2 * d * d + 2 * d) if not arch.endswith(("_ff", "_ff_big")) else (2 * 2 * d * d + 2 * d * d + 2 * d)
    delta = n_params(table5_dicts, arch) - n_params(table5_dicts, base)
    assert delta == 12 * per_layer
    assert round(n_params(table5_dicts, arch) / 1000) == TABLE5[arch]  # the paper's thousands, as printed


def test_table5_vocabulary_reproduces_baseline_sizes(table5_dicts):
    for arch, d, f in (("transformer", 512, 2048), ("transformer_vaswani_wmt_en_de_big", 1024, 4096)):
        attention, ffn = 4 * (d * d + d), d * f + f + f * d + d
        total = 6 * (attention + ffn + 4 * d) + 6 * (2 * attention + ffn + 6 * d) + 41070 * d
        assert n_params(table5_dicts, arch) == total
        assert round(total / 1000) == TABLE5[arch]


def test_small_presets_halve_the_base_model(tiny_dicts):
    args = parse(tiny_dicts, "transformer_lexical_shortcuts_ff_small")
    assert (args.encoder_embed_dim, args.encoder_ffn_embed_dim, args.decoder_embed_dim) == (256, 1024, 256)
    assert args.share_all_embeddings and args.lexical_shortcuts and args.lexical_shortcuts_feature_fusion


# --- variants (§4.2) build, decode incrementally and train -------------------------------------

VARIANTS = {
    "enc_dec_only": ["--lexical-shortcuts-enc-dec"],
    "enc_dec_plus_self": ["--lexical-shortcuts", "--lexical-shortcuts-enc-dec", "--lexical-shortcuts-feature-fusion"],
    "nonlexical": ["--lexical-shortcuts", "--lexical-shortcuts-nonlexical"],
    "encoder_only": ["--lexical-shortcuts", "--lexical-shortcuts-sides", "encoder"],
    "decoder_only_tokens": ["--lexical-shortcuts", "--lexical-shortcuts-sides", "decoder", "--lexical-shortcuts-embed", "tokens"],
}
# composition with the other papers' options present in the repository
COMBOS = {
    "ff+fine_layer_attention": ["--lexical-shortcuts", "--lexical-shortcuts-feature-fusion", "--layer-attention", "fine"],
    "ff+surface_fusion": ["--lexical-shortcuts", "--lexical-shortcuts-feature-fusion", "--surface-fusion", "hard"],
    "ff+sem_tem_ifm": ["--lexical-shortcuts", "--lexical-shortcuts-feature-fusion", "--decoder-sublayer-order", "sem-tem-ifm"],
    "ff+hierarchical_aggregation": ["--lexical-shortcuts", "--lexical-shortcuts-feature-fusion", "--layer-aggregation", "hierarchical"],
    "enc_dec+multilayer_attention": ["--lexical-shortcuts-enc-dec", "--multilayer-attention", "2"],
    "ff+phrase_representations": ["--lexical-shortcuts", "--lexical-shortcuts-feature-fusion", "--phrase-representations", "--phrase-attentive"],
}


def incremental(model, net):
    enc = model.encoder.forward_torchscript({"src_tokens": net["src_tokens"], "src_lengths": net["src_lengths"]})
    state, steps = {}, []
    prev = net["prev_output_tokens"]
    for t in range(prev.size(1)):
        out = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
        steps.append(model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True)[:, -1])
    return torch.stack(steps, dim=1)


@pytest.mark.parametrize("name", sorted(VARIANTS) + sorted(COMBOS))
def test_variant_decodes_incrementally_and_trains(tiny_dicts, name):
    flags = VARIANTS.get(name) or COMBOS[name]
    model, task, args = build(tiny_dicts, "fusion_transformer", SMALL + ["--dropout", "0.1"] + flags)
    shortcut = [n for n, m in model.named_modules() if isinstance(m, ShortcutMultiheadAttention)]
    assert shortcut, "no attention got shortcuts"
    net = batch(task, [6, 4, 8], [5, 5, 5])
    model.eval()
    with torch.no_grad():
        full = model.get_normalized_probs(model(net["src_tokens"], net["src_lengths"], net["prev_output_tokens"]), log_probs=True)
        assert (full - incremental(model, net)).abs().max() <= 1e-5
        # padding: the left-padded batch gives each sentence what it gets alone
        for i in range(3):
            keep = net["src_tokens"][i].ne(task.source_dictionary.pad())
            n = int(net["target"][i].ne(task.target_dictionary.pad()).sum())
            alone = model(net["src_tokens"][i][keep][None], net["src_lengths"][i:i + 1], net["prev_output_tokens"][i:i + 1, :n])
            alone = model.get_normalized_probs(alone, log_probs=True)[0]
            assert (full[i, :n] - alone).abs().max() <= 1e-5
        # beam search reorders the cached K'/V' (static ones too): batched = alone
        gen = SequenceGenerator([model], task.target_dictionary, beam_size=4, max_len_a=0, max_len_b=6)
        src = {"src_tokens": net["src_tokens"], "src_lengths": net["src_lengths"]}
        batched = gen.generate([model], {"net_input": src})
        for i in range(3):
            keep = net["src_tokens"][i].ne(task.source_dictionary.pad())
            alone = gen.generate([model], {"net_input": {"src_tokens": net["src_tokens"][i][keep][None], "src_lengths": src["src_lengths"][i:i + 1]}})
            assert [h["tokens"].tolist() for h in batched[i]] == [h["tokens"].tolist() for h in alone[0]]
    model.train()
    criterion = task.build_criterion(args)
    target = net.pop("target")
    sample = {"net_input": net, "target": target, "ntokens": int(target.numel()), "nsentences": 3}
    loss, _, _ = criterion(model, sample)
    loss.backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert not missing, missing


def test_variant_sites(tiny_dicts):
    sites = {}
    for name, flags in VARIANTS.items():
        model, _, _ = build(tiny_dicts, "fusion_transformer", SMALL + flags)
        sites[name] = sorted({n.split(".layers.")[0] + "." + n.split(".")[-1]
                              for n, m in model.named_modules() if isinstance(m, ShortcutMultiheadAttention)})
    assert sites["enc_dec_only"] == ["decoder.encoder_attn"]
    assert sites["enc_dec_plus_self"] == ["decoder.encoder_attn", "decoder.self_attn", "encoder.self_attn"]
    assert sites["encoder_only"] == ["encoder.self_attn"]
    assert sites["decoder_only_tokens"] == ["decoder.self_attn"]


@pytest.mark.parametrize("arch,expected_sites,nonlexical", [
    ("transformer_lexical_shortcuts_ff_enc_dec", ["decoder.encoder_attn"], False),
    ("transformer_lexical_shortcuts_ff_enc_dec_self", ["decoder.encoder_attn", "decoder.self_attn", "encoder.self_attn"], False),
    ("transformer_lexical_shortcuts_ff_nonlexical", ["decoder.self_attn", "encoder.self_attn"], True),
    ("transformer_lexical_shortcuts_ff_encoder_only", ["encoder.self_attn"], False),
    ("transformer_lexical_shortcuts_ff_decoder_only", ["decoder.self_attn"], False),
])
def test_variant_presets_are_feature_fusion_models(tiny_dicts, arch, expected_sites, nonlexical):
    """Table 4 / Fig. 5 variants as the paper trained them: on the feature-fusion model, tied embeddings."""
    model, _, args = build(tiny_dicts, arch, SMALL)
    shortcut = {n: m for n, m in model.named_modules() if isinstance(m, ShortcutMultiheadAttention)}
    assert sorted({n.split(".layers.")[0] + "." + n.split(".")[-1] for n in shortcut}) == expected_sites
    assert all(m.feature_fusion and m.k_embed_proj is not None for m in shortcut.values())
    assert [m.nonlexical for n, m in shortcut.items() if "self_attn" in n] == [nonlexical] * sum("self_attn" in n for n in shortcut)
    assert args.share_all_embeddings


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("flags,message", [
    (["--lexical-shortcuts-feature-fusion"], "--lexical-shortcuts-feature-fusion True configures a technique that is off: it needs --lexical-shortcuts or --lexical-shortcuts-enc-dec"),
    (["--lexical-shortcuts-enc-dec", "--lexical-shortcuts-nonlexical"], "--lexical-shortcuts-nonlexical True configures a technique that is off: it needs --lexical-shortcuts"),
    (["--lexical-shortcuts", "--decoder-sublayer-order", "sem-ifm"], "--decoder-sublayer-order sem-ifm"),
    (["--lexical-shortcuts", "--multilayer-attention", "2"], "--multilayer-attention and --lexical-shortcuts"),
])
def test_bad_combinations_are_refused(tiny_dicts, flags, message):
    with pytest.raises(ValueError, match=message):
        build(tiny_dicts, "fusion_transformer", SMALL + flags)


def test_flags_off_leave_fairseq_attention(tiny_dicts):
    model, _, _ = build(tiny_dicts, "fusion_transformer", SMALL)
    assert not any(isinstance(m, ShortcutMultiheadAttention) for m in model.modules())


# --- analyses: train a tiny transformer_lexical_shortcuts_ff on real Multi30k, run the commands --


@pytest.fixture(scope="module")
def ff_checkpoint(multi30k_slice, tmp_path_factory):
    from conftest import run_cli, train_args

    save = str(tmp_path_factory.mktemp("ls_ckpt"))
    run_cli(train_args(multi30k_slice, save, arch="transformer_lexical_shortcuts_ff", max_update=4))
    return os.path.join(save, "checkpoint_last.pt")


def run_main(cli, run, argv):
    """A console script's run in this process (the entry point is cli_main = run.main(cli.get_parser().parse_args()))."""
    return run.main(cli.get_parser().parse_args(argv))


def fake_tags(word):
    """A tag per word by a rule the test can recount: capitalized NN, ending in -ing VBG, else DT."""
    return "NN" if word[:1].isupper() else "VBG" if word.endswith("ing") else "DT"


def test_lexical_probe_command(multi30k_slice, ff_checkpoint, tmp_path):
    from fairseq.data import Dictionary

    from fairseq_fusion_tools.analysis import lexical_probe_command
    from fairseq_fusion_tools.cli import lexical_probe

    n = 150
    words = open(os.path.join(multi30k_slice, "tok", "test.en")).read().splitlines()[:n]
    tags = tmp_path / "test.tags.en"
    tags.write_text("".join(" ".join(fake_tags(w) for w in line.split()) + "\n" for line in words))
    out = str(tmp_path / "probe")
    data = run_main(lexical_probe, lexical_probe_command, ["--path", ff_checkpoint, "--data", multi30k_slice, "--train-split", "train",
                    "--max-train-sentences", "300", "--valid-split", "valid", "--max-valid-sentences", "100",
                    "--split", "test", "--sentences", str(n), "--max-epochs", "2", "--warmup-updates", "0",
                    "--source-pos-tags", str(tags), "--out", out, "--cpu"])
    assert os.path.getsize(out + ".png") > 0 and json.load(open(out + ".json"))["splits"]["train"] == "train"
    assert not [f for f in os.listdir(tmp_path) if ".states." in f]  # the state files are removed
    # POS counts recounted here from the BPE text: every in-vocabulary sub-word takes its word's tag
    d = Dictionary.load(os.path.join(multi30k_slice, "dict.en.txt"))
    expected = {"NOUN": 0, "VERB": 0, "OTHER": 0, "ADJ-ADV": 0}
    bpe = open(os.path.join(multi30k_slice, "tok", "test.bpe.en")).read().splitlines()[:n]
    for line, tok_line in zip(bpe, words):
        word_tags, w = [fake_tags(x) for x in tok_line.split()], 0
        for sub in line.split():
            if d.index(sub) != d.unk():
                expected[{"NN": "NOUN", "VBG": "VERB", "DT": "OTHER"}[word_tags[w]]] += 1
            w += 0 if sub.endswith("@@") else 1
    assert data["encoder"]["positions_per_pos"] == expected
    assert data["encoder"]["test_positions"] == sum(expected.values())
    assert sum(data["decoder"]["positions_per_pos"].values()) == 0  # no target tags given
    for side in ("encoder", "decoder"):
        assert len(data[side]["accuracy"]) == 3 and len(data[side]["accuracy_by_frequency_bin"][0]) == 10
        assert sum(data[side]["positions_per_bin"]) == data[side]["test_positions"]
    # the embedding layer keeps the sub-word: its probe beats chance (~1/1000 types) by far
    assert data["encoder"]["accuracy"][0] > 0.2


def test_embedding_similarity_command(multi30k_slice, ff_checkpoint, tmp_path):
    """The command's means (big batches) equal the streamed means over small batches, and the
    positions are the split's non-padding tokens."""
    from fairseq_fusion_tools.analysis.common import load_model
    from fairseq_fusion_tools.analysis import embedding_similarity as run
    from fairseq_fusion_tools.analysis.lexical_similarity import stream_similarity
    from fairseq_fusion_tools.cli import embedding_similarity

    out = str(tmp_path / "sim")
    data = run_main(embedding_similarity, run, ["--path", ff_checkpoint, "--data", multi30k_slice,
                    "--sentences", "100", "--out", out, "--cpu"])
    assert os.path.getsize(out + ".png") > 0
    model, task, _ = load_model(ff_checkpoint, multi30k_slice, cpu=True)
    small = stream_similarity(model, task, "test", max_tokens=200, max_sentences=100)
    dataset = task.dataset("test")
    assert data["encoder"]["positions"] == int(dataset.src_sizes[:100].sum())
    assert data["decoder"]["positions"] == int(dataset.tgt_sizes[:100].sum())
    for side in ("encoder", "decoder"):
        for ref in ("embedding_layer", "token_embeddings"):
            assert data[side][ref] == pytest.approx(small[side][ref], abs=1e-5)


def test_shortcut_gates_command(multi30k_slice, ff_checkpoint, tmp_path):
    """Two checkpoints: one JSON each and the overlay; the gate means equal those recomputed here
    sentence by sentence (no padding) with hooks of this test."""
    import shutil

    from fairseq_fusion_tools.analysis import shortcut_gates as run
    from fairseq_fusion_tools.analysis.common import load_model
    from fairseq_fusion_tools.cli import shortcut_gates

    second = str(tmp_path / "other.pt")
    shutil.copy(ff_checkpoint, second)
    out = str(tmp_path / "gates")
    data = run_main(shortcut_gates, run, ["--path", ff_checkpoint, second, "--data", multi30k_slice,
                    "--sentences", "20", "--out", out, "--cpu"])
    assert os.path.getsize(out + ".png") > 0
    assert [c["label"] for c in data["checkpoints"]] == ["checkpoint_last", "other"]
    assert json.load(open(out + ".other.json"))["gates"] == data["checkpoints"][1]["gates"]
    gates = data["checkpoints"][0]["gates"]
    assert sorted(gates) == sorted(f"{s}.layers.{i}.self_attn.{g}" for s in ("encoder", "decoder") for i in range(2) for g in ("k_gate", "v_gate"))
    model, task, _ = load_model(ff_checkpoint, multi30k_slice, cpu=True)
    task.load_dataset("test")
    dataset = task.dataset("test")
    names = ["encoder.layers.1.self_attn.v_gate", "decoder.layers.0.self_attn.k_gate"]
    modules = dict(model.named_modules())
    values = {name: [] for name in names}
    hooks = [modules[name].register_forward_hook(lambda m, i, o, name=name: values[name].append(o.flatten()))
             for name in names]
    with torch.no_grad():
        for i in range(20):
            model(**dataset.collater([dataset[i]])["net_input"])
    for h in hooks:
        h.remove()
    for name in names:
        r = torch.cat(values[name]).double()
        assert gates[name]["mean"] == pytest.approx(r.mean().item(), abs=1e-6)
        assert gates[name]["share_above_0.5"] == pytest.approx((r > 0.5).double().mean().item(), abs=1e-9)
    assert sum(gates[names[0]]["positions_per_bin"]) == int(dataset.src_sizes[:20].sum())
    assert sum(gates[names[1]]["positions_per_bin"]) == int(dataset.tgt_sizes[:20].sum())


def test_frequency_bins_are_equal_size_groups_of_types():
    from fairseq_fusion_tools.analysis.lexical_probe import frequency_bins

    counts = {t: 100 - t for t in range(20)}  # type 19 is the rarest
    tokens = torch.tensor([0, 0, 19, 5, 10, 10, 3] + list(range(20)))
    bins = frequency_bins(tokens, counts, n_bins=10)
    by_type = {t: b for t, b in zip(tokens.tolist(), bins.tolist())}
    assert by_type[19] == 0 and by_type[18] == 0 and by_type[0] == 9 and by_type[1] == 9
    assert torch.bincount(torch.tensor([by_type[t] for t in range(20)])).tolist() == [2] * 10


def test_gate_statistics_refuse_a_model_without_shortcuts(tiny_dicts):
    from fairseq_fusion_tools.analysis.lexical_gates import gate_sites

    model, _, _ = build(tiny_dicts, "fusion_transformer", SMALL)
    with pytest.raises(ValueError, match="no lexical shortcuts"):
        gate_sites(model)
    shortcut_model, _, _ = build(tiny_dicts, "fusion_transformer", SMALL + ["--lexical-shortcuts-enc-dec"])
    assert gate_sites(shortcut_model) == [f"decoder.layers.{i}.encoder_attn" for i in range(3)]

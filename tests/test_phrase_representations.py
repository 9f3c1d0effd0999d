"""Phrase representations in the model (Xu et al. 2020): Eq. 2-8, parameter counts, plans, composition."""
import math

import pytest
import torch
import torch.nn.functional as F
from fairseq import options, tasks
from fairseq.data import data_utils
from fairseq.sequence_generator import SequenceGenerator

from fairseq_fusion import fusion_options
from fairseq_fusion.modules.phrase_layers import PhraseRepresentation
from fairseq_fusion.modules.phrase_segmentation import PHRASE_LENGTHS_KEY, PhraseSegmenter
from conftest import build_model, write_dicts

PAD = 1
D, FFN, LAYERS, VOCAB = 16, 32, 3, 40
SMALL = [
    "--encoder-embed-dim", str(D), "--decoder-embed-dim", str(D),
    "--encoder-ffn-embed-dim", str(FFN), "--decoder-ffn-embed-dim", str(FFN),
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--encoder-layers", str(LAYERS), "--decoder-layers", str(LAYERS),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("phrase_dicts"), VOCAB)


def build(data_dir, arch, extra=(), task="translation", seed=1):
    model, t, _ = build_model(data_dir, arch, "--dropout", "0.1", "--attention-dropout", "0.1", *SMALL, *extra,
                              seed=seed, task=task)
    return model, t


def n_params(model):
    return sum(p.numel() for p in model.parameters())


# ---------------------------------------------------------------- Eq. 2-5

def reference_phrase(tokens, rep, b2=0.0):
    """Eq. 2-5 for one phrase (m x C), written out with the module's weights (b2: Eq. 3's bias)."""
    glance = tokens.mean(0) if rep.glance == "mean" else tokens.max(0).values  # Eq. 2
    if not rep.attentive:
        return glance
    scores = []
    for t in tokens:  # Eq. 3
        hidden = torch.sigmoid(rep.w1.weight @ torch.cat([t, glance]) + rep.w1.bias)
        scores.append(rep.w2.weight[0] @ hidden + b2)
    exp = [math.exp(float(s)) for s in scores]
    probs = [e / sum(exp) for e in exp]  # Eq. 4
    return sum(p * t for p, t in zip(probs, tokens))  # Eq. 5


@pytest.mark.parametrize("glance,attentive", [("mean", False), ("max", False), ("max", True), ("mean", True)])
@torch.no_grad()
def test_phrase_representation_eq2_to_5(glance, attentive):
    torch.manual_seed(0)
    lengths = [2, 7, 20]  # left-padded batch, 3 different phrase sizes
    width = max(lengths)
    tokens = torch.full((3, width), PAD)
    for b, n in enumerate(lengths):
        tokens[b, width - n:] = 5
    x = torch.randn(width, 3, D).double()
    x[tokens.t().eq(PAD)] = 1e3  # padding must never enter a phrase
    seg = PhraseSegmenter("ngram", PAD).segment(tokens, {})
    rep = PhraseRepresentation(D, glance, attentive).double()
    out = rep(x, seg)  # P x B x C
    for b, n in enumerate(lengths):
        ntok = max(min(8, math.ceil(n / 6)), 3)  # footnote 2, rounded up (the default)
        start = width - n
        phrases = [list(range(s, min(s + ntok, width))) for s in range(start, width, ntok)]
        for p, positions in enumerate(phrases):
            expected = reference_phrase(x[positions, b], rep)
            assert torch.allclose(out[p, b], expected, atol=1e-10), (b, p)
            # Eq. 3's b2 (left out) would change nothing: Eq. 4's softmax is shift-invariant
            assert torch.allclose(reference_phrase(x[positions, b], rep, b2=3.7), expected, atol=1e-10)
        assert (out[len(phrases):, b] == 0).all()  # padded phrase slots


def test_attentive_weights_are_not_uniform():
    """Eq. 3-5 really weighs tokens (differs from the mean) once W1/W2 are trained away from zero."""
    torch.manual_seed(0)
    tokens = torch.tensor([[5, 6, 7]])
    seg = PhraseSegmenter("ngram", PAD).segment(tokens, {})
    rep = PhraseRepresentation(D, "max", True)
    torch.nn.init.normal_(rep.w2.weight, std=3.0)
    x = torch.randn(3, 1, D)
    assert not torch.allclose(rep(x, seg)[0, 0], x[:, 0].mean(0), atol=1e-3)


# ---------------------------------------------------------------- Eq. 6-8

def reference_mha(attn, query, kv, key_padding_mask):
    """Multi-head scaled dot-product attention (paper Eq. 1), query T x C, kv P x C (one sentence)."""
    heads = attn.num_heads
    dk = query.size(-1) // heads
    q = (query @ attn.q_proj.weight.t() + attn.q_proj.bias).view(-1, heads, dk).transpose(0, 1)
    k = (kv @ attn.k_proj.weight.t() + attn.k_proj.bias).view(-1, heads, dk).transpose(0, 1)
    v = (kv @ attn.v_proj.weight.t() + attn.v_proj.bias).view(-1, heads, dk).transpose(0, 1)
    scores = q @ k.transpose(1, 2) / math.sqrt(dk)
    scores = scores.masked_fill(key_padding_mask.view(1, 1, -1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(0, 1).reshape(-1, heads * dk)
    return out @ attn.out_proj.weight.t() + attn.out_proj.bias


def reference_combination(comb, x, phrases, mask, combiner):
    """Eq. 7-8, x as query, + residual + LayerNorm (post-norm), for one sentence; the authors'
    "residue" combiner also adds out_phrase before the LayerNorm."""
    out_phrase = reference_mha(comb.attn, x, phrases, mask)
    hidden = torch.sigmoid(torch.cat([x, out_phrase], -1) @ comb.w3.weight.t() + comb.w3.bias)
    out = hidden @ comb.w4.weight.t() + comb.w4.bias
    total = x + out + (out_phrase if combiner == "residue" else 0)
    return F.layer_norm(total, (x.size(-1),), comb.layer_norm.weight, comb.layer_norm.bias, comb.layer_norm.eps)


@pytest.mark.parametrize("combiner,hidden", [("residue", FFN), ("narrow", D)])
def test_encoder_layer_eq7_8_and_decoder_transparent_attention_eq6(data_dir, combiner, hidden):
    model, task = build(data_dir, "transformer_phrase", ["--phrase-combiner", combiner])
    assert model.encoder.layers[0].extra_sublayers["phrase_attn"].combine.w3.weight.shape == (hidden, 2 * D)
    model.eval()
    for p in model.parameters():  # move TA weights away from uniform
        if p.dim() == 1 and p.numel() == LAYERS + 1:
            torch.nn.init.normal_(p, std=1.0)
    src = torch.tensor([[PAD, PAD, 7, 8, 9, 10, 2], [11, 12, 13, 14, 15, 16, 2]])
    layer0 = model.encoder.layers[0]
    sub = layer0.extra_sublayers["phrase_attn"]
    seg = PhraseSegmenter("ngram", PAD).segment(src, {})
    captured = {}
    layer0.extra_sublayers["phrase_attn"].register_forward_hook(lambda m, i, o: captured.update(x=i[0], out=o))
    with torch.no_grad():
        enc = model.encoder(src, torch.tensor([5, 7]))
        for b in range(2):
            real = ~seg.phrase_padding_mask[b]
            phrases = sub.represent(captured["x"], seg)[:, b]
            expected = reference_combination(sub.combine, captured["x"][:, b], phrases, ~real, combiner)
            keep = src[b].ne(PAD)
            assert torch.allclose(captured["out"][keep, b], expected[keep], atol=1e-5)
        # Eq. 6: decoder layer j mixes R^0..R^d with softmax(w^j)
        reps = enc["phrase_reps"]
        assert len(reps) == LAYERS + 1
        for j, layer in enumerate(model.decoder.layers):
            dec_sub = layer.extra_sublayers["phrase_attn"]
            w = dec_sub.layer_weights
            expected = sum(math.exp(w[i]) / sum(math.exp(v) for v in w) * reps[i] for i in range(LAYERS + 1))
            assert torch.allclose(dec_sub.decoder_phrases(reps), expected, atol=1e-6), j


def test_without_transparent_attention_decoder_reads_last_layer_phrases(data_dir):
    model, _ = build(data_dir, "transformer_phrase_max_attn")
    model.eval()
    src = torch.tensor([[7, 8, 9, 10, 2]])
    with torch.no_grad():
        enc = model.encoder(src, torch.tensor([5]))
        seg = PhraseSegmenter("ngram", PAD).segment(src, {})
        top = model.encoder.phrase_output.represent(enc["encoder_out"][0], seg)
    assert len(enc["phrase_reps"]) == 1 and torch.equal(enc["phrase_reps"][0], top)


# ---------------------------------------------------------------- structure and parameters

def test_sublayer_orders(data_dir):
    model, _ = build(data_dir, "transformer_phrase")
    for layer in model.encoder.layers:
        assert layer.plan == ("phrase_attn", "self_attn", "ffn")
    for layer in model.decoder.layers:
        assert layer.plan == ("self_attn", "phrase_attn", "encoder_attn", "ffn")


def added_parameters(d, ffn, layers, attentive, transparent, combiner="residue"):
    """Independent count: per encoder layer Eq. 3 (W1: 2d->d, W2: d->1 without b2) + Eq. 7 (4 d x d projections)
    + Eq. 8 (W3: 2d->h, W4: h->d; h = FFN dim for the authors' "residue" combiner, d for "narrow")
    + LayerNorm; one more Eq. 3 for the top layer's phrases; per decoder layer Eq. 7-8 + LayerNorm;
    with "+TA", Eq. 6's d + 1 weights per decoder layer and the token side's (coarse layer
    attention) d + 1 weights per decoder layer."""
    h = ffn if combiner == "residue" else d
    eq3 = (2 * d * d + d) + d if attentive else 0  # W1 with b1, W2 without b2
    combination = 4 * (d * d + d) + (2 * d * h + h) + (h * d + d) + 2 * d
    eq6 = layers + 1 if transparent else 0
    token_ta = layers * (layers + 1) if transparent else 0
    return layers * (eq3 + combination) + eq3 + layers * (combination + eq6) + token_ta


@pytest.mark.parametrize("arch,attentive,transparent", [
    ("transformer_phrase", True, True), ("transformer_phrase_max_attn", True, False),
    ("transformer_phrase_max", False, False), ("transformer_phrase_mean", False, False),
])
@pytest.mark.parametrize("combiner", ["residue", "narrow"])
def test_parameter_count(data_dir, arch, attentive, transparent, combiner):
    base, _ = build(data_dir, "fusion_transformer")
    model, _ = build(data_dir, arch, ["--phrase-combiner", combiner])
    assert n_params(model) - n_params(base) == added_parameters(D, FFN, LAYERS, attentive, transparent, combiner)


def test_phrase_flags_need_the_master_flag_and_cross_attention(data_dir):
    with pytest.raises(ValueError, match="--phrase-glance 'mean' configures a technique that is off: it needs --phrase-representations"):
        build(data_dir, "fusion_transformer", ["--phrase-glance", "mean"])
    with pytest.raises(ValueError, match="--no-cross-attention"):
        build(data_dir, "transformer_phrase", ["--no-cross-attention"])
    with pytest.raises(ValueError, match="--task translation_with_phrases"):
        build(data_dir, "transformer_phrase", ["--phrase-segmentation", "parse"])


# ---------------------------------------------------------------- parse spans through the model

def random_batch(task, lengths, seed):
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    srcs = [torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])]) for n in lengths]
    spans = []
    for n in lengths:  # random phrase lengths covering the n - 1 sub-words
        left, row = n - 1, []
        while left > 0:
            k = int(torch.randint(1, min(left, 5) + 1, (1,), generator=g))
            row.append(k)
            left -= k
        spans.append(row)
    return srcs, spans


def net_input(task, srcs, spans, tgts=None):
    d = task.source_dictionary
    lengths = torch.zeros(len(spans), max(len(s) for s in spans), dtype=torch.long)
    for b, row in enumerate(spans):
        lengths[b, : len(row)] = torch.tensor(row)
    batch = {
        "src_tokens": data_utils.collate_tokens(srcs, d.pad(), d.eos(), left_pad=True),
        "src_lengths": torch.tensor([len(s) for s in srcs]),
        PHRASE_LENGTHS_KEY: lengths,
    }
    if tgts is not None:
        batch["prev_output_tokens"] = data_utils.collate_tokens(tgts, d.pad(), d.eos(), move_eos_to_beginning=True)
    return batch


PARSE = ["--phrase-segmentation", "parse"]


@torch.no_grad()
def test_parse_spans_padding_invariance_and_incremental(data_dir):
    model, task = build(data_dir, "transformer_phrase", PARSE, task="translation_with_phrases")
    model.eval()
    srcs, spans = random_batch(task, [5, 11, 8], seed=0)
    tgts, _ = random_batch(task, [4, 9, 6], seed=1)
    batch = net_input(task, srcs, spans, tgts)
    full = model.get_normalized_probs(model(**batch), log_probs=True)
    for i in range(3):
        alone = net_input(task, [srcs[i]], [spans[i]], [tgts[i]])
        one = model.get_normalized_probs(model(**alone), log_probs=True)[0]
        n = len(tgts[i])
        assert (full[i, :n] - one[:n]).abs().max() <= 1e-5
    enc = model.encoder.forward_torchscript({k: v for k, v in batch.items() if k != "prev_output_tokens"})
    state, prev, steps = {}, batch["prev_output_tokens"], []
    for t in range(prev.size(1)):
        out = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
        steps.append(model.get_normalized_probs(out, log_probs=True)[:, -1])
    real = prev.ne(task.target_dictionary.pad())  # right-padded targets: compare real positions
    assert (torch.stack(steps, 1) - full)[real].abs().max() <= 1e-5
    # the spans matter: other spans, other outputs
    other = dict(batch, **{PHRASE_LENGTHS_KEY: torch.ones_like(batch[PHRASE_LENGTHS_KEY])})
    other[PHRASE_LENGTHS_KEY] = net_input(task, srcs, [[1] * (len(s) - 1) for s in srcs])[PHRASE_LENGTHS_KEY]
    assert not torch.allclose(model.get_normalized_probs(model(**other), log_probs=True), full, atol=1e-4)


@torch.no_grad()
def test_parse_spans_beam_search_batch_equals_alone(data_dir):
    model, task = build(data_dir, "transformer_phrase", PARSE, task="translation_with_phrases")
    model.eval()
    gen = SequenceGenerator([model], task.target_dictionary, beam_size=4, max_len_a=0, max_len_b=8)
    srcs, spans = random_batch(task, [6, 10, 3], seed=2)
    batched = gen.generate([model], {"net_input": net_input(task, srcs, spans)})
    for i in range(3):
        alone = gen.generate([model], {"net_input": net_input(task, [srcs[i]], [spans[i]])})[0]
        assert [h["tokens"].tolist() for h in batched[i]] == [h["tokens"].tolist() for h in alone]
        for hb, ha in zip(batched[i], alone):
            assert abs(hb["score"].item() - ha["score"].item()) <= 1e-4


# ---------------------------------------------------------------- composition with the other papers

def known_flag(name):
    return any(f.name == name for g in fusion_options.GROUPS for f in g.flags)


@pytest.mark.parametrize("requires,extra", [
    ("layer_attention", ["--layer-attention", "fine"]),
    ("decoder_sublayer_order", ["--decoder-sublayer-order", "sem-tem-ifm"]),
    (None, ["--encoder-normalize-before", "--decoder-normalize-before"]),
])
def test_composes_with_layer_attention_sublayer_orders_and_pre_norm(data_dir, requires, extra):
    if requires is not None and not known_flag(requires):
        pytest.skip(f"--{requires} is not registered")
    model, task = build(data_dir, "transformer_phrase", extra)
    for layer in model.decoder.layers:
        assert "phrase_attn" in layer.plan
        assert layer.plan.index("phrase_attn") == layer.plan.index("encoder_attn") - 1
    srcs, _ = random_batch(task, [7, 4], seed=3)
    tgts, _ = random_batch(task, [5, 6], seed=4)
    batch = net_input(task, srcs, [[len(s) - 1] for s in srcs], tgts)
    batch.pop(PHRASE_LENGTHS_KEY)
    model.train()
    out = model(**batch)
    out[0].sum().backward()
    missing = [n for n, p in model.named_parameters() if "phrase" in n and p.grad is None]
    assert not missing
    model.eval()
    with torch.no_grad():
        full = model.get_normalized_probs(model(**batch), log_probs=True)
        enc = model.encoder.forward_torchscript(batch)
        state, prev, steps = {}, batch["prev_output_tokens"], []
        for t in range(prev.size(1)):
            o = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
            steps.append(model.get_normalized_probs(o, log_probs=True)[:, -1])
    real = prev.ne(task.target_dictionary.pad())
    assert (torch.stack(steps, 1) - full)[real].abs().max() <= 1e-5


def transformer_parameters(vocab, d, ffn, layers):
    """Post-norm Transformer, source and target embeddings separate, softmax tied to the target's."""
    attn, ffn_params, ln = 4 * (d * d + d), (d * ffn + ffn) + (ffn * d + d), 2 * d
    return 2 * vocab * d + layers * (attn + ffn_params + 2 * ln) + layers * (2 * attn + ffn_params + 3 * ln)


def test_base_phrase_model_has_about_half_the_parameters_of_big(tmp_path):
    """§5.3: "+Max+Attn+TA" on Transformer Base has "only about half the number of parameters" of
    Transformer Big (32k joint BPE, embeddings not shared between encoder and decoder, §5.1)."""
    for lang in ("src", "tgt"):
        with open(tmp_path / f"dict.{lang}.txt", "w") as f:
            f.writelines(f"w{i} 1\n" for i in range(32000 - 4))
    counts = {}
    for arch in ("fusion_transformer", "transformer_phrase", "fusion_transformer_big"):
        args = options.parse_args_and_arch(options.get_training_parser(), [
            str(tmp_path), "--task", "translation", "-s", "src", "-t", "tgt", "--arch", arch,
            "--share-decoder-input-output-embed", "--cpu"])
        with torch.device("meta"):
            counts[arch] = n_params(tasks.setup_task(args).build_model(args))
    d, n = 512, 6
    assert counts["transformer_phrase"] - counts["fusion_transformer"] == added_parameters(d, 2048, n, True, True)
    assert counts["fusion_transformer"] == transformer_parameters(32000, 512, 2048, 6) == 76_906_496
    assert counts["fusion_transformer_big"] == transformer_parameters(32000, 1024, 4096, 6) == 241_893_376
    assert counts["transformer_phrase"] == 130_982_996  # +54.08M: the authors' "residue" combiner
    assert 0.45 <= counts["transformer_phrase"] / counts["fusion_transformer_big"] <= 0.55


# ---------------------------------------------------------------- the authors' readings (defaults)

def test_plus_ta_preset_is_the_authors_token_and_phrase_transparent_attention(data_dir):
    """"+TA": token side = coarse layer attention, DropConnect = --dropout on both mixtures' weights."""
    from fairseq_fusion.modules.layer_attention import LayerAttention
    model, _ = build(data_dir, "transformer_phrase", ["--dropout", "0.2"])
    reader = model.decoder.encoder_reader
    assert isinstance(reader, LayerAttention) and reader.granularity == "coarse" and reader.dropconnect == 0.2
    assert {layer.extra_sublayers["phrase_attn"].dropconnect for layer in model.decoder.layers} == {0.2}
    # the phrase-only reading: no token mixture, and the dependent flags are not left set
    plain, _ = build(data_dir, "transformer_phrase", ["--layer-attention", "none"])
    assert not isinstance(plain.decoder.encoder_reader, LayerAttention)
    no_ta, _ = build(data_dir, "transformer_phrase", ["--phrase-transparent-attention", "false", "--layer-attention", "none"])
    assert not hasattr(no_ta.decoder.layers[0].extra_sublayers["phrase_attn"], "layer_weights")
    for arch in ("transformer_phrase_max_attn", "transformer_phrase_max", "transformer_phrase_mean"):
        model, _ = build(data_dir, arch)
        assert not isinstance(model.decoder.encoder_reader, LayerAttention), arch


def test_eq6_dropconnect_in_training_only(data_dir):
    """Training: w^j is dropped (zeroed, the rest scaled by 1 / (1 - p)) before the softmax; eval: softmax(w^j)."""
    import itertools
    model, _ = build(data_dir, "transformer_phrase", ["--phrase-transparent-dropconnect", "0.5"])
    sub = model.decoder.layers[1].extra_sublayers["phrase_attn"]
    w = sub.layer_weights.detach().double()
    candidates = [torch.softmax(w * torch.tensor(m, dtype=torch.double) / 0.5, 0)
                  for m in itertools.product([0, 1], repeat=w.numel())]
    sub.train()
    seen = set()
    for _ in range(40):
        got = sub.mixture_weights().double()
        match = [i for i, c in enumerate(candidates) if torch.allclose(got, c, atol=1e-6)]
        assert match, got
        seen.add(match[0])
    assert len(seen) > 4  # masks vary between steps
    sub.eval()
    assert torch.allclose(sub.mixture_weights().double(), torch.softmax(w, 0), atol=1e-6)


@torch.no_grad()
def test_eq6_mixture_is_computed_once_per_sentence_in_incremental_decoding(data_dir, monkeypatch):
    from fairseq_fusion.modules import phrase_layers
    model, task = build(data_dir, "transformer_phrase")
    model.eval()
    calls = []
    original = phrase_layers.PhraseDecoderSublayer.decoder_phrases
    monkeypatch.setattr(phrase_layers.PhraseDecoderSublayer, "decoder_phrases",
                        lambda self, reps: calls.append(1) or original(self, reps))
    srcs, _ = random_batch(task, [7, 4], seed=5)
    src = data_utils.collate_tokens(srcs, PAD, task.source_dictionary.eos(), left_pad=True)
    enc = model.encoder(src, torch.tensor([7, 4]))
    prev = torch.full((2, 6), task.target_dictionary.eos())
    state = {}
    for t in range(prev.size(1)):
        model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
    assert len(calls) == LAYERS  # once per decoder layer, at the first step only
    calls.clear()
    model.decoder(prev, encoder_out=enc)
    assert len(calls) == LAYERS


def test_size_rounding_with_parse_spans_is_refused_and_old_arguments_keep_their_readings(data_dir):
    import argparse
    from fairseq.models import ARCH_CONFIG_REGISTRY
    with pytest.raises(ValueError, match="--phrase-size-rounding .*fusion-parse-spans"):
        build(data_dir, "transformer_phrase", PARSE + ["--phrase-size-rounding", "floor"], task="translation_with_phrases")
    args = options.parse_args_and_arch(options.get_training_parser(), [
        data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", "transformer_phrase", "--cpu"])
    new = ["phrase_combiner", "phrase_size_rounding", "phrase_transparent_dropconnect"]
    assert [getattr(args, n) for n in new] == ["residue", "ceil", 0.1]
    for version in (None, 2):  # a checkpoint of options version 1 or 2 lacks the three flags
        old = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in new + [fusion_options.VERSION_KEY]})
        if version is not None:
            setattr(old, fusion_options.VERSION_KEY, version)
        ARCH_CONFIG_REGISTRY["transformer_phrase"](old)
        fusion_options.validate(old)
        assert [getattr(old, n) for n in new] == ["narrow", "floor", 0.0], version


def test_checkpoint_with_eq3_b2_still_loads(data_dir):
    """Checkpoints written while Eq. 3 had b2 load (b2 dropped: the softmax ignored it)."""
    model, _ = build(data_dir, "transformer_phrase")
    state = model.state_dict()
    names = [k[: -len("weight")] + "bias" for k in state if k.endswith("represent.w2.weight")]
    assert len(names) == LAYERS + 1
    old = dict(state, **{n: torch.randn(1) for n in names})
    fresh, _ = build(data_dir, "transformer_phrase", seed=2)
    fresh.load_state_dict(old)
    assert all(torch.equal(fresh.state_dict()[k], v) for k, v in state.items())

"""Layer attention over encoder layers (Liu et al. 2021 §3.2, §3.3, §4): equations, DropConnect,
masking, parameter counts, the generate override, and the analysis commands on real data."""
import itertools
import json
import math
import os

import pytest
import torch
import torch.nn.functional as F
from fairseq import checkpoint_utils
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from omegaconf import OmegaConf

from conftest import build_model, run_cli, train_args, write_dicts
from fairseq_fusion.modules.layer_attention import MEMORY_KEY, parameter_count

VOCAB, D, N, M = 40, 16, 3, 3
SMALL = [
    "--encoder-embed-dim", str(D), "--decoder-embed-dim", str(D),
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--encoder-layers", str(N), "--decoder-layers", str(M),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("dicts"), VOCAB)


def build(arch, data_dir, *extra, seed=1):
    return build_model(data_dir, arch, *SMALL, *extra, seed=seed)


def source_batch(task, lengths=(6, 4)):
    d = task.source_dictionary
    g = torch.Generator().manual_seed(0)
    toks = torch.full((len(lengths), max(lengths)), d.pad())
    for i, n in enumerate(lengths):  # left-padded, ending in </s>
        toks[i, -n:] = torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])])
    return toks, torch.tensor(lengths)


def layers_x(model, toks, lengths):
    """X^0..X^N computed here: sqrt(D) * E[x] (no positions) and the encoder layers' outputs."""
    enc = model.encoder(toks, lengths, return_all_hiddens=True)
    x0 = math.sqrt(D) * model.encoder.embed_tokens.weight[toks].transpose(0, 1)
    return enc, [x0] + enc["encoder_states"][1:N] + [enc["encoder_out"][0]]


NO_NORM = ["--layer-attention-layernorm", "false", "--layer-attention-embed-dropout", "false",
           "--layer-attention-dropout", "0"]  # the reading without the authors' LayerNorms/dropout


def layer_norm_by_hand(x, g, b):
    """(x - mean) / sqrt(var + 1e-5) * g + b over the last dimension, written out."""
    mean = x.sum(-1, keepdim=True) / x.size(-1)
    var = ((x - mean) ** 2).sum(-1, keepdim=True) / x.size(-1)
    return (x - mean) / torch.sqrt(var + 1e-5) * g + b


def randomize_norms(reader):
    for norm in (reader.mix_norm, reader.embed_norm):
        if norm is not None:  # so that a missing or swapped LayerNorm shows
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)


@torch.no_grad()
@pytest.mark.parametrize("extra", [[], NO_NORM])
def test_fine_grained_mix_matches_equation(extra, data_dir):
    """Default (authors' code): S^m = LN(sum_n w_hat ⊙ X^n), X^0 = LN_emb(sqrt(D) E[x]); NO_NORM: no LN."""
    model, task, _ = build("transformer_fine_grained_layer_attention", data_dir, *extra)
    model.eval()
    reader = model.decoder.encoder_reader
    assert (reader.mix_norm is None) == (reader.embed_norm is None) == bool(extra)
    randomize_norms(reader)
    toks, lengths = source_batch(task)
    enc, xs = layers_x(model, toks, lengths)
    if not extra:
        xs[0] = layer_norm_by_hand(xs[0], reader.embed_norm.weight, reader.embed_norm.bias)
    W = reader.weight
    assert W.shape == (M, N + 1, D)
    for m in range(M):
        expected = torch.zeros_like(xs[0])
        for d in range(D):  # w_hat^{m,n,d} = exp(w^{m,n,d}) / sum_n' exp(w^{m,n',d})
            z = [math.exp(W[m, n, d].item()) for n in range(N + 1)]
            for n in range(N + 1):
                expected[:, :, d] += z[n] / sum(z) * xs[n][:, :, d]
        if not extra:
            expected = layer_norm_by_hand(expected, reader.mix_norm.weight, reader.mix_norm.bias)
        assert torch.allclose(enc[MEMORY_KEY][m], expected, atol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("top_state", ["output", "last-layer"])
def test_top_state_of_a_prenorm_encoder(top_state, data_dir):
    """--layer-attention-top-state: X^N of a pre-norm encoder is its output after the final LayerNorm (output) or the
    last layer's own output before it (last-layer, the authors' code); the mix of Eq. S^m computed here."""
    model, task, _ = build("transformer_fine_grained_layer_attention", data_dir, *NO_NORM, "--encoder-normalize-before",
                           "--layer-attention-top-state", top_state)
    model.eval()
    reader = model.decoder.encoder_reader
    toks, lengths = source_batch(task)
    seen = []
    hooks = [layer.register_forward_hook(lambda mod, inp, out: seen.append(out)) for layer in model.encoder.layers]
    enc = model.encoder(toks, lengths, return_all_hiddens=True)
    for h in hooks:
        h.remove()
    last = seen[-1]  # the top layer's own output
    final = model.encoder.layer_norm
    assert final is not None and torch.allclose(enc["encoder_out"][0], layer_norm_by_hand(last, final.weight, final.bias),
                                                atol=1e-5)
    top = last if top_state == "last-layer" else enc["encoder_out"][0]
    xs = [math.sqrt(D) * model.encoder.embed_tokens.weight[toks].transpose(0, 1)] + seen[:N - 1] + [top]
    w = torch.softmax(reader.weight, dim=1)  # M x (N+1) x D
    for m in range(M):
        expected = sum(w[m, n] * xs[n] for n in range(N + 1))
        assert torch.allclose(enc[MEMORY_KEY][m], expected, atol=1e-5)
    assert (last - enc["encoder_out"][0]).abs().max() > 0.1  # the two readings differ in a pre-norm encoder


def fixed_encoder_out(seed=0, T=5, B=2):
    g = torch.Generator().manual_seed(seed)
    states = [torch.randn(T, B, D, generator=g) for _ in range(N + 1)]
    return {"encoder_embedding": [states[0].transpose(0, 1)], "encoder_states": [None] + states[1:N],
            "encoder_out": [states[N]], "encoder_padding_mask": []}


@torch.no_grad()
def test_dropout_of_embeddings_and_mix(data_dir):
    """Train mode, --dropout 0.5: X^0 is dropped with p = 0.5 (each element 0 or 2 X^0); S^m is dropped
    with --layer-attention-dropout after the LayerNorm (each element 0 or LN(mix) / (1 - p)); eval: neither."""
    common = ["--dropout", "0.5", "--layer-attention-dropconnect", "0"]
    # X^0 alone: coarse weights, no LayerNorm, no dropout of S^m
    model, _, _ = build("transformer_coarse_layer_attention", data_dir, *common,
                        "--layer-attention-layernorm", "false", "--layer-attention-dropout", "0")
    reader = model.decoder.encoder_reader
    out = fixed_encoder_out()
    x0 = out["encoder_embedding"][0].transpose(0, 1)
    reader.train()
    reader.add_encoder_output(out, None)
    w = torch.softmax(reader.weight.view(M, N + 1), dim=1)
    xs = [x0] + out["encoder_states"][1:N] + out["encoder_out"]
    zeros = 0
    for m in range(M):
        rest = sum(w[m, n] * xs[n] for n in range(1, N + 1))
        dropped_x0 = (out[MEMORY_KEY][m] - rest) / w[m, 0]
        is_zero = dropped_x0.abs() < 1e-4
        assert torch.allclose(dropped_x0[~is_zero], 2 * x0[~is_zero], atol=1e-4)
        zeros += is_zero.float().mean().item()
    assert 0.3 < zeros / M < 0.7
    reader.eval()
    reader.add_encoder_output(out, None)
    assert torch.allclose(out[MEMORY_KEY][0], sum(w[0, n] * xs[n] for n in range(N + 1)), atol=1e-5)

    # S^m: LayerNorm then dropout p = 0.5, X^0 not dropped
    model, _, _ = build("transformer_fine_grained_layer_attention", data_dir, *common,
                        "--layer-attention-embed-dropout", "false", "--layer-attention-dropout", "0.5")
    reader = model.decoder.encoder_reader
    randomize_norms(reader)
    reader.eval()
    reader.add_encoder_output(out, None)
    plain = [t.clone() for t in out[MEMORY_KEY]]
    x0n = layer_norm_by_hand(x0, reader.embed_norm.weight, reader.embed_norm.bias)
    w = torch.softmax(reader.weight, dim=1)
    for m in range(M):
        mix = sum(w[m, n] * ([x0n] + xs[1:])[n] for n in range(N + 1))
        assert torch.allclose(plain[m], layer_norm_by_hand(mix, reader.mix_norm.weight, reader.mix_norm.bias), atol=1e-5)
    reader.train()
    reader.add_encoder_output(out, None)
    for m in range(M):
        got, is_zero = out[MEMORY_KEY][m], out[MEMORY_KEY][m] == 0
        assert torch.allclose(got[~is_zero], 2 * plain[m][~is_zero], atol=1e-5)
        assert 0.3 < is_zero.float().mean().item() < 0.7


def test_named_archs_follow_authors_code(data_dir):
    """Fresh arguments: the authors' code; arguments of a checkpoint without the options version
    (written before these flags existed): the flags' off values, what that checkpoint computed."""
    import argparse
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from fairseq_fusion import fusion_options
    new = ["layer_attention_embed_dropout", "layer_attention_layernorm", "layer_attention_dropout"]
    for arch in ("transformer_fine_grained_layer_attention", "transformer_coarse_layer_attention"):
        _, _, args = build(arch, data_dir)
        assert [getattr(args, n) for n in new] == [True, True, 0.1]
        old = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in new + [fusion_options.VERSION_KEY]})
        ARCH_CONFIG_REGISTRY[arch](old)
        fusion_options.validate(old)
        assert [getattr(old, n) for n in new] == [False, False, 0.0]


@torch.no_grad()
def test_decoder_layers_attend_their_mix(data_dir):
    model, task, _ = build("transformer_fine_grained_layer_attention", data_dir)
    model.eval()
    toks, lengths = source_batch(task)
    enc = model.encoder(toks, lengths, return_all_hiddens=True)
    seen = {}
    hooks = [layer.encoder_attn.register_forward_hook(
        lambda mod, args, kw, out, m=m: seen.__setitem__(m, kw["key"]), with_kwargs=True)
        for m, layer in enumerate(model.decoder.layers)]
    prev = torch.full((2, 3), task.target_dictionary.eos())
    model.decoder(prev, encoder_out=enc)
    for h in hooks:
        h.remove()
    for m in range(M):
        assert torch.equal(seen[m], enc[MEMORY_KEY][m])
        assert not torch.equal(seen[m], enc["encoder_out"][0])


@torch.no_grad()
def test_coarse_mix_is_one_scalar_per_layer_pair(data_dir):
    model, task, _ = build("transformer_coarse_layer_attention", data_dir, *NO_NORM)
    model.eval()
    toks, lengths = source_batch(task)
    enc, xs = layers_x(model, toks, lengths)
    W = model.decoder.encoder_reader.weight.view(M, N + 1)
    for m in range(M):
        z = [math.exp(W[m, n].item()) for n in range(N + 1)]
        expected = sum(z[n] / sum(z) * xs[n] for n in range(N + 1))
        assert torch.allclose(enc[MEMORY_KEY][m], expected, atol=1e-5)


@pytest.mark.parametrize("arch,extra,count", [
    ("transformer_fine_grained_layer_attention", NO_NORM, M * (N + 1) * D),
    ("transformer_coarse_layer_attention", NO_NORM, M * (N + 1)),
    ("transformer_fine_grained_layer_attention", ["--layer-attention-top-only", *NO_NORM], 2 * D),
    ("transformer_coarse_layer_attention", ["--layer-attention-top-only", *NO_NORM], 2),
    # the named archs' default (authors' code): + LayerNorm of S^m and of X^0 (post-norm), 2 D each
    ("transformer_fine_grained_layer_attention", [], M * (N + 1) * D + 4 * D),
    ("transformer_coarse_layer_attention", ["--layer-attention-top-only"], 2 + 4 * D),
])
def test_parameter_count(arch, extra, count, data_dir):
    """W in R^{M x (N+1) x D} (fine), M x (N+1) (coarse); top only: 1 x 2 (x D); LayerNorms 2 D each."""
    base, _, _ = build("fusion_transformer", data_dir)
    model, _, _ = build(arch, data_dir, *extra)
    n_params = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n_params(model) - n_params(base) == count
    granularity = "fine" if "fine" in arch else "coarse"
    norm = extra is not NO_NORM and "false" not in extra
    assert parameter_count(M, N, D, granularity, "--layer-attention-top-only" in extra, norm, norm) == count


def test_dropconnect_training_only(data_dir):
    """Training: each w is dropped (0) with p = 0.3 or divided by 1 - p, then the softmax; eval: softmax(W)."""
    model, _, _ = build("transformer_fine_grained_layer_attention", data_dir)
    reader = model.decoder.encoder_reader
    W, p = reader.weight.detach(), 0.3
    assert reader.dropconnect == p
    reader.eval()
    assert torch.allclose(reader.layer_weights(), torch.exp(W) / torch.exp(W).sum(1, keepdim=True), atol=1e-6)
    assert torch.equal(reader.layer_weights(), reader.layer_weights())
    reader.train()
    torch.manual_seed(0)
    w_hat = reader.layer_weights().detach()
    dropped = 0
    for m, d in itertools.product(range(M), range(D)):
        matches = []
        for keep in itertools.product([0, 1], repeat=N + 1):
            z = torch.tensor([W[m, n, d] / (1 - p) if keep[n] else 0.0 for n in range(N + 1)])
            if torch.allclose(torch.softmax(z, 0), w_hat[m, :, d], atol=1e-6):
                matches.append(keep)
        assert matches, f"weights of (m={m}, d={d}) are not a DropConnect of W"
        dropped += N + 1 - sum(matches[0])
    assert 0.15 < dropped / (M * D * (N + 1)) < 0.45


@torch.no_grad()
def test_masking_zeroes_and_renormalizes(data_dir):
    model, task, _ = build("transformer_fine_grained_layer_attention", data_dir, "--layer-attention-mask", "0", *NO_NORM)
    model.eval()
    reader = model.decoder.encoder_reader
    e = torch.exp(reader.weight)
    expected = e.clone()
    expected[:, 0] = 0
    expected = expected / expected.sum(1, keepdim=True)
    got = reader.layer_weights()
    assert torch.allclose(got, expected, atol=1e-6)
    assert (got[:, 0] == 0).all()
    toks, lengths = source_batch(task)
    enc, xs = layers_x(model, toks, lengths)
    mix = sum(got[0, n] * xs[n] for n in range(N + 1))
    assert torch.allclose(enc[MEMORY_KEY][0], mix, atol=1e-5)


def test_bad_mask_and_flags_fail_clearly(data_dir):
    with pytest.raises(ValueError, match="--layer-attention-mask 7"):
        build("transformer_fine_grained_layer_attention", data_dir, "--layer-attention-mask", "7")
    with pytest.raises(ValueError, match="--layer-attention-mask 1.*top-only"):
        build("transformer_fine_grained_layer_attention", data_dir, "--layer-attention-top-only", "--layer-attention-mask", "1")
    with pytest.raises(ValueError, match="--layer-attention-mask 0 configures a technique that is off: it needs --layer-attention"):
        build("fusion_transformer", data_dir, "--layer-attention-mask", "0")
    with pytest.raises(ValueError, match="--layer-attention-dropconnect"):
        build("transformer_fine_grained_layer_attention", data_dir, "--layer-attention-dropconnect", "1.5")
    with pytest.raises(ValueError, match="--layer-attention-dropout"):
        build("transformer_fine_grained_layer_attention", data_dir, "--layer-attention-dropout", "1.5")
    with pytest.raises(ValueError, match="--layer-attention-layernorm True configures a technique that is off"):
        build("fusion_transformer", data_dir, "--layer-attention-layernorm")


@torch.no_grad()
def test_top_only_reads_output_below_and_mix_on_top(data_dir):
    model, task, _ = build("transformer_fine_grained_layer_attention", data_dir, "--layer-attention-top-only", *NO_NORM)
    model.eval()
    toks, lengths = source_batch(task)
    enc, xs = layers_x(model, toks, lengths)
    reader = model.decoder.encoder_reader
    for m in range(M - 1):
        assert torch.equal(reader.encoder_memory(m, enc, None)[0], enc["encoder_out"][0])
    w = torch.softmax(reader.weight[0], dim=0)  # 2 x D over {X^0, X^N}
    assert torch.allclose(reader.encoder_memory(M - 1, enc, None)[0], w[0] * xs[0] + w[1] * xs[N], atol=1e-5)


@torch.no_grad()
def test_mask_override_reaches_model_loaded_for_generation(data_dir, tmp_path):
    """fairseq-generate --model-overrides "{'layer_attention_mask': 0}" builds the masked model."""
    model, _, args = build("transformer_fine_grained_layer_attention", data_dir)
    path = str(tmp_path / "ckpt.pt")
    cfg = OmegaConf.to_container(convert_namespace_to_omegaconf(args))  # as fairseq's save_state
    history = [{"criterion_name": "x", "optimizer_name": "x", "lr_scheduler_state": {}, "num_updates": 0}]
    torch.save({"cfg": cfg, "model": model.state_dict(), "optimizer_history": history,
                "extra_state": {"best_loss": None}}, path)
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([path], arg_overrides={"layer_attention_mask": 0})
    assert models[0].decoder.encoder_reader.mask == 0
    models, _, _ = checkpoint_utils.load_model_ensemble_and_task([path])
    assert models[0].decoder.encoder_reader.mask is None


@pytest.fixture(scope="module")
def fgla_checkpoint(multi30k_slice, tmp_path_factory):
    """Fine-grained layer attention trained 4 updates on real Multi30k, and a 20-sentence test split."""
    import shutil

    save = str(tmp_path_factory.mktemp("fgla"))
    run_cli(train_args(multi30k_slice, save, arch="transformer_fine_grained_layer_attention", max_update=4))
    small = os.path.join(save, "data20")
    os.makedirs(small)
    for lang in ("en", "de"):
        with open(os.path.join(multi30k_slice, "tok", f"test.bpe.{lang}"), encoding="utf-8") as f, \
                open(os.path.join(save, f"test20.{lang}"), "w", encoding="utf-8") as g:
            g.writelines(f.readlines()[:20])
        shutil.copy(os.path.join(multi30k_slice, f"dict.{lang}.txt"), small)
    run_cli(["fairseq-preprocess", "-s", "en", "-t", "de", "--testpref", os.path.join(save, "test20"), "--destdir", small,
             "--srcdict", os.path.join(small, "dict.en.txt"), "--tgtdict", os.path.join(small, "dict.de.txt")])
    return os.path.join(save, "checkpoint_last.pt"), small


def generate_outputs(ckpt, data, options_, mask):
    """fairseq-generate's BPE-removed hypotheses and references, by sentence id (the independent path).
    Batched as fusion-layer-masking batches (max 4000 tokens, no batch-size multiple): fairseq's
    maximum output length depends on the longest source of the batch."""
    options_ = list(options_) + ["--max-tokens", "4000", "--required-batch-size-multiple", "1"]
    proc = run_cli(["fairseq-generate", data, "--path", ckpt, "--user-dir", os.path.join(os.path.dirname(__file__), "..", "fairseq_fusion"),
                    "--gen-subset", "test", "--cpu", "--remove-bpe", *options_,
                    "--model-overrides", str({"layer_attention_mask": mask})])
    hyps, refs = {}, {}
    for line in proc.stdout.splitlines():
        kind, _, rest = line.partition("-")
        if kind in ("H", "T") and rest.split("\t")[0].isdigit():
            fields = line.split("\t")
            (hyps if kind == "H" else refs)[int(rest.split("\t")[0])] = fields[-1] if len(fields) > (2 if kind == "H" else 1) else ""
    ids = sorted(hyps)
    return [hyps[i] for i in ids], [refs[i] for i in ids]


def test_layer_masking_matches_fairseq_generate_with_its_options(fgla_checkpoint, tmp_path):
    """fusion-layer-masking's scores and lengths = chrF and mean length of fairseq-generate's output with the
    same generation options and --model-overrides mask (computed here with sacrebleu)."""
    import sacrebleu

    ckpt, data = fgla_checkpoint
    gen = ["--beam", "2", "--lenpen", "0.6", "--min-len", "3", "--no-repeat-ngram-size", "2", "--max-len-a", "1.2", "--max-len-b", "10"]
    out = str(tmp_path / "mask")
    run_cli(["fusion-layer-masking", "--path", ckpt, "--data", data, "--layers", "0,2", "--metric", "chrf", *gen, "--out", out])
    data_json = json.load(open(out + ".json"))
    assert data_json["generation"] == {"beam": 2, "lenpen": 0.6, "min_len": 3, "no_repeat_ngram_size": 2,
                                      "max_len_a": 1.2, "max_len_b": 10}
    results = [data_json["baseline"]] + data_json["masked"]
    assert [r.get("masked_layer") for r in results] == [None, 0, 2]
    for r, mask in zip(results, (None, 0, 2)):
        hyps, refs = generate_outputs(ckpt, data, gen, mask)
        assert len(hyps) == 20 == r["sentences"]
        assert abs(r["score"] - sacrebleu.corpus_chrf(hyps, [refs]).score) < 1e-6, mask
        assert abs(r["length"] - sum(len(h.split()) for h in hyps) / 20) < 1e-9, mask
        for h in hyps:  # --no-repeat-ngram-size 2 on the sub-words: no word bigram repeats within a hypothesis
            words = h.split()
            assert len(set(zip(words, words[1:]))) == len(words) - 1, h
    base = results[0]["score"]
    assert abs(results[1]["score_change"] - 100 * (results[1]["score"] - base) / base) < 1e-9
    assert os.path.getsize(out + ".png") > 0


def test_layer_attention_map_and_expressivity_from_the_checkpoint(fgla_checkpoint, tmp_path):
    """The map and the singular-value curves, recomputed here from the checkpoint's tensors."""
    import numpy as np

    ckpt, _ = fgla_checkpoint
    state = torch.load(ckpt, map_location="cpu", weights_only=False)["model"]
    w = state["decoder.encoder_reader.weight"].double()  # M x (N+1) x D
    expected = torch.softmax(w, dim=1).mean(-1)  # eval mode: no DropConnect
    out = str(tmp_path / "out")
    run_cli(["fusion-layer-attention-map", "--path", ckpt, "--out", out + "/map"])
    got = torch.tensor(json.load(open(out + "/map.json"))["weights"], dtype=torch.double)
    assert got.shape == expected.shape and torch.allclose(got, expected, atol=1e-6)

    run_cli(["fusion-embedding-expressivity", "--path", ckpt, "--out", out + "/svd"])
    curves = json.load(open(out + "/svd.json"))["models"][0]["curves"]
    emb = state["encoder.embed_tokens.weight"].double().numpy()
    top = torch.softmax(w[-1], dim=0)[0].numpy()  # top decoder layer's weight on the embedding layer, per dim
    order = np.argsort(-top, kind="stable")
    half = emb.shape[1] // 2

    def curve(m):
        s = np.linalg.svd(m, compute_uv=False)
        return np.log(s / s.max())

    assert np.allclose(curves["all"], curve(emb), atol=1e-5)
    assert np.allclose(curves["more attended"], curve(emb[:, order[:half]]), atol=1e-5)
    assert np.allclose(curves["less attended"], curve(emb[:, order[half:]]), atol=1e-5)


def test_gpt2_post_processing_decodes_token_ids(tmp_path):
    """--bpe gpt2: fairseq's GPT-2 BPE turns the dictionary's id symbols back into text."""
    from fairseq_fusion_tools.analysis.layer_masking import gpt2_bpe
    from fairseq_fusion_tools.cli.layer_masking import get_parser

    (tmp_path / "encoder.json").write_text(json.dumps({"Hello": 0, "\u0120world": 1, ".": 2}))
    (tmp_path / "vocab.bpe").write_text("#version: 0.2\n")
    args = get_parser().parse_args(["--path", "x", "--out", "y", "--bpe", "gpt2", "--post-process", "none",
                                    "--gpt2-encoder-json", str(tmp_path / "encoder.json"),
                                    "--gpt2-vocab-bpe", str(tmp_path / "vocab.bpe")])
    assert gpt2_bpe(args).decode("0 1 2") == "Hello world."
    with pytest.raises(SystemExit, match="--post-process none"):
        gpt2_bpe(get_parser().parse_args(["--path", "x", "--out", "y", "--bpe", "gpt2", "--gpt2-encoder-json", "a",
                                          "--gpt2-vocab-bpe", "b", "--post-process", "subword_nmt"]))
    implied = get_parser().parse_args(["--path", "x", "--out", "y", "--bpe", "gpt2", "--gpt2-encoder-json", str(tmp_path / "encoder.json"),
                                       "--gpt2-vocab-bpe", str(tmp_path / "vocab.bpe")])
    assert gpt2_bpe(implied).decode("1 2") == " world." and implied.post_process == "none"  # --bpe gpt2 implies none


@torch.no_grad()
def test_expressivity_halves_follow_top_layer_embedding_weights(data_dir):
    import numpy as np

    from fairseq_fusion_tools.analysis.layer_fusion import expressivity_curves

    model, _, _ = build("transformer_fine_grained_layer_attention", data_dir)
    model.eval()
    curves = expressivity_curves(model)
    emb = model.encoder.embed_tokens.weight.numpy().astype(np.float64)
    w = model.decoder.encoder_reader.weight[-1].numpy()  # top decoder layer, (N+1) x D
    w_emb = np.exp(w[0]) / np.exp(w).sum(0)  # w_hat^{M,0,d}
    order = np.argsort(-w_emb)

    def curve(m):
        s = np.linalg.svd(m, compute_uv=False)
        return np.log(s / s.max())

    assert np.allclose(curves["all"], curve(emb), atol=1e-6)
    assert np.allclose(curves["more attended"], curve(emb[:, order[: D // 2]]), atol=1e-6)
    assert np.allclose(curves["less attended"], curve(emb[:, order[D // 2:]]), atol=1e-6)


@torch.no_grad()
def test_bilingual_similarity_all_and_non_shared(data_dir, tmp_path):
    from fairseq_fusion_tools.analysis.layer_fusion import bilingual_similarity, read_dictionary

    model, task, _ = build("fusion_transformer", data_dir)
    path = tmp_path / "dict.txt"
    path.write_text("w5 w5\nw6 w9\nnotaword w1\nw7 ||| w8\n")
    pairs = read_dictionary(str(path))
    res = bilingual_similarity(model, task, pairs)
    src, tgt = model.encoder.embed_tokens.weight, model.decoder.embed_tokens.weight
    idx = task.source_dictionary.index
    cos = [float(src[idx(s)] @ tgt[idx(t)] / (src[idx(s)].norm() * tgt[idx(t)].norm()))
           for s, t in (("w5", "w5"), ("w6", "w9"), ("w7", "w8"))]
    assert res["pairs"] == 3 and res["non_shared_pairs"] == 2 and res["dictionary_pairs"] == 4
    assert abs(res["all"] - sum(cos) / 3) < 1e-6
    assert abs(res["non_shared"] - (cos[1] + cos[2]) / 2) < 1e-6
    path.write_text("w5 w5 w6\n")
    with pytest.raises(ValueError, match="dict.txt:1: expected 'source target'"):
        read_dictionary(str(path))


def test_dictionary_from_real_gold_alignment():
    """Sure links of the RWTH De-En gold alignment (1-indexed), swapped to En-De."""
    from fairseq_fusion_tools import data_paths
    from fairseq_fusion_tools.analysis.layer_fusion import dictionary_from_alignments

    root = os.path.join(data_paths.data_path("alignment"), "deen")
    pairs = set(dictionary_from_alignments(os.path.join(root, "test.de-en"), os.path.join(root, "deen.talp"), reverse=True))
    with open(os.path.join(root, "test.de-en"), encoding="utf-8") as f:
        de, en = (side.split() for side in f.readline().split("|||"))
    with open(os.path.join(root, "deen.talp")) as f:
        first = [tuple(int(x) for x in link.split("-")) for link in f.readline().split() if "p" not in link]
    assert first and all((en[j - 1], de[i - 1]) in pairs for i, j in first)
    assert ("believe", "glauben") in pairs


def test_links_counted_from_zero_or_one(tmp_path):
    """fast_align's 0-based links and the same links 1-based give the same dictionary; a file that
    cannot tell, or that mixes both, is refused naming the flag or the file."""
    from fairseq_fusion_tools.analysis.layer_fusion import dictionary_from_alignments

    text = tmp_path / "text"
    text.write_text("das Haus ist klein ||| the house is small\nja ||| yes\n")
    zero, one = tmp_path / "zero", tmp_path / "one"
    zero.write_text("0-0 1-1 2-2 3-3\n0-0\n")
    one.write_text("1-1 2-2 3-3 4-4\n1p1\n")
    expected = {("das", "the"), ("Haus", "house"), ("ist", "is"), ("klein", "small"), ("ja", "yes")}
    assert set(dictionary_from_alignments(str(text), str(zero))) == expected
    assert set(dictionary_from_alignments(str(text), str(one))) == expected - {("ja", "yes")}  # 1p1: possible
    assert set(dictionary_from_alignments(str(text), str(zero), index_base=0, reverse=True)) == {(t, s) for s, t in expected}
    unclear = tmp_path / "unclear"
    unclear.write_text("1-2 2-1\n\n")
    with pytest.raises(ValueError, match="--links-index-base"):
        dictionary_from_alignments(str(text), str(unclear))
    mixed = tmp_path / "mixed"
    mixed.write_text("0-0 4-4\n\n")
    with pytest.raises(ValueError, match="mixed: links use both index 0 and the sentence length"):
        dictionary_from_alignments(str(text), str(mixed))
    with pytest.raises(ValueError, match="outside the sentence lengths"):
        dictionary_from_alignments(str(text), str(mixed), index_base=1)


@pytest.mark.parametrize("extra", [
    ["--phrase-representations"],
    ["--phrase-representations", "--phrase-transparent-attention"],
    ["--surface-fusion", "soft", "--layer-attention-top-only"],
])
def test_composes_incremental_and_gradients(extra, data_dir):
    """Fine-grained layer attention with phrase representations (Xu et al.) or SurfaceFusion:
    every parameter gets a gradient, incremental decoding equals the full forward."""
    model, task, args = build("transformer_fine_grained_layer_attention", data_dir, "--criterion",
                              "label_smoothed_cross_entropy", "--label-smoothing", "0.1", *extra)
    toks, lengths = source_batch(task, (7, 5))
    d = task.target_dictionary
    tgt = torch.randint(d.nspecial, len(d), (2, 5), generator=torch.Generator().manual_seed(1))
    prev = torch.cat([torch.full((2, 1), d.eos()), tgt[:, :-1]], 1)
    criterion = task.build_criterion(args)
    model.train()
    sample = {"net_input": {"src_tokens": toks, "src_lengths": lengths, "prev_output_tokens": prev},
              "target": tgt, "ntokens": 10, "nsentences": 2}
    criterion(model, sample)[0].backward()
    assert [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0] == []
    model.eval()
    with torch.no_grad():
        enc = model.encoder.forward_torchscript({"src_tokens": toks, "src_lengths": lengths})
        full = model.get_normalized_probs(model.decoder(prev, encoder_out=enc), log_probs=True)
        state = {}
        for t in range(prev.size(1)):
            out = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
            step = model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True)
            assert (step[:, 0] - full[:, t]).abs().max() < 1e-5

"""SurfaceFusion (Liu et al. 2021 §4.1, Eq. 5-7) against an independent computation, in the
loss and in generation; last-step-only extras; composition; fairseq-generate on real data."""
import math
import os

import pytest
import torch
from fairseq.data import data_utils

from conftest import REPO, build_model, run_cli, train_args, write_dicts
from fairseq_fusion.modules.surface_fusion import LOGITS_KEY, parameter_count

VOCAB, D, HEADS = 40, 16, 2
SMALL = [
    "--encoder-embed-dim", str(D), "--decoder-embed-dim", str(D),
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", str(HEADS), "--decoder-attention-heads", str(HEADS),
    "--encoder-layers", "3", "--decoder-layers", "3",
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("dicts"), VOCAB)


def build(arch, data_dir, *extra, seed=1):
    return build_model(data_dir, arch, "--label-smoothing", "0.1", *SMALL, *extra, seed=seed,
                       criterion="label_smoothed_cross_entropy")


def batch(task, src_lengths=(7, 4), tgt_lengths=(5, 3)):
    d = task.source_dictionary
    g = torch.Generator().manual_seed(0)
    sent = lambda n: torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])])  # noqa: E731
    srcs, tgts = [sent(n) for n in src_lengths], [sent(n) for n in tgt_lengths]
    return {
        "src_tokens": data_utils.collate_tokens(srcs, d.pad(), d.eos(), left_pad=True),
        "src_lengths": torch.tensor(src_lengths),
        "prev_output_tokens": data_utils.collate_tokens(tgts, d.pad(), d.eos(), move_eos_to_beginning=True),
        "target": data_utils.collate_tokens(tgts, d.pad(), d.eos()),
    }


def surface_logits_by_hand(model, b, features, detach_keys=False, project=True):
    """r = MultiHead(q = decoder features, k = X^N, v = sqrt(D) E[x]); r~ = V^T r, computed here."""
    attn = model.decoder.output_fusion.attn
    enc = model.encoder(b["src_tokens"], b["src_lengths"])
    keys = enc["encoder_out"][0].transpose(0, 1)  # B x S x C
    keys = keys.detach() if detach_keys else keys
    values = math.sqrt(D) * model.encoder.embed_tokens.weight[b["src_tokens"]]  # no positions
    pad = b["src_tokens"].eq(model.encoder.padding_idx)
    hd = D // HEADS
    q = (features @ attn.q_proj.weight.T + attn.q_proj.bias) * hd ** -0.5
    k = keys @ attn.k_proj.weight.T + attn.k_proj.bias
    v = values @ attn.v_proj.weight.T + attn.v_proj.bias
    heads = []
    for h in range(HEADS):
        sl = slice(h * hd, (h + 1) * hd)
        scores = q[..., sl] @ k[..., sl].transpose(1, 2)  # B x T x S
        scores = scores.masked_fill(pad.unsqueeze(1), float("-inf"))
        heads.append(torch.softmax(scores, -1) @ v[..., sl])
    r = torch.cat(heads, -1) @ attn.out_proj.weight.T + attn.out_proj.bias
    return r @ model.decoder.output_projection.weight.T if project else r  # pre-softmax weights V (tied)


@torch.no_grad()
@pytest.mark.parametrize("arch,extra", [
    ("transformer_surface_fusion", []),
    ("transformer_surface_fusion", ["--surface-fusion-renormalize"]),
    ("transformer_surface_fusion", ["--surface-fusion-lambda", "0.8", "--surface-fusion-tau", "2"]),
    ("transformer_surface_fusion_soft", []),
])
def test_fusion_matches_equations(arch, extra, data_dir):
    model, task, args = build(arch, data_dir, *extra)
    model.eval()
    b = batch(task)
    net_out = model(b["src_tokens"], b["src_lengths"], b["prev_output_tokens"])
    features, _ = model.decoder(b["prev_output_tokens"], model.encoder(b["src_tokens"], b["src_lengths"]), features_only=True)
    E = features @ model.decoder.output_projection.weight.T  # vanilla pre-softmax logits
    assert torch.allclose(net_out[0], E, atol=1e-5)
    surface = surface_logits_by_hand(model, b, features)
    assert torch.allclose(net_out[1][LOGITS_KEY], surface, atol=1e-5)

    tau = args.surface_fusion_tau
    assert tau == (5.0 if "soft" in arch else 2.0 if "2" in extra else 1.0)
    log_p_surface = surface / tau - torch.logsumexp(surface / tau, -1, keepdim=True)  # Eq. 5
    log_p = E - torch.logsumexp(E, -1, keepdim=True)
    if "soft" in arch:  # Eq. 7
        fused = E + log_p_surface
        expected = fused - torch.logsumexp(fused, -1, keepdim=True)
    else:  # Eq. 6
        lam = args.surface_fusion_lambda
        assert lam == (0.8 if "0.8" in extra else 0.9)
        expected = lam * log_p + (1 - lam) * log_p_surface
        if "--surface-fusion-renormalize" in extra:
            expected = expected - torch.logsumexp(expected, -1, keepdim=True)
    got = model.get_normalized_probs(net_out, log_probs=True)
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(model.get_normalized_probs(net_out, log_probs=False), expected.exp(), atol=1e-6)
    total = expected.exp().sum(-1)
    if arch == "transformer_surface_fusion" and "--surface-fusion-renormalize" not in extra:
        assert (total < 1).all()  # Eq. 6 as written is not normalized
    else:
        assert torch.allclose(total, torch.ones_like(total), atol=1e-5)


def test_training_loss_uses_fused_distribution(data_dir):
    model, task, args = build("transformer_surface_fusion", data_dir, "--dropout", "0", "--attention-dropout", "0")
    criterion = task.build_criterion(args)
    model.train()
    b = batch(task)
    target = b.pop("target")
    sample = {"net_input": b, "target": target, "ntokens": int(target.ne(1).sum()), "nsentences": 2}
    _, _, log = criterion(model, sample)
    with torch.no_grad():
        net_out = model(**b)
        lam, E, S = 0.9, net_out[0], net_out[1][LOGITS_KEY]
        lprobs = lam * torch.log_softmax(E, -1) + (1 - lam) * torch.log_softmax(S, -1)
        keep = target.ne(task.target_dictionary.pad())
        nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)[keep].sum()
    assert abs(log["nll_loss"].item() - nll.item()) < 1e-4


def surface_gradients(model, b, detach_by_hand):
    """Gradients of a fixed projection of the surface logits alone: from the model, and from
    surface_logits_by_hand with the query/keys detached (or not) here."""
    model.eval()  # no dropout: both computations see the same values
    probe = torch.randn(2, b["prev_output_tokens"].size(1), VOCAB + 4, generator=torch.Generator().manual_seed(3))
    enc = model.encoder(b["src_tokens"], b["src_lengths"])
    features, extra = model.decoder(b["prev_output_tokens"], encoder_out=enc)
    params = dict(model.named_parameters())
    surface = extra[LOGITS_KEY]
    probe = probe[..., : surface.size(-1)]
    model_grads = torch.autograd.grad((surface * probe).sum(), list(params.values()), allow_unused=True)
    enc = model.encoder(b["src_tokens"], b["src_lengths"])  # a fresh graph
    features, _ = model.decoder(b["prev_output_tokens"], encoder_out=enc, features_only=True)
    by_hand = surface_logits_by_hand(model, b, features.detach() if detach_by_hand else features,
                                     detach_keys=detach_by_hand)
    hand_grads = torch.autograd.grad((by_hand * probe).sum(), list(params.values()), allow_unused=True)
    zero = lambda g, p: torch.zeros_like(p) if g is None else g  # noqa: E731
    return {n: (zero(g, p), zero(h, p)) for (n, p), g, h in zip(params.items(), model_grads, hand_grads)}


@pytest.mark.parametrize("extra,detached", [([], True), (["--surface-fusion-detach", "false"], False)])
def test_detached_query_and_keys(extra, detached, data_dir):
    """Named archs (authors' code): no gradient reaches the encoder/decoder layers through the surface
    attention's query (decoder output) and keys (encoder output); its own projections, the word
    embeddings (values) and V still learn. Compared with the by-hand computation, parameter by parameter."""
    model, task, _ = build("transformer_surface_fusion", data_dir, *extra)
    assert model.decoder.output_fusion.detach is detached
    grads = surface_gradients(model, batch(task), detach_by_hand=detached)
    for name, (got, expected) in grads.items():
        assert torch.allclose(got, expected, atol=1e-5), name
    layer_grads = [g for n, (g, _) in grads.items() if ".layers." in n]
    assert bool(sum(g.abs().sum() for g in layer_grads) == 0) is detached
    for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert grads[f"decoder.output_fusion.attn.{proj}.weight"][0].abs().sum() > 0
    assert grads["encoder.embed_tokens.weight"][0].abs().sum() > 0


def test_dropout_of_surface_embeddings(data_dir):
    """Named archs: in training X_emb (the values) gets --dropout (each element 0 or X_emb / (1 - p));
    in eval, or with --surface-fusion-embed-dropout false, the values are sqrt(D) E[x] exactly."""
    seen = []
    for extra in ([], ["--surface-fusion-embed-dropout", "false"]):
        model, task, _ = build("transformer_surface_fusion", data_dir, "--dropout", "0.5", *extra)
        hook = model.decoder.output_fusion.attn.v_proj.register_forward_hook(
            lambda mod, inp, out: seen.append(inp[0].detach()))
        b = batch(task)
        values = math.sqrt(D) * model.encoder.embed_tokens.weight[b["src_tokens"]].transpose(0, 1).detach()
        for train in (True, False):
            model.train(train)
            seen.clear()
            model(b["src_tokens"], b["src_lengths"], b["prev_output_tokens"])
            got = seen[0]
            if train and not extra:
                is_zero = got == 0
                assert torch.allclose(got[~is_zero], 2 * values[~is_zero], atol=1e-5)
                assert 0.3 < is_zero.float().mean().item() < 0.7
            else:
                assert torch.allclose(got, values, atol=1e-6)
        hook.remove()


@torch.no_grad()
def test_shared_ffn_reading(data_dir):
    """--surface-fusion-ffn (authors' code): E = V^T FFN(y^M) and r~ = V^T FFN(r), one FFN, written out here."""
    model, task, args = build("transformer_surface_fusion", data_dir, "--surface-fusion-ffn")
    model.eval()
    fusion = model.decoder.output_fusion
    b = batch(task)
    net_out = model(b["src_tokens"], b["src_lengths"], b["prev_output_tokens"])
    features, _ = model.decoder(b["prev_output_tokens"], model.encoder(b["src_tokens"], b["src_lengths"]), features_only=True)
    V = model.decoder.output_projection.weight
    ffn = lambda x: x + torch.relu(x @ fusion.fc1.weight.T + fusion.fc1.bias) @ fusion.fc2.weight.T + fusion.fc2.bias  # noqa: E731
    assert fusion.fc1.weight.shape == (32, D)  # --decoder-ffn-embed-dim
    E = ffn(features) @ V.T
    r = surface_logits_by_hand(model, b, features, project=False)
    surface = ffn(r) @ V.T
    lam = args.surface_fusion_lambda
    expected = lam * torch.log_softmax(E, -1) + (1 - lam) * torch.log_softmax(surface, -1)
    assert torch.allclose(model.get_normalized_probs(net_out, log_probs=True), expected, atol=1e-4)
    assert not torch.allclose(net_out[0], E, atol=1e-3)  # the decoder's own logits are not the fused E
    base, _, _ = build("transformer_surface_fusion", data_dir)
    n_params = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n_params(model) - n_params(base) == 2 * D * 32 + 32 + D


def test_named_archs_follow_authors_code_fresh_args_only(data_dir):
    import argparse
    from fairseq.models import ARCH_CONFIG_REGISTRY
    from fairseq_fusion import fusion_options
    new = ["surface_fusion_detach", "surface_fusion_embed_dropout", "surface_fusion_ffn"]
    for arch in ("transformer_surface_fusion", "transformer_surface_fusion_soft_big"):
        _, _, args = build(arch, data_dir)
        assert [getattr(args, n) for n in new] == [True, True, False]
        old = argparse.Namespace(**{k: v for k, v in vars(args).items() if k not in new + [fusion_options.VERSION_KEY]})
        ARCH_CONFIG_REGISTRY[arch](old)  # a checkpoint written before the flags existed
        fusion_options.validate(old)
        assert [getattr(old, n) for n in new] == [False, False, False]


def test_parameter_count(data_dir):
    """Only the surface attention's q, k, v, out projections are new (4 D^2 + 4 D); V is shared."""
    base, _, _ = build("fusion_transformer", data_dir)
    n_params = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    for arch in ("transformer_surface_fusion", "transformer_surface_fusion_soft"):
        model, _, _ = build(arch, data_dir)
        assert n_params(model) - n_params(base) == 4 * D * D + 4 * D == parameter_count(D, D, D)


@torch.no_grad()
def test_extras_are_last_step_only_when_incremental(data_dir):
    model, task, _ = build("transformer_surface_fusion_soft", data_dir)
    model.eval()
    b = batch(task, tgt_lengths=(5, 5))
    enc = model.encoder.forward_torchscript({"src_tokens": b["src_tokens"], "src_lengths": b["src_lengths"]})
    state, prev = {}, b["prev_output_tokens"]
    full = model.get_normalized_probs(model.decoder(prev, encoder_out=enc), log_probs=True)
    for t in range(prev.size(1)):
        out = model.decoder(prev[:, : t + 1], encoder_out=enc, incremental_state=state)
        assert out[1][LOGITS_KEY].shape == (2, 1, len(task.target_dictionary))
        step = model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True)
        assert (step[:, 0] - full[:, t]).abs().max() < 1e-5


@pytest.mark.parametrize("arch,extra", [
    ("transformer_surface_fusion", ["--simplified-decoder"]),
    ("transformer_surface_fusion", ["--surface-fusion-ffn", "--surface-fusion-detach", "false",
                                    "--surface-fusion-embed-dropout", "false"]),
    ("transformer_surface_fusion_soft", ["--layer-attention", "fine"]),
    ("transformer_fine_grained_layer_attention", ["--layer-attention-top-only", "--surface-fusion", "hard"]),
])
def test_composition_incremental_and_gradients(arch, extra, data_dir):
    model, task, args = build(arch, data_dir, *extra)
    b = batch(task, tgt_lengths=(5, 5))
    model.train()
    criterion = task.build_criterion(args)
    target = b.pop("target")
    loss, _, _ = criterion(model, {"net_input": b, "target": target, "ntokens": 8, "nsentences": 2})
    loss.backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters() if p.requires_grad)
    model.eval()
    with torch.no_grad():
        enc = model.encoder.forward_torchscript({"src_tokens": b["src_tokens"], "src_lengths": b["src_lengths"]})
        full = model.get_normalized_probs(model.decoder(b["prev_output_tokens"], encoder_out=enc), log_probs=True)
        state = {}
        for t in range(b["prev_output_tokens"].size(1)):
            out = model.decoder(b["prev_output_tokens"][:, : t + 1], encoder_out=enc, incremental_state=state)
            step = model.get_normalized_probs((out[0][:, -1:], out[1]), log_probs=True)
            assert (step[:, 0] - full[:, t]).abs().max() < 1e-5


def test_bad_flags_fail_clearly(data_dir):
    with pytest.raises(ValueError, match="--surface-fusion-lambda"):
        build("transformer_surface_fusion", data_dir, "--surface-fusion-lambda", "1.5")
    with pytest.raises(ValueError, match="--surface-fusion-tau"):
        build("transformer_surface_fusion", data_dir, "--surface-fusion-tau", "0")
    with pytest.raises(ValueError, match="--surface-fusion-heads 3"):
        build("transformer_surface_fusion", data_dir, "--surface-fusion-heads", "3")


def test_trains_and_decodes_with_fairseq_generate(multi30k_slice, tmp_path):
    """Real Multi30k slice: a few updates of transformer_surface_fusion, then fairseq-generate (beam 4)
    whose per-token scores are the fused log-probabilities recomputed here with a full forward."""
    from fairseq_fusion_tools.analysis.common import load_model

    save = str(tmp_path / "ckpt")
    run_cli(train_args(multi30k_slice, save, arch="transformer_surface_fusion", max_update=4))
    ckpt = os.path.join(save, "checkpoint_last.pt")
    proc = run_cli(["fairseq-generate", multi30k_slice, "--user-dir", os.path.join(REPO, "fairseq_fusion"),
                    "--path", ckpt, "--gen-subset", "valid", "--beam", "4", "--max-len-a", "0", "--max-len-b", "8",
                    "--batch-size", "200", "--cpu", "--num-workers", "0"])
    lines = proc.stdout.splitlines()
    assert sum(line.startswith("H-") for line in lines) == 1000
    model, task, _ = load_model(ckpt, cpu=True)
    task.load_dataset("valid")
    data, d = task.dataset("valid"), task.target_dictionary
    by_id = {}
    for line in lines:
        if line.startswith(("H-", "P-")):
            key, *fields = line.split("\t")
            by_id.setdefault(int(key[2:]), {})[key[0]] = fields
    for i in (0, 1, 2):
        hyp = d.encode_line(by_id[i]["H"][1], add_if_not_exist=False, append_eos=True).long()
        src = data[i]["source"]
        prev = torch.cat([torch.tensor([d.eos()]), hyp[:-1]]).unsqueeze(0)
        with torch.no_grad():
            lprobs = model.get_normalized_probs(model(src.unsqueeze(0), torch.tensor([len(src)]), prev), log_probs=True)
        expected = lprobs[0].gather(-1, hyp.unsqueeze(-1)).squeeze(-1) / math.log(2)  # fairseq prints base 2
        printed = torch.tensor([float(x) for x in by_id[i]["P"][0].split()])
        assert torch.allclose(printed, expected, atol=2e-4), (printed, expected)

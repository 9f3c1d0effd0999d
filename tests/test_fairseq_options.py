"""fairseq's own options of fairseq-train and fairseq-generate (the list of fairseq's tests/test_binaries.py
translation tests) on every arch of the plugin.

fusion_transformer, loaded with fairseq transformer's weights, gives fairseq's outputs under every option; every
paper arch runs it (finite outputs of the right shape) or refuses it in one line naming the flag (REFUSED).
Everything runs in-process at d=16: models by fairseq-train's parser (conftest.build_model), hypotheses by
task.build_generator, updates by fairseq's Trainer.
"""
import copy
import os
import re
from dataclasses import dataclass

import pytest
import torch
from conftest import write_dicts
from fairseq import checkpoint_utils, options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.trainer import Trainer
from fairseq_cli import train
from fairseq.token_generation_constraints import pack_constraints
from test_contracts import collate, full_log_probs, incremental_log_probs, sentences

from fairseq_fusion import fusion_options
from fairseq_fusion.errors import FusionError


@dataclass
class Option:
    """``flags`` added to fairseq-train's (kind log-probs, raw, update, valid) or fairseq-generate's (hypos) command
    line; ``kind`` says what "the same outputs" as fairseq's transformer means (SAME)."""
    kind: str
    flags: list


SAME = {
    "log-probs": "the model built with the flags: log-probabilities of a padded batch within 1e-5 (eval mode)",
    "raw": "a batch read from raw text (--dataset-impl raw): log-probabilities within 1e-5",
    "update": "one Trainer.train_step (SGD, lr 1, dropout on, same seed): loss and parameters (EMA's too) within 1e-5",
    "valid": "task.valid_step with --eval-bleu: loss within 1e-5, the same BLEU n-gram counts",
    "hypos": "task.build_generator with the flags: the same hypotheses, scores within 1e-4",
}

OPTIONS = {
    # fairseq-train: the model
    "pre-norm": Option("log-probs", ["--encoder-normalize-before", "--decoder-normalize-before"]),
    "shared embeddings": Option("log-probs", ["--share-all-embeddings"]),
    "shared decoder embeddings": Option("log-probs", ["--share-decoder-input-output-embed"]),
    "adaptive softmax": Option("log-probs", ["--adaptive-softmax-cutoff", "10,20", "--criterion", "adaptive_loss"]),
    # fairseq 0.12 alone ends in AttributeError here (fairseq_fixes.py; test_layers_to_keep_on_the_command_line_...)
    "layers to keep": Option("log-probs", ["--encoder-layers-to-keep", "1", "--decoder-layers-to-keep", "0"]),
    "learned positions": Option("log-probs", ["--encoder-learned-pos", "--decoder-learned-pos"]),
    "no positions": Option("log-probs", ["--no-token-positional-embeddings"]),
    "layernorm embedding": Option("log-probs", ["--layernorm-embedding"]),
    "no scaled embedding": Option("log-probs", ["--no-scale-embedding"]),
    "cross-self-attention": Option("log-probs", ["--cross-self-attention"]),
    "cross-self-attention only": Option("log-probs", ["--no-cross-attention", "--cross-self-attention"]),
    "raw data": Option("raw", ["--dataset-impl", "raw"]),
    # fairseq-train: the update
    "plain update": Option("update", []),
    "layer drop": Option("update", ["--encoder-layerdrop", "0.5", "--decoder-layerdrop", "0.5"]),
    "quant noise": Option("update", ["--quant-noise-pq", "0.5", "--quant-noise-pq-block-size", "8"]),
    "EMA": Option("update", ["--store-ema", "--ema-decay", "0.5", "--ema-start-update", "0"]),
    "update-freq": Option("update", ["--update-freq", "2"]),
    "checkpoint activations": Option("update", ["--checkpoint-activations"]),
    "offload activations": Option("update", ["--offload-activations"]),
    "eval-bleu": Option("valid", ["--eval-bleu", "--eval-bleu-args", '{"beam": 2, "max_len_b": 6}']),
    # fairseq-generate
    "beam": Option("hypos", ["--beam", "4"]),
    "sampling": Option("hypos", ["--sampling", "--beam", "2"]),
    "sampling top-k": Option("hypos", ["--sampling", "--sampling-topk", "3", "--beam", "2"]),
    "sampling top-p": Option("hypos", ["--sampling", "--sampling-topp", "0.5", "--beam", "2"]),
    "diverse beam search": Option("hypos", ["--diverse-beam-groups", "2", "--beam", "4"]),
    "diverse siblings": Option("hypos", ["--diversity-rate", "0.5", "--beam", "4"]),
    "match source length": Option("hypos", ["--match-source-len", "--beam", "2"]),
    "no repeat n-gram, length penalty": Option("hypos", ["--no-repeat-ngram-size", "2", "--lenpen", "2"]),
    "prefix": Option("hypos", ["--prefix-size", "1"]),
    "retain dropout": Option("hypos", ["--retain-dropout"]),
    "score reference": Option("hypos", ["--score-reference"]),
    "constraints": Option("hypos", ["--constraints", "--beam", "4"]),
    "ensemble with transformer": Option("hypos", ["--beam", "4"]),
    "alignments": Option("hypos", ["--print-alignment", "hard"]),
}

ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m.__module__.startswith("fairseq_fusion"))
PAPER_ARCHS = [a for a in ARCHS if a != "fusion_transformer"]
SURFACE_FUSION = [a for a in ARCHS if a.startswith("transformer_surface_fusion")]
LAYER_ATTENTION = ["transformer_coarse_layer_attention", "transformer_fine_grained_layer_attention",
                   "transformer_fine_grained_layer_attention_big", "transformer_phrase", "transformer_phrase_big"]
MULTILAYER_ATTENTION = ["transformer_multilayer_attention", "transformer_multilayer_attention_k3"]
# multi-layer attention reads the k layers below a layer: at TINY's 2 layers none is above k (3) and it stays off
DEEPER = {arch: ["--encoder-layers", "4", "--decoder-layers", "4"] for arch in MULTILAYER_ATTENTION}
DECODER_SHORTCUTS = [  # lexical shortcuts on the decoder's self-attention
    "transformer_lexical_shortcuts", "transformer_lexical_shortcuts_ff", "transformer_lexical_shortcuts_ff_big",
    "transformer_lexical_shortcuts_ff_decoder_only", "transformer_lexical_shortcuts_ff_nonlexical",
    "transformer_lexical_shortcuts_ff_small", "transformer_lexical_shortcuts_small"]
ENC_DEC_SHORTCUTS = ["transformer_lexical_shortcuts_ff_enc_dec", "transformer_lexical_shortcuts_ff_enc_dec_self"]
SEM = ["transformer_sem_ifm", "transformer_sem_tem_ifm", "transformer_simplified_decoder",
       "transformer_simplified_decoder_big"]

# option -> {words of the one-line refusal: the archs that refuse the option with them}; the message also names one
# of the option's flags. Every other (option, paper arch) runs.
REFUSED_BY = {
    "adaptive softmax": {"--surface-fusion projects with the full output matrix": SURFACE_FUSION},
    # every technique indexes its layers (fusion_transformer_big has none)
    "layers to keep": {"prunes and renumbers layers, which": [a for a in PAPER_ARCHS if a != "fusion_transformer_big"]},
    "cross-self-attention": {
        "which --lexical-shortcuts (decoder side) gates": DECODER_SHORTCUTS + ["transformer_lexical_shortcuts_ff_enc_dec_self"],
        "which --multilayer-attention changes": MULTILAYER_ATTENTION,
        "which --decoder-sublayer-order sem-ifm removes": ["transformer_sem_ifm"],
    },
    "cross-self-attention only": {
        "--layer-attention changes what the decoder's encoder attention reads": LAYER_ATTENTION,
        "which --lexical-shortcuts (decoder side) gates": DECODER_SHORTCUTS,
        "--lexical-shortcuts-enc-dec needs decoder-to-encoder attention": ENC_DEC_SHORTCUTS,
        "which --multilayer-attention changes": MULTILAYER_ATTENTION,
        "--phrase-representations attends source phrases next to the encoder attention":
            ["transformer_phrase_max", "transformer_phrase_max_attn", "transformer_phrase_mean"],
        "rearrange the decoder's encoder attention (SEM)": SEM,
    },
    "layer drop": {"--phrase-transparent-attention mixes the phrase representations": ["transformer_phrase",
                                                                                        "transformer_phrase_big"]},
}
REFUSED = {option: {arch: words for words, archs in by.items() for arch in archs} for option, by in REFUSED_BY.items()}
TINY = [
    "--encoder-layers", "2", "--decoder-layers", "2", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2", "--dropout", "0.1",
    "--optimizer", "sgd", "--lr", "1", "--seed", "3",
]
VOCAB = 40
SRC_LENGTHS, TGT_LENGTHS = [7, 4, 9], [6, 3, 5]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """Dictionaries w0..w39 for both sides and a raw-text valid split of 3 sentence pairs."""
    folder = write_dicts(tmp_path_factory.mktemp("options_dicts"), VOCAB)
    for side, lengths, seed in (("src", SRC_LENGTHS, 0), ("tgt", TGT_LENGTHS, 1)):
        g = torch.Generator().manual_seed(seed)
        with open(os.path.join(folder, f"valid.src-tgt.{side}"), "w") as f:
            f.writelines(" ".join(f"w{i}" for i in torch.randint(VOCAB, (n - 1,), generator=g).tolist()) + "\n"
                         for n in lengths)
    return folder


def build(arch, data_dir, flags=(), overrides=None, seed=1):
    """(model, task, args) as conftest.build_model at the TINY size, with the arch's own criterion unless ``flags``
    name one, and ``overrides`` set on the parsed arguments."""
    criterion = [] if "--criterion" in flags else ["--criterion", fusion_options.default_criterion(arch)]
    if "label_smoothed" in " ".join(criterion):
        criterion += ["--label-smoothing", "0.1"]
    args = options.parse_args_and_arch(options.get_training_parser(), [
        data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", arch, "--cpu", *TINY, *DEEPER.get(arch, []), *criterion,
        *flags])
    for key, value in (overrides or {}).items():
        setattr(args, key, value)
    task = tasks.setup_task(args)
    torch.manual_seed(seed)
    return task.build_model(args), task, args


def twins(data_dir, option):
    """fairseq's transformer and fusion_transformer with its weights, both built with ``option``'s flags."""
    vanilla, task, args = build("transformer", data_dir, option.flags)
    fusion, fusion_task, fusion_args = build("fusion_transformer", data_dir, option.flags)
    fusion.load_state_dict(vanilla.state_dict(), strict=True)
    return (vanilla, task, args), (fusion, fusion_task, fusion_args)


def sample(task, src_lengths=SRC_LENGTHS, tgt_lengths=TGT_LENGTHS):
    """A training batch as fairseq's LanguagePairDataset collates it."""
    batch = collate(task, sentences(task, src_lengths), sentences(task, tgt_lengths, seed=1))
    target = batch.pop("target")
    return {"id": torch.arange(len(src_lengths)) + 10, "nsentences": len(src_lengths), "net_input": batch,
            "target": target, "ntokens": int(target.ne(task.target_dictionary.pad()).sum())}


def raw_sample(task):
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    return dataset.collater([dataset[i] for i in range(len(dataset))])


# ---- what each kind computes: a dict of tensors, compared between the twins or checked on a paper arch ----

def log_probs(model, task, args, option, batch=None):
    model.eval()
    batch = batch or sample(task)
    with torch.no_grad():
        out = {"log-probs": full_log_probs(model, {**batch["net_input"], "target": batch["target"]})}
        out["incremental log-probs"] = incremental_log_probs(model, {**batch["net_input"]})
    return out


def raw_log_probs(model, task, args, option):
    return log_probs(model, task, args, option, batch=raw_sample(task))


_CONFIGS = {}


def converted(key, args):
    """``args`` as fairseq's configuration, converted once per ``key`` (0.5 s each; the tests only read it)."""
    if key not in _CONFIGS:
        _CONFIGS[key] = convert_namespace_to_omegaconf(args)
    return _CONFIGS[key]


def update(model, task, args, option):
    # the Trainer's configuration (update-freq, EMA, optimizer), once per option: the Trainer reads no model option,
    # the model is built from the arch's own arguments
    cfg = converted(("train", *option.flags), args)
    trainer = Trainer(cfg, task, model, task.build_criterion(args))
    samples = [sample(task)] * cfg.optimization.update_freq[0]
    out = trainer.train_step(samples)
    result = {"loss": torch.as_tensor(out["loss"]), **dict(trainer.model.named_parameters())}
    if trainer.ema is not None:
        result.update({"ema." + n: p for n, p in trainer.ema.get_model().named_parameters()})
    return result


def valid(model, task, args, option):
    model.eval()
    _, _, out = task.valid_step(sample(task), model, task.build_criterion(args))
    counts = [out[f"_bleu_{kind}_{n}"] for kind in ("counts", "totals") for n in range(4)]
    return {"loss": torch.as_tensor(out["loss"]).detach(), "bleu counts": torch.tensor(counts)}


def hypos(model, task, args, option, second=None):
    """fairseq-generate's search with ``option``'s flags; ``second``: the other model of an ensemble."""
    gen_args = options.parse_args_and_arch(options.get_generation_parser(), [
        args.data, "-s", "src", "-t", "tgt", "--max-len-a", "0", "--max-len-b", "10", *option.flags])
    if gen_args.retain_dropout:
        model = copy.deepcopy(model)
        model.prepare_for_inference_(converted(("generate", *option.flags), gen_args))
    else:
        model.eval()
    models = [model] if second is None else [model, second]
    generator = task.build_generator(models, gen_args)
    batch = sample(task, tgt_lengths=[4, 4, 4])
    if not gen_args.score_reference:
        del batch["target"]
    prefix = batch["net_input"]["prev_output_tokens"][:, 1:1 + gen_args.prefix_size] if gen_args.prefix_size else None
    constraints = None
    if gen_args.constraints:
        constraints = pack_constraints([[torch.tensor([5 + i])] for i in range(len(SRC_LENGTHS))])
    torch.manual_seed(7)
    with torch.no_grad():
        found = task.inference_step(generator, models, batch, prefix_tokens=prefix, constraints=constraints)
    out = {}
    for i, sentence in enumerate(found):
        for j, h in enumerate(sentence):
            out[f"sentence {i} hypothesis {j} tokens"] = h["tokens"]
            out[f"sentence {i} hypothesis {j} score"] = h["score"].reshape(1)
            out[f"sentence {i} hypothesis {j} positional scores"] = h["positional_scores"]
            if gen_args.print_alignment:
                out[f"sentence {i} hypothesis {j} alignment"] = torch.as_tensor(h["alignment"])
        assert len(sentence) > 0, f"sentence {i}: no hypothesis"
    return out


COMPUTE = {"log-probs": log_probs, "raw": raw_log_probs, "update": update, "valid": valid, "hypos": hypos}
TOLERANCE = {"hypos": 1e-4}


def compute(option, model, task, args, second=None):
    if option.kind == "hypos":
        return hypos(model, task, args, option, second)
    return COMPUTE[option.kind](model, task, args, option)


_GENERATION_MODELS = {}


def generation_model(arch, data_dir):
    """One model per arch for every generation option (fusion_transformer: transformer's weights)."""
    if arch not in _GENERATION_MODELS:
        if arch in ("transformer", "fusion_transformer"):
            (vanilla, task, args), fusion = twins(data_dir, Option("hypos", []))
            _GENERATION_MODELS["transformer"] = (vanilla, task, args)
            _GENERATION_MODELS["fusion_transformer"] = fusion
        else:
            _GENERATION_MODELS[arch] = build(arch, data_dir)
    return _GENERATION_MODELS[arch]


def second_model(name, data_dir):
    """The ensemble's other member: a transformer of other weights."""
    if name != "ensemble with transformer":
        return None
    if "second" not in _GENERATION_MODELS:
        model, _, _ = build("transformer", data_dir, seed=5)
        _GENERATION_MODELS["second"] = model.eval()
    return _GENERATION_MODELS["second"]


def assert_same(expected, got, tolerance):
    assert expected.keys() == got.keys()
    for key, value in expected.items():
        assert value.shape == got[key].shape, key
        if value.dtype.is_floating_point:
            assert (value - got[key]).abs().max().item() <= tolerance, key
        else:
            assert torch.equal(value, got[key]), key


@pytest.mark.parametrize("name", OPTIONS)
def test_fusion_transformer_is_fairseqs_transformer(name, data_dir):
    option = OPTIONS[name]
    second = second_model(name, data_dir)
    if option.kind == "hypos":
        vanilla, fusion = generation_model("transformer", data_dir), generation_model("fusion_transformer", data_dir)
    else:
        vanilla, fusion = twins(data_dir, option)
    expected = compute(option, *vanilla, second=second)
    assert_same(expected, compute(option, *fusion, second=second), TOLERANCE.get(option.kind, 1e-5))


def check_runs(option, out, task):
    """Finite outputs of the right shapes."""
    for key, value in out.items():
        if value.dtype.is_floating_point:
            # -inf: a log-probability fairseq sets (padding) or a beam that --match-source-len kept past the length
            allowed_inf = "positional" in key or "log-probs" in key or (key.endswith("score") and "hypothesis 0" not in key)
            assert torch.isfinite(value[value != float("-inf")] if allowed_inf else value).all(), key
    vocab = len(task.target_dictionary)
    if option.kind in ("log-probs", "raw"):
        assert out["log-probs"].shape[-1] == vocab and out["log-probs"].shape == out["incremental log-probs"].shape
    if option.kind == "hypos":
        for key, tokens in out.items():
            if key.endswith("tokens"):
                assert tokens[-1].item() == task.target_dictionary.eos(), key


@pytest.mark.parametrize("name", OPTIONS)
@pytest.mark.parametrize("arch", PAPER_ARCHS)
def test_every_paper_arch_runs_or_refuses_in_one_line(arch, name, data_dir):
    option = OPTIONS[name]
    refusal = REFUSED.get(name, {}).get(arch)
    try:
        if option.kind == "hypos":
            model, task, args = generation_model(arch, data_dir)
        else:
            model, task, args = build(arch, data_dir, option.flags)
        out = compute(option, model, task, args, second=second_model(name, data_dir))
    except FusionError as e:
        message = str(e)
        assert refusal is not None, f"undeclared refusal: {message}"
        assert "\n" not in message and refusal in message, message
        assert set(re.findall(r"--[a-z][a-z-]+", message)) & set(option.flags), message
        return
    assert refusal is None, f"declared refused ({refusal}) but runs"
    check_runs(option, out, task)


# fairseq-train's parser gives --encoder-layers-to-keep 0,2 as the list [0, 2]; fairseq 0.12 splits it as a string
THREE_LAYERS = ["--encoder-layers", "3", "--decoder-layers", "3"]
KEEP_FLAGS = [*THREE_LAYERS, "--encoder-layers-to-keep", "0,2", "--decoder-layers-to-keep", "1"]
KEEP_AS_TEXT = {"encoder_layers_to_keep": "0,2", "decoder_layers_to_keep": "1"}  # fairseq's own --model-overrides


def layer_weights(model, side, index):
    return {n.split(".", 3)[3]: p for n, p in model.named_parameters() if n.startswith(f"{side}.layers.{index}.")}


@pytest.mark.parametrize("arch", ["transformer", "fusion_transformer"])
def test_layers_to_keep_on_the_command_line_build_and_load(arch, data_dir, tmp_path):
    model, task, args = build(arch, data_dir, KEEP_FLAGS)
    assert (len(model.encoder.layers), len(model.decoder.layers)) == (2, 1)
    # the same model as fairseq's own path, the string form set on the parsed arguments
    as_text, _, _ = build(arch, data_dir, THREE_LAYERS, overrides=KEEP_AS_TEXT)
    assert_same(log_probs(as_text, task, args, None), log_probs(model, task, args, None), 0)

    # a full 3-layer model's state dict is pruned to its layers 0, 2 (encoder) and 1 (decoder)
    full, _, _ = build(arch, data_dir, THREE_LAYERS, seed=2)
    model.load_state_dict(full.state_dict(), model_cfg=convert_namespace_to_omegaconf(args).model)
    for side, kept in (("encoder", [0, 2]), ("decoder", [1])):
        for new, old in enumerate(kept):
            assert_same(layer_weights(full, side, old), layer_weights(model, side, new), 0)

    # fairseq-train with the flags from scratch: its checkpoint loads, with the layers trained
    args = options.parse_args_and_arch(options.get_training_parser(), [
        data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", arch, "--cpu", *TINY, *KEEP_FLAGS,
        "--dataset-impl", "raw", "--train-subset", "valid", "--max-tokens", "100", "--max-update", "1", "--num-workers", "0",
        "--save-dir", str(tmp_path), "--no-epoch-checkpoints", "--no-progress-bar"])
    train.main(convert_namespace_to_omegaconf(args))
    checkpoint = str(tmp_path / "checkpoint_last.pt")
    [loaded], _, _ = checkpoint_utils.load_model_ensemble_and_task([checkpoint])
    assert (len(loaded.encoder.layers), len(loaded.decoder.layers)) == (2, 1)
    saved = checkpoint_utils.load_checkpoint_to_cpu(checkpoint)["model"]
    assert_same(saved, {k: v for k, v in loaded.state_dict().items() if k in saved}, 0)

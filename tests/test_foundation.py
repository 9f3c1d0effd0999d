"""Foundation: parity with fairseq's transformer, CLI round trip, reload, averaging, bad input."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch
from cli_runner import expect, expect_success
from conftest import REPO, SMALL_MODEL_ARGS, build_model, run_cli, train_args, with_flag
from fairseq import checkpoint_utils
from fairseq.models.transformer import TransformerModel

from fairseq_fusion_tools import data_paths
from fairseq_fusion_tools.checkpoints.average_checkpoints import average_checkpoints
from fairseq_fusion.models import FusionTransformerModel


def build(arch, data_dir, extra=()):
    model, task, _ = build_model(data_dir, arch, *extra, langs=("en", "de"))
    return model, task


def sample_batch(task, bsz=3, src_len=9, tgt_len=7, seed=0):
    g = torch.Generator().manual_seed(seed)
    d = task.source_dictionary
    src = torch.randint(d.nspecial, len(d), (bsz, src_len), generator=g)
    src[0, :3] = d.pad()  # left padding, as fairseq batches sources
    prev = torch.randint(d.nspecial, len(d), (bsz, tgt_len), generator=g)
    return src, torch.tensor([src_len - 3] + [src_len] * (bsz - 1)), prev


@pytest.mark.parametrize("vanilla_arch,fusion_arch,extra", [
    ("transformer", "fusion_transformer", SMALL_MODEL_ARGS),
    ("transformer", "fusion_transformer", SMALL_MODEL_ARGS + ["--encoder-normalize-before", "--decoder-normalize-before", "--share-all-embeddings"]),
    ("transformer_vaswani_wmt_en_de_big", "fusion_transformer_big", ["--encoder-layers", "1", "--decoder-layers", "1"]),
])
@torch.no_grad()
def test_parity_with_fairseq_transformer(multi30k_slice, vanilla_arch, fusion_arch, extra):
    torch.manual_seed(0)
    vanilla, task = build(vanilla_arch, multi30k_slice, extra)
    fusion, _ = build(fusion_arch, multi30k_slice, extra)
    assert type(vanilla) is TransformerModel and isinstance(fusion, FusionTransformerModel)
    v_names = [n for n, _ in vanilla.named_parameters()]
    assert v_names == [n for n, _ in fusion.named_parameters()]
    assert sum(p.numel() for p in vanilla.parameters()) == sum(p.numel() for p in fusion.parameters())
    fusion.load_state_dict(vanilla.state_dict(), strict=True)
    vanilla.eval(), fusion.eval()
    src, lengths, prev = sample_batch(task)
    out_v = vanilla(src, lengths, prev)[0]
    out_f = fusion(src, lengths, prev)[0]
    assert out_v.shape == out_f.shape
    assert (out_v - out_f).abs().max().item() < 1e-5


def test_base_parameter_count_equals_transformer(multi30k_slice):
    vanilla, _ = build("transformer", multi30k_slice)
    fusion, _ = build("fusion_transformer", multi30k_slice)
    n_v = sum(p.numel() for p in vanilla.parameters())
    assert n_v == sum(p.numel() for p in fusion.parameters())
    assert n_v > 40_000_000  # really the base size (6+6 layers, d=512)


@pytest.fixture(scope="module")
def trained(multi30k_slice, tmp_path_factory):
    """fusion_transformer trained a few updates with fairseq-train, epoch checkpoints kept."""
    save = str(tmp_path_factory.mktemp("ckpt"))
    proc = run_cli(train_args(multi30k_slice, save, max_update=1000, extra=["--max-epoch", "2"]))
    expect(proc, "done training" in proc.stdout + proc.stderr, "fairseq-train to log 'done training'")
    return save


def test_cli_round_trip_generate_bleu(multi30k_slice, trained):
    """fairseq-preprocess -> fairseq-train --user-dir -> fairseq-generate -> BLEU line, no TORCH_FORCE_* variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_FORCE")}
    proc = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "fairseq-generate"), multi30k_slice,
         "--user-dir", os.path.join(REPO, "fairseq_fusion"), "--path", os.path.join(trained, "checkpoint_last.pt"),
         "--gen-subset", "test", "--beam", "5", "--batch-size", "128", "--max-len-b", "20", "--cpu", "--remove-bpe"],
        capture_output=True, text=True, env=env,
    )
    expect_success(proc)
    expect(proc, re.search(r"Generate test with beam=5: BLEU4 = \d+\.\d+", proc.stdout),
           "the line 'Generate test with beam=5: BLEU4 = ...'")
    hypotheses = len(re.findall(r"^H-\d+\t", proc.stdout, flags=re.M))
    expect(proc, hypotheses == 1000, f"1000 H- lines, one per test sentence, not {hypotheses}")


def test_interactive_and_hub(multi30k_slice, trained):
    run_cli(
        ["fairseq-interactive", multi30k_slice, "--user-dir", os.path.join(REPO, "fairseq_fusion"),
         "--path", os.path.join(trained, "checkpoint_last.pt"), "--cpu", "--beam", "2", "--max-len-b", "10"],
    )
    code = (
        "import fairseq_fusion\n"
        "from fairseq_fusion.models import FusionTransformerModel\n"
        f"hub = FusionTransformerModel.from_pretrained({trained!r}, checkpoint_file='checkpoint_last.pt', data_name_or_path={multi30k_slice!r},"
        f" tokenizer='moses', bpe='subword_nmt', bpe_codes={os.path.join(multi30k_slice, 'bpe.codes')!r})\n"
        "out = hub.translate('A dog runs on the grass .', beam=2, max_len_b=10)\n"
        "print('HUB', type(hub.models[0]).__name__, isinstance(out, str))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    expect(res, "HUB FusionTransformerModel True" in res.stdout, "the hub to load a FusionTransformerModel and translate to text")


def test_reload_in_fresh_process_gives_same_outputs(multi30k_slice, trained):
    path = os.path.join(trained, "checkpoint_last.pt")
    models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task([path])
    model = models[0].eval()
    src, lengths, prev = sample_batch(task)
    with torch.no_grad():
        here = model(src, lengths, prev)[0]
    out_file = os.path.join(trained, "fresh_out.pt")
    code = (
        "import torch, fairseq_fusion\n"
        "from fairseq import checkpoint_utils\n"
        f"m, _, _ = checkpoint_utils.load_model_ensemble_and_task([{path!r}])\n"
        f"src, lengths, prev = torch.load({out_file + '.in'!r})\n"
        "with torch.no_grad():\n"
        "    out = m[0].eval()(src, lengths, prev)[0]\n"
        f"torch.save(out, {out_file!r})\n"
    )
    torch.save((src, lengths, prev), out_file + ".in")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    expect_success(res)
    assert torch.equal(torch.load(out_file), here)


def test_average_checkpoints_is_mean_of_parameters(trained, tmp_path):
    paths = [os.path.join(trained, f"checkpoint{e}.pt") for e in (1, 2)]
    out = str(tmp_path / "avg.pt")
    run_cli(["fusion-average-checkpoints", "--inputs", trained, "--num-epoch-checkpoints", "2", "--output", out])
    avg = torch.load(out)["model"]
    a, b = (torch.load(p)["model"] for p in paths)
    assert set(avg) == set(a)
    changed = 0
    for k in a:
        expected = (a[k].double() + b[k].double()) / 2
        assert torch.allclose(avg[k].double(), expected, atol=1e-7), k
        changed += int(not torch.equal(a[k], b[k]))
    assert changed > 10  # the two checkpoints really differ
    # the Python API averages the same files to the same parameters
    api = average_checkpoints(paths)["model"]
    assert api.keys() == avg.keys() and all(torch.equal(api[k], avg[k]) for k in avg)


def test_vanilla_transformer_checkpoint_converts_and_loads_strictly(multi30k_slice, tmp_path):
    save = str(tmp_path / "vanilla")
    run_cli(with_flag(train_args(multi30k_slice, save, arch="transformer", max_update=3), "--user-dir"))
    out = str(tmp_path / "fusion.pt")
    run_cli(["fusion-convert-checkpoint", "--input", os.path.join(save, "checkpoint_last.pt"), "--output", out])
    (vanilla,), _, task = checkpoint_utils.load_model_ensemble_and_task([os.path.join(save, "checkpoint_last.pt")])
    (fusion,), _, _ = checkpoint_utils.load_model_ensemble_and_task([out])
    assert type(vanilla) is TransformerModel and type(fusion) is FusionTransformerModel
    src, lengths, prev = sample_batch(task)
    with torch.no_grad():
        assert (vanilla.eval()(src, lengths, prev)[0] - fusion.eval()(src, lengths, prev)[0]).abs().max() < 1e-5
    # and fairseq-train resumes a fusion_transformer run from the vanilla checkpoint (strict load)
    proc = run_cli(train_args(multi30k_slice, str(tmp_path / "resumed"), max_update=4,
                              extra=["--restore-file", os.path.join(save, "checkpoint_last.pt"), "--reset-optimizer",
                                     "--reset-dataloader", "--reset-meters", "--reset-lr-scheduler"]))
    expect(proc, "Loaded checkpoint" in proc.stdout + proc.stderr, "fairseq-train to load the vanilla checkpoint")


def test_bad_input_messages(multi30k_slice, trained, tmp_path):
    proc = run_cli(train_args(multi30k_slice, str(tmp_path / "x"), arch="fusion_transformr"), check=False)
    expect(proc, proc.returncode != 0 and "--arch fusion_transformr: no such arch; did you mean fusion_transformer" in proc.stderr,
           "a refusal of the misspelt arch suggesting fusion_transformer")
    # a checkpoint from another vocabulary: re-binarize with a different BPE size
    other = str(tmp_path / "other_vocab")
    src = data_paths.data_path("multi30k")
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", os.path.join(src, "train"),
             "--validpref", os.path.join(src, "val"), "--testpref", os.path.join(src, "test_2016_flickr"),
             "--destdir", other, "--max-lines", "300", "--bpe-merges", "100", "--workers", "1"])
    proc = run_cli(["fairseq-generate", other, "--user-dir", os.path.join(REPO, "fairseq_fusion"),
                    "--path", os.path.join(trained, "checkpoint_last.pt"), "--cpu", "--gen-subset", "test"], check=False)
    expect(proc, proc.returncode != 0 and "does not match this model's source dictionary" in proc.stderr,
           "a refusal of the checkpoint of another dictionary")
    expect(proc, re.search(r"has \d+ entries \(shape \(\d+, 32\)\) in the checkpoint but " + re.escape(other) +
                           r"/dict\.en\.txt gives \d+ \(shape \(\d+, 32\)\)", proc.stderr),
           "the refusal to give both sizes and name the dictionary")
    # a missing data folder for our tools
    proc = run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", str(tmp_path / "nope" / "train"),
                    "--validpref", str(tmp_path / "nope" / "val"), "--destdir", str(tmp_path / "y")], check=False)
    expect(proc, proc.returncode != 0 and "no text file" in proc.stderr and "nope/train.en" in proc.stderr,
           "a refusal naming the missing nope/train.en")


def test_separate_dictionaries(tmp_path):
    """--separate-dictionaries: one dictionary per language, each with its own side's sub-words only
    (recounted here from the BPE text); the default joins them."""
    from collections import Counter

    src = data_paths.data_path("multi30k")
    out = str(tmp_path / "sep")
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", os.path.join(src, "train"),
             "--validpref", os.path.join(src, "val"), "--destdir", out, "--max-lines", "200", "--bpe-merges", "100",
             "--workers", "1", "--separate-dictionaries"])
    for lang in ("en", "de"):
        with open(os.path.join(out, "tok", f"train.bpe.{lang}"), encoding="utf-8") as f:
            counts = Counter(tok for line in f for tok in line.split())
        with open(os.path.join(out, f"dict.{lang}.txt"), encoding="utf-8") as f:
            entries = dict(line.split()[:2] for line in f if not line.startswith("madeupword"))  # fairseq's padding to x8
        assert set(entries) == set(counts) and all(int(entries[t]) == c for t, c in counts.items()), lang
    with open(os.path.join(out, "prepare.json")) as f:
        assert json.load(f)["joined_dictionary"] is False


def test_added_test_set_equals_one_prepared_with_the_rest(tmp_path):
    """--add-test reuses the folder's codes and dictionaries: the added split is byte-identical to the
    same set prepared together with the training data, and nothing else in the folder changes."""
    import hashlib

    src = data_paths.data_path("multi30k")
    common = ["-s", "en", "-t", "de", "--trainpref", os.path.join(src, "train"), "--validpref", os.path.join(src, "val"),
              "--max-lines", "200", "--bpe-merges", "100", "--workers", "1"]
    full, added = str(tmp_path / "full"), str(tmp_path / "added")
    run_cli(["fusion-prepare-text", *common, "--testpref", os.path.join(src, "test_2016_flickr") + "," + os.path.join(src, "test_2017_flickr"),
             "--destdir", full])
    run_cli(["fusion-prepare-text", *common, "--testpref", os.path.join(src, "test_2016_flickr"), "--destdir", added])

    def digest(folder, names):
        return {n: hashlib.md5(open(os.path.join(folder, n), "rb").read()).hexdigest() for n in names}

    kept = ["bpe.codes", "dict.en.txt", "dict.de.txt", "test.en-de.en.bin", "train.en-de.de.bin"]
    before = digest(added, kept)
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--destdir", added, "--max-lines", "200", "--workers", "1",
             "--add-test", os.path.join(src, "test_2017_flickr")])
    assert digest(added, kept) == before
    split = [f"test1.en-de.{lang}.{ext}" for lang in ("en", "de") for ext in ("bin", "idx")]
    assert digest(added, split) == digest(full, split)
    proc = run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--destdir", str(tmp_path / "none"),
                    "--add-test", os.path.join(src, "test_2017_flickr")], check=False)
    expect(proc, proc.returncode != 0 and "--add-test needs a --destdir written by fusion-prepare-text" in proc.stderr,
           "--add-test into a folder fusion-prepare-text did not write to be refused")


def test_punctuation_normalization_and_non_printing_removal(tmp_path):
    """--normalize-punctuation: Moses' normalize-punctuation + remove-non-printing-char before tokenizing,
    recorded so that TextPipeline does the same to new text; hand-written expected tokens."""
    from fairseq_fusion.encoders.text_pipeline import TextPipeline

    raw = {"en": ["He said \u201ehello\u201c \u2026 it\u2019s 5\u00a0%\x07 done", "a b c"] * 3,
           "de": ["Er sagte \u00abhallo\u00bb", "x y z"] * 3}
    for split in ("train", "valid"):
        for lang, lines in raw.items():
            (tmp_path / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = str(tmp_path / "norm")
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", str(tmp_path / "train"),
             "--validpref", str(tmp_path / "valid"), "--destdir", out, "--bpe-merges", "5", "--workers", "1",
             "--normalize-punctuation"])
    with open(os.path.join(out, "tok", "train.en"), encoding="utf-8") as f:
        first = f.readline().strip()
    assert first == 'He said " hello " ... it \'s 5 % done'
    with open(os.path.join(out, "tok", "train.de"), encoding="utf-8") as f:
        assert f.readline().strip() == 'Er sagte " hallo "'
    assert TextPipeline(out, "en").tokenize(raw["en"][0]) == first


def test_chinese_is_segmented_with_jieba_on_real_zh_en_text(tmp_path):
    """The 450 Chinese sentences of the zhen gold set, spaces removed (raw Chinese): prepared words agree with
    the gold segmentation (word-span F1 over 0.75, computed here: 0.805; unsegmented text scores 0), the first
    sentence exactly; unsegmented Chinese with --zh-segmenter none is refused."""
    pytest.importorskip("jieba")
    path = os.path.join(data_paths.data_path("alignment"), "zhen", "test.zh-en")
    with open(path, encoding="utf-8") as f:
        pairs = [line.split("|||") for line in f]
    gold = [zh.split() for zh, _ in pairs]
    (tmp_path / "train.zh").write_text("\n".join("".join(g) for g in gold) + "\n", encoding="utf-8")
    (tmp_path / "train.en").write_text("\n".join(en.strip() for _, en in pairs) + "\n", encoding="utf-8")
    out = str(tmp_path / "zhen")
    common = ["fusion-prepare-text", "-s", "zh", "-t", "en", "--trainpref", str(tmp_path / "train"),
              "--validpref", str(tmp_path / "train"), "--bpe-merges", "50", "--workers", "1"]
    run_cli([*common, "--destdir", out])
    with open(os.path.join(out, "tok", "train.zh"), encoding="utf-8") as f:
        ours = [line.split() for line in f]
    assert len(ours) == 450  # nothing dropped by the length filter
    assert ours[0] == "科学家 一直 猜想 土卫六 上 存在 着 由 液态 甲烷 构成 的 海洋 。".split()

    def spans(words):
        out, pos = set(), 0
        for w in words:
            out.add((pos, pos + len(w)))
            pos += len(w)
        return out

    hit = sum(len(spans(o) & spans(g)) for o, g in zip(ours, gold))
    f1 = 2 * hit / (sum(len(o) for o in ours) + sum(len(g) for g in gold))
    assert f1 > 0.75, f1  # 0.805 measured (jieba vs the gold set's conventions); 0.0 unsegmented
    proc = run_cli([*common, "--destdir", str(tmp_path / "refused"), "--zh-segmenter", "none"], check=False)
    expect(proc, proc.returncode != 0 and "looks unsegmented" in proc.stderr and "--zh-segmenter jieba" in proc.stderr,
           "unsegmented Chinese to be refused, suggesting --zh-segmenter jieba")


def test_technique_modules_do_not_import_the_model():
    """modules/ (techniques) and models/ (the model) share the flag registry, fusion_options.py;
    a technique importing models/ would make the registry part of the model again."""
    import ast
    import glob

    offenders = []
    for path in glob.glob(os.path.join(REPO, "fairseq_fusion", "modules", "*.py")):
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.ImportFrom):
                name = ("." * node.level) + (node.module or "")
                if name.startswith("..models") or name.startswith("fairseq_fusion.models"):
                    offenders.append(f"{os.path.basename(path)}: from {name} import ...")
    assert not offenders, offenders


def test_readme_lists_every_registered_arch():
    from fairseq.models import ARCH_MODEL_REGISTRY

    from fairseq_fusion.models import FusionTransformerModel

    text = open(os.path.join(REPO, "README.md")).read()
    table = text.split("<!-- ARCH TABLE -->")[1].split("<!-- /ARCH TABLE -->")[0]
    listed = {line.split("`")[1] for line in table.splitlines() if line.startswith("| `")}
    registered = {a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel}
    assert listed == registered, (sorted(registered - listed), sorted(listed - registered))


def test_batches_cover_every_sentence_with_a_batch_size_multiple():
    """fairseq 0.12 drops the last batch when its size is not a multiple of
    --required-batch-size-multiple (fairseq-generate then skips the longest test sentences);
    with the plugin every sentence is in exactly one batch, in order, and the other batches
    keep fairseq's sizes (multiples of 8 within max_tokens)."""
    import numpy as np

    import fairseq_fusion  # noqa: F401  (patches fairseq's batching)
    from fairseq.data import data_utils

    sizes = np.array([18, 20, 36, 39, 10, 55, 12, 59, 9, 14, 11, 33, 13, 15, 8, 16, 12, 17, 14, 16])
    order = np.argsort(sizes, kind="mergesort")
    for max_tokens, expected in ((12000, [16, 4]), (400, [8, 8, 4])):
        batches = data_utils.batch_by_size(order, num_tokens_fn=lambda i: sizes[i], num_tokens_vec=sizes[order],
                                           max_tokens=max_tokens, required_batch_size_multiple=8)
        assert [len(b) for b in batches] == expected
        assert np.concatenate(batches).tolist() == order.tolist()
        assert all(len(b) * sizes[b].max() <= max_tokens for b in batches)


def test_no_repeat_ngram_blocks_repeats_of_the_generated_tokens():
    """--no-repeat-ngram-size 2 at step 3 of [eos, 5, 6, 5, pad, pad]: the bigram (5, 6) was seen,
    so 6 is banned after the last 5 (fairseq 0.12's CPU path compared the padding instead)."""
    import math

    import fairseq_fusion  # noqa: F401  (patches fairseq's n-gram blocking)
    from fairseq.ngram_repeat_block import NGramRepeatBlock

    block = NGramRepeatBlock(2, use_extension=False)
    tokens = torch.tensor([[2, 5, 6, 5, 1, 1], [2, 7, 8, 9, 1, 1]])
    lprobs = torch.zeros(2, 10)
    out = block(tokens, lprobs, bsz=1, beam_size=2, step=3)
    assert out[0, 6] == -math.inf and (out[0, [i for i in range(10) if i != 6]] == 0).all()
    assert (out[1] == 0).all()  # 7 8 9: no bigram repeats, nothing banned


def test_no_repeat_ngram_is_fairseqs_code_on_the_generated_tokens_and_scripts():
    """The fix is fairseq's own ``_no_repeat_ngram`` given ``tokens[:, : step + 1]`` (random rows, n 1-4, every
    step), written as a method of its own so that TorchScript compiles it (fairseq's TestJitSequenceGenerator
    scripts a generator with ``no_repeat_ngram_size=2``)."""
    import fairseq_fusion  # noqa: F401  (patches fairseq's n-gram blocking)
    from fairseq.ngram_repeat_block import NGramRepeatBlock

    fairseqs = NGramRepeatBlock._no_repeat_ngram.fairseq_no_repeat_ngram
    g = torch.Generator().manual_seed(0)
    for n in (1, 2, 3, 4):
        block = NGramRepeatBlock(n, use_extension=False)
        tokens = torch.cat([torch.full((6, 1), 2), torch.randint(4, 8, (6, 9), generator=g)], dim=1)
        for step in range(9):
            lprobs = torch.randn(6, 10, generator=g)
            ours = block(tokens, lprobs.clone(), bsz=3, beam_size=2, step=step)
            assert torch.equal(ours, fairseqs(block, tokens[:, : step + 1], lprobs.clone(), 3, 2, step)), (n, step)
    block = NGramRepeatBlock(2, use_extension=False)
    tokens = torch.tensor([[2, 5, 6, 5, 1, 1], [2, 7, 8, 9, 1, 1]])
    eager = block(tokens, torch.zeros(2, 10), 1, 2, 3)
    assert torch.equal(torch.jit.script(block)(tokens, torch.zeros(2, 10), 1, 2, 3), eager)

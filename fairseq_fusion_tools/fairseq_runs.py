"""What the comparison (``compare/``), the benchmark (``benchmark/``) and the GPU checks (``gpu/``) share about the
fairseq runs they start and measure: the model sizes, the optimization flags every run has, the line of
fairseq-train's JSON log, the registered archs, torch's FLOP count, the papers' own speed ratios, and where the
console scripts they start (fairseq-train, fairseq-generate, ...) are.
"""
import os
import re
import shutil
import sys


def console_script(name):
    """Path of a console script (fairseq-train, ...) of this Python's environment, or its bare name on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(beside):
        return beside
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found beside {sys.executable} nor on PATH: is fairseq installed (make install)?")
    return found


SIZES = {
    # d, ffn, heads, enc layers, dec layers; these flags override the arch's own sizes (a `_big` or
    # `_small` arch is measured at the size asked for, with its other settings)
    "tiny": ["--encoder-embed-dim", "32", "--decoder-embed-dim", "32", "--encoder-ffn-embed-dim", "64",
             "--decoder-ffn-embed-dim", "64", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
             "--encoder-layers", "2", "--decoder-layers", "2"],  # tests only
    "small": ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512",
              "--decoder-ffn-embed-dim", "512", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
              "--encoder-layers", "3", "--decoder-layers", "3"],
    "base": ["--encoder-embed-dim", "512", "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "2048",
             "--decoder-ffn-embed-dim", "2048", "--encoder-attention-heads", "8", "--decoder-attention-heads", "8",
             "--encoder-layers", "6", "--decoder-layers", "6"],
    "big": ["--encoder-embed-dim", "1024", "--decoder-embed-dim", "1024", "--encoder-ffn-embed-dim", "4096",
            "--decoder-ffn-embed-dim", "4096", "--encoder-attention-heads", "16", "--decoder-attention-heads", "16",
            "--encoder-layers", "6", "--decoder-layers", "6"],
}
# optimization per size (dropout, lr, warm-up, max tokens per GPU/CPU): "small" is `make demo`'s, base and
# big are fairseq's WMT'14 En-De recipes (Vaswani et al. 2017; Ott et al. 2018)
TRAINING = {
    "tiny": ["--dropout", "0.1", "--lr", "1e-3", "--warmup-updates", "4", "--max-tokens", "1500"],  # tests only
    "small": ["--dropout", "0.1", "--lr", "2e-3", "--warmup-updates", "100", "--max-tokens", "6000"],
    "base": ["--dropout", "0.1", "--lr", "7e-4", "--warmup-updates", "4000", "--max-tokens", "4096"],
    "big": ["--dropout", "0.3", "--lr", "5e-4", "--warmup-updates", "4000", "--max-tokens", "3584"],
}
COMMON = ["--share-all-embeddings", "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
          "--lr-scheduler", "inverse_sqrt", "--weight-decay", "0.0"]
# a stats line of fairseq-train's log with --log-format json: (kind, its JSON)
LOG_LINE = re.compile(r"\| (train_inner|train|valid) \| (\{.*\})\s*$")


def fusion_archs():
    """Every registered ``fusion_transformer`` arch, sorted."""
    import fairseq_fusion  # noqa: F401  (registers them)
    from fairseq_fusion.models import catalog

    return sorted(catalog.fusion_archs())


def count_flops(fn, no_grad=False):
    """FLOPs of ``fn()`` as torch counts them (``FlopCounterMode``: matrix products, convolutions, attention)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        if no_grad:
            with torch.no_grad():
                fn()
        else:
            fn()
    return float(counter.get_total_flops())


def paper_ratios(arch):
    """The paper's own (training, decoding) speed ratio of an arch, from its preset's ``@describe``."""
    from fairseq_fusion.models import catalog

    entry = catalog.CATALOG.get(arch)
    return entry.speed_ratios if entry is not None else (None, None)

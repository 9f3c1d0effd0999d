"""fairseq-fusion: five Transformer NMT papers as options of one fairseq model.

Loaded by fairseq through ``--user-dir fairseq_fusion``; importing it registers the
``fusion_transformer`` model family, our criterions and tasks, allow-lists the few
classes fairseq checkpoints pickle, so they load under torch >= 2.6 (``weights_only``),
turns off cuDNN's attention kernels on CUDA (``attention_backends``: a plan per batch shape),
lets ``--ddp-backend pytorch_ddp`` run on CPU (``distributed_cpu``), and fixes four fairseq
0.12 bugs that change what users measure (``fairseq_fixes``: the last batch dropped when its
size is not a multiple of 8; ``--no-repeat-ngram-size`` without effect off the CUDA extension; ``--bf16``'s
per-parameter Adam on a GPU; ``--diverse-beam-groups`` ending in ``IndexError``), and filters the notices of
fairseq's internals a user cannot act on, one message at a time (``quiet``). Its refusals of bad input
reach the user as one line, ``fairseq-fusion: error: ...`` (``errors``). Every change it makes to fairseq, torch
and Python at import is listed, with its reason, fairseq versions and test, in ``global_changes``.
"""
from . import global_changes, stack

# every change to fairseq, torch and Python, with its reason and test, is listed in global_changes.py
global_changes.apply("python")  # the one-line refusals and warnings; fairseq's notices filtered before it is imported

# without torch or fairseq only the torch-free modules import (stack.py): the tools' scorers run, the rest stops
# with one line (fairseq_fusion_tools/cli/__init__.py)
if not stack.missing():
    from . import torch_version

    torch_version.check_torch()  # torch >= the oldest tested, or one line saying so

    global_changes.apply("fairseq")  # fixes of fairseq bugs, entry checks, input warnings, CPU DDP, cuDNN attention

    from . import criterions, models, modules, tasks  # noqa: F401
    from .encoders import prepared  # noqa: F401  (--bpe prepared)

    global_changes.apply("registered")  # fairseq-train --arch ARCH --help lists the technique flags

__version__ = "0.1.0"

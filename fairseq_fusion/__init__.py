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
reach the user as one line, ``fairseq-fusion: error: ...`` (``errors``).
"""
from . import errors, quiet, stack

errors.install()  # the plugin's refusals as one line (errors.py)
quiet.install()  # before fairseq is imported: its import-time notices (see quiet.py)

# without torch or fairseq only the torch-free modules import (stack.py): the tools' scorers run, the rest stops
# with one line (fairseq_fusion_tools/cli/__init__.py)
if not stack.missing():
    from . import torch_version

    torch_version.check_torch()  # torch >= the oldest tested, or one line saying so

    from . import (attention_backends, checkpoint_safety, command_paths, distributed_cpu, entry_checks, fairseq_fixes,
                   input_checks)

    attention_backends.configure()  # no cuDNN attention on CUDA: it plans per batch shape (FUSION_CUDNN_ATTENTION=1 keeps it)
    checkpoint_safety.allow_fairseq_checkpoint_globals()
    distributed_cpu.patch_fairseq_ddp()
    fairseq_fixes.patch_fairseq()
    entry_checks.patch_fairseq()  # missing/truncated checkpoints, unknown --model-overrides keys, missing data folders
    command_paths.patch_fairseq()  # --save-dir, --results-path, --input, a missing split: one line naming the flag
    input_checks.patch_fairseq()  # empty, non-UTF-8 or unknown-word input: warnings; an empty line's output empty

    from . import criterions, models, modules, tasks  # noqa: F401
    from .encoders import prepared  # noqa: F401  (--bpe prepared)
    from . import arch_help

    arch_help.install()  # fairseq-train --arch ARCH --help lists the technique flags under their titles

__version__ = "0.1.0"

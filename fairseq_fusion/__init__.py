"""fairseq-fusion: five Transformer NMT papers as options of one fairseq model.

Loaded by fairseq through ``--user-dir fairseq_fusion``; importing it registers the ``fusion_transformer`` model
family, our criterions and tasks. The package is three layers (ARCHITECTURE.md):

- the core, here at the top: ``models/``, ``modules/`` (one technique a file), ``tasks/``, ``criterions/``,
  ``encoders/``, the technique registry (``fusion_options``), the seams, ``errors``;
- ``compat/``: the fixes and start-up changes to fairseq, torch and Python (checkpoints under torch's
  ``weights_only``, CPU DDP, cuDNN attention, fairseq 0.12 bugs that change what users measure, fairseq's notices);
- ``guards/``: the checks that turn bad input into one line ``fairseq-fusion: error: ...`` and warn of a likely
  wrong output.

Every change of ``compat/`` and ``guards/`` to fairseq, torch and Python is listed, with its reason, fairseq versions
and test, in ``compat/global_changes.py``, and applied from that list here, nowhere else.
"""
from .compat import global_changes, stack

# every change to fairseq, torch and Python, with its reason and test, is listed in compat/global_changes.py
global_changes.apply("python")  # the one-line refusals and warnings; fairseq's notices filtered before it is imported

# without torch or fairseq only the torch-free modules import (compat/stack.py): the tools' scorers run, the rest stops
# with one line (fairseq_fusion_tools/cli/__init__.py)
if not stack.missing():
    from .compat import torch_version

    torch_version.check_torch()  # torch >= the oldest tested, or one line saying so

    global_changes.apply("fairseq")  # fixes of fairseq bugs, entry checks, input warnings, CPU DDP, cuDNN attention

    from . import criterions, models, modules, tasks  # noqa: F401
    from .encoders import prepared  # noqa: F401  (--bpe prepared)

    global_changes.apply("registered")  # fairseq-train --arch ARCH --help lists the technique flags

__version__ = "0.1.0"

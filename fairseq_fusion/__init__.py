"""fairseq-fusion: five Transformer NMT papers as options of one fairseq model.

Loaded by fairseq through ``--user-dir fairseq_fusion``; importing it registers the ``fusion_transformer`` model
family, our criterions and tasks, and nothing else beyond what their models need to load and run. The package is
three layers (ARCHITECTURE.md):

- the core, here at the top: ``models/``, ``modules/`` (one technique a file), ``tasks/``, ``criterions/``,
  ``encoders/``, the technique registry (``fusion_options``), the seams, ``errors``;
- ``compat/``: the fixes and start-up changes to fairseq, torch and Python (checkpoints under torch's
  ``weights_only``, CPU DDP, cuDNN attention, fairseq bugs that change what users measure, fairseq's notices);
- ``guards/``: the checks that turn bad input into one line ``fairseq-fusion: error: ...`` and warn of a likely
  wrong output.

Every change of ``compat/`` and ``guards/`` to fairseq, torch and Python is listed in ``global_changes.py`` with its
scope: made at import, or only in a command-line run (``command_line.py``), which a program of one's own asks for
with ``fairseq_fusion.command_line.configure()``.
"""
from . import global_changes
from .compat import stack

global_changes.configure_if_command()  # a fairseq-* or fusion-* process: its command-line settings (command_line.py)

# without torch or fairseq, or in a torch-free command's process, only the torch-free modules import (compat/stack.py):
# the tools' scorers run, the rest stops with one line (fairseq_fusion_tools/cli/__init__.py)
if stack.loaded():
    from .compat import torch_version

    torch_version.check_torch()  # torch >= the oldest tested, or one line saying so

    from . import criterions, models, modules, tasks  # noqa: F401
    from .encoders import prepared  # noqa: F401  (--bpe prepared)

    global_changes.apply_at_import()  # the checkpoint allow-list, fairseq bug fixes, checks of the plugin's models

__version__ = "0.1.0"

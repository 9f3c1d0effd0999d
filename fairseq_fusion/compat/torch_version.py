"""The oldest torch the plugin is tested with (docs/installation.md: Tested stacks; `make test-compat`).

torch is not in pyproject.toml's dependencies (a declared torch would let pip replace the user's own torch,
or pull a CUDA build of several GB into an environment without one), so the floor is checked here, at
plugin import, with one line instead of an error from deep inside a model.
"""
import re

import torch

from ..errors import FusionError

TORCH_FLOOR = (2, 1)


def check_torch(version=None):
    version = version or torch.__version__
    found = tuple(int(x) for x in re.match(r"(\d+)\.(\d+)", version).groups())
    if found < TORCH_FLOOR:
        floor = ".".join(map(str, TORCH_FLOOR))
        raise FusionError(f"torch {version} is installed; fairseq-fusion needs torch >= {floor} (the oldest tested, "
                          "see docs/installation.md: Tested stacks)")

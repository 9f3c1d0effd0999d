"""The ``fusion_transformer`` model family and its named architectures.

Every ``archs_*.py`` file holds presets (flag settings) of one paper; importing this
package registers them all with fairseq.
"""
import importlib
import os

from .fusion_transformer import FusionTransformerModel  # noqa: F401

for _file in sorted(os.listdir(os.path.dirname(__file__))):
    if _file.startswith("archs") and _file.endswith(".py"):
        importlib.import_module(__name__ + "." + _file[:-3])

from .fusion_config import wrap_registered_archs  # noqa: E402

wrap_registered_archs()  # fairseq-hydra-train: YAML model sections checked, options version set

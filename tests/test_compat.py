"""The omegaconf/hydra APIs the plugin uses, on fairseq 0.12.2's pins (omegaconf 2.0, hydra-core 1.0: `make
test-compat`) as on .venv's newer ones, and the torch floor."""
import re

import pytest
import torch
from omegaconf import OmegaConf, nodes

from fairseq_fusion.compat import checkpoint_safety
from fairseq_fusion.errors import FusionError


def test_allow_list_has_only_the_node_classes_omegaconf_has(monkeypatch):
    """omegaconf < 2.2 has no PathNode or BytesNode: the allow-list is built without them."""
    monkeypatch.delattr(nodes, "PathNode", raising=False)
    monkeypatch.delattr(nodes, "BytesNode", raising=False)
    classes = checkpoint_safety.fairseq_checkpoint_globals()
    assert {nodes.AnyNode, nodes.StringNode, nodes.IntegerNode, nodes.FloatNode, nodes.BooleanNode,
            nodes.EnumNode} <= set(classes)


@pytest.mark.skipif(not hasattr(torch.serialization, "add_safe_globals"), reason="torch < 2.4: no allow-list")
def test_omegaconf_containers_load_with_weights_only(tmp_path):
    """What a broadcast training state pickles (a DictConfig of every value type) loads with weights_only=True."""
    cfg = OmegaConf.create({"model": {"_name": "x", "layers": 2, "dropout": 0.1, "fp16": False, "betas": [0.9, 0.98],
                                      "user_dir": None}})
    path = str(tmp_path / "state.pt")
    torch.save({"cfg": cfg}, path)
    checkpoint_safety.allow_fairseq_checkpoint_globals()
    loaded = torch.load(path, weights_only=True)["cfg"]
    assert OmegaConf.to_container(loaded) == OmegaConf.to_container(cfg)


def test_fusion_error_takes_hydras_compact_error_path():
    """fairseq-hydra-train prints a CompactHydraException without its traceback (hydra-core 1.0 has it too)."""
    from hydra.errors import CompactHydraException

    assert issubclass(FusionError, CompactHydraException) and issubclass(FusionError, ValueError)


@pytest.mark.parametrize("version, refused", [("2.0.1", True), ("1.13.1+cu117", True), ("2.1.0", False),
                                              ("2.13.0+cpu", False), ("10.0.0", False)])
def test_torch_older_than_the_tested_floor_is_refused_in_one_line(version, refused):
    from fairseq_fusion.compat.torch_version import check_torch

    if refused:
        with pytest.raises(FusionError, match=rf"^fairseq-fusion: error: torch {re.escape(version)} is installed; "
                                              r"fairseq-fusion needs torch >= 2\.1 "):
            check_torch(version)
    else:
        check_torch(version)

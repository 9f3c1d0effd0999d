"""Which kernels ``scaled_dot_product_attention`` may pick on CUDA while the plugin is loaded.

fairseq's ``MultiheadAttention`` trains through ``F.multi_head_attention_forward``, which calls
``scaled_dot_product_attention`` with the padding mask as ``attn_mask``. For fp16/bf16 with a mask, torch's
dispatcher may choose cuDNN's attention, and cuDNN builds an execution plan for every new (batch, length) shape:
translation batches change shape nearly every step, so every step pays it (docs/gpu.md: "Speed on the GPU" has the
profile and the measured cost). The plugin turns cuDNN's attention off (``torch.backends.cuda.enable_cudnn_sdp``),
for the whole process of a command-line run: fairseq's own ``transformer`` too, so comparisons stay fair. torch then takes
flash or memory-efficient attention, which need no plan. ``FUSION_CUDNN_ATTENTION=1`` keeps torch's default.
Only in a command-line run (``command_line.py``); elsewhere the plugin's models turn it off around their own
forward (``models/attention_kernels.py``).
"""
import logging
import os

from ..errors import FusionError

ENV = "FUSION_CUDNN_ATTENTION"
logger = logging.getLogger(__name__)
_logged = False
torch_default = None  # torch's own setting, read before the plugin's first change (reports show it)


def keep_torch_default(environ=None):
    """True when ``FUSION_CUDNN_ATTENTION=1``: torch's own choice of attention kernels is left alone."""
    value = (os.environ if environ is None else environ).get(ENV, "0").strip()
    if value not in ("0", "1", ""):
        raise FusionError(f"{ENV}={value}: expected 1 (keep torch's default, cuDNN attention allowed) or 0 (the "
                          "plugin's default: cuDNN attention off)")
    return value == "1"


def turn_off(environ=None):
    """A command-line run's change: cuDNN attention off for the process; whether that changed the setting."""
    import torch

    was = torch.backends.cuda.cudnn_sdp_enabled()
    return configure(environ) is False and was


def configure(environ=None):
    """Apply the plugin's choice; returns whether cuDNN attention is allowed afterwards. Logged once, on CUDA."""
    global _logged, torch_default
    import torch

    if torch_default is None:
        torch_default = torch.backends.cuda.cudnn_sdp_enabled()
    if keep_torch_default(environ):
        return torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(False)
    if not _logged and torch.cuda.is_available():
        _logged = True
        logger.info(f"fairseq-fusion: cuDNN attention is off (it plans anew for every batch shape); "
                    f"{ENV}=1 keeps torch's default")
    return False

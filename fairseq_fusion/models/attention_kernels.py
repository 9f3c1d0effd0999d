"""cuDNN's attention off around the plugin's models' own forward, on CUDA: not for the process.

fairseq's attention calls ``scaled_dot_product_attention`` with the padding mask; for fp16/bf16 torch may pick
cuDNN's kernel, which plans anew for every (batch, length) shape, 200-250 ms a step (docs/gpu.md). Around the
forward of the plugin's models (training, validation, each decoding step) torch may pick flash, memory-efficient or
math attention instead; a program's own models keep torch's choice. A command-line run turns cuDNN attention off
for the whole process, fairseq's models included, so comparisons stay fair (``compat/attention_backends.py``).
``FUSION_CUDNN_ATTENTION=1`` keeps torch's choice everywhere.
"""
import contextlib
import os

import torch

ENV = "FUSION_CUDNN_ATTENTION"


def without_cudnn_attention(tensor):
    """A context in which ``scaled_dot_product_attention`` does not use cuDNN, for work on ``tensor``'s device."""
    if not tensor.is_cuda or torch.compiler.is_compiling() or os.environ.get(ENV, "").strip() == "1" \
            or not torch.backends.cuda.cudnn_sdp_enabled():
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])

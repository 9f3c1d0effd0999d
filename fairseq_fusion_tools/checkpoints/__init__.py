"""Checkpoint tools: average several checkpoints (fusion-average-checkpoints), convert a transformer checkpoint to a
fusion_transformer arch (fusion-convert-checkpoint). Their command-line entry points live in
``fairseq_fusion_tools/cli``.
"""

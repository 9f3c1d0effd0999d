"""Analyses of the papers (probes, similarities, alignments, layer maps, spectra).

All analyses share ``common``: load a checkpoint with its task, iterate a binarized split
with progress, capture named internal states with forward hooks, and write PNG + JSON.
Their command-line entry points live in ``fairseq_fusion_tools/cli``.
"""

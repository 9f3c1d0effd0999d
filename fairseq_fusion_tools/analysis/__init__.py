"""Analyses of the papers (probes, similarities, alignments, layer maps, spectra) and the run of each analysis command.

All analyses share ``common``: their options, load a checkpoint with its task, iterate a binarized split with
progress, capture named internal states with forward hooks; they write PNG + JSON through
``fairseq_fusion_tools/outputs.py``. Their command-line entry points live in ``fairseq_fusion_tools/cli``.
"""

"""The scorers: BLEU as the papers report it (by length, significance), M2, ROUGE-1.5.5, AER, the metrics by name,
the training curve. None imports torch or fairseq (``tests/test_packaging.py`` runs them without either), and none
imports ``analysis``: what they share with the analyses is ``fairseq_fusion_tools/outputs.py``.
Their command-line entry points live in ``fairseq_fusion_tools/cli``.
"""

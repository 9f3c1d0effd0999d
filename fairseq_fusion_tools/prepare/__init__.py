"""Data preparation: raw parallel text to binarized data (fusion-prepare-text: tokenize, truecase, BPE,
fairseq-preprocess), GPT-2 BPE (fusion-prepare-gpt2), parse trees and their phrase spans (fusion-parse-trees,
fusion-parse-spans). Their command-line entry points live in ``fairseq_fusion_tools/cli``.
"""

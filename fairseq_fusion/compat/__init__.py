"""Fixes and start-up changes to fairseq, torch and Python, each applied from the one list in
``global_changes.py``."""

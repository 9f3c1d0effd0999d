"""Whether this Python has torch and fairseq, found without importing them (``importlib.util.find_spec``).

The plugin registers itself with fairseq only when both are there (fairseq's ``--user-dir`` always has them).
Without them, as after ``pip install .`` into an environment that lacks them, only the torch-free modules import:
``errors`` and ``encoders.text_pipeline``, which the tools' scorers use (README: Installation).
"""
import importlib.util

NEEDED = ("torch", "fairseq")


def missing():
    """The names of ``NEEDED`` that this Python cannot import."""
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]

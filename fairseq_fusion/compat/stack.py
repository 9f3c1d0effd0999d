"""Whether this Python has torch and fairseq, found without importing them (``importlib.util.find_spec``).

The plugin registers itself with fairseq only when both are there (fairseq's ``--user-dir`` always has them).
Without them, as after ``pip install .`` into an environment that lacks them, only the torch-free modules import:
``errors`` and ``encoders.text_pipeline``, which the tools' scorers use (README: Installation). The scorers' own
processes (``process_command.TORCH_FREE``) take that path where both are installed too: importing them would be most
of their run.
"""
import importlib.util

NEEDED = ("torch", "fairseq")


def missing():
    """The names of ``NEEDED`` that this Python cannot import."""
    return [name for name in NEEDED if importlib.util.find_spec(name) is None]


def loaded():
    """Whether the plugin loads torch and fairseq in this process: both are there, and it is not a torch-free
    command's process (``process_command.TORCH_FREE``)."""
    from .process_command import TORCH_FREE, command_name

    return not missing() and command_name() not in TORCH_FREE

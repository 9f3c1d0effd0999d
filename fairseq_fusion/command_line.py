"""The plugin's command-line runs, and the one call that gives a program of one's own what they set.

Importing the plugin registers its archs, tasks, criterions and options, and makes only what its models need to load
and run (``global_changes.py``, scopes ``import``, ``fix``, ``plugin``). What belongs to the whole process is made
in a command-line run alone: fairseq's commands that load the plugin with ``--user-dir`` (fairseq-train, -generate,
-interactive, -validate, -hydra-train, -preprocess, -eval-lm) and the ``fusion-*`` commands, as console scripts, with
``python -m``, or with their entry point called in-process under the command's ``sys.argv`` as fairseq's own tests do.
There a refusal or a Ctrl-C in a training is one line, a ``FusionWarning`` is one line, fairseq's notices a user
cannot act on are filtered, torch's CPU threads are fitted to the free cores, cuDNN attention is off, and the checks
of every input cover fairseq's own models too.

A program of one's own gets the same with one call::

    import fairseq_fusion.command_line
    changed = fairseq_fusion.command_line.configure()  # the names of what it changed, e.g. "sys.excepthook"
"""
from . import global_changes


def configure():
    """Make the command-line run's process-wide settings and checks, once; returns the names of what they change."""
    return global_changes.apply_in_command_line()


def configured():
    """Whether this process is a command-line run (or asked for its settings)."""
    return global_changes.in_command_line()

"""The tools' budgets (minutes, updates, epochs, steps, evaluations without improvement): each a positive, finite
number, refused in one line naming the flag otherwise. None has a "no limit" value: a time of 0, NaN or infinity
never stops (``fusion-compare --max-minutes`` hands it to fairseq-train as ``--stop-time-hours``, whose 0 is no limit;
the GPU checks' deadline never comes), a count of 0 trains nothing.
"""
import math

from .user_files import fail


def check_positive(flag, value, unit, command=None):
    """``value`` of ``flag`` (None: not given) a positive, finite number of ``unit``, or one line naming it."""
    if value is None:
        return
    if not (math.isfinite(value) and value > 0):
        fail(f"{command + ': ' if command else ''}{flag} {value}: expected a positive number of {unit} (the budget "
             "has no 'no limit' value)")

"""User-error checks: bad input refused in one line, a likely wrong output warned of; each applied from the one
list in ``global_changes.py``."""

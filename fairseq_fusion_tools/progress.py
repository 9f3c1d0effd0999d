"""The progress bars of the fusion-* commands: drawn on a terminal only.

A bar is redrawn with carriage returns and escape codes: in a redirected log (a file, a pipe, CI) that is noise. Every
command's bar is `progress(...)`: tqdm with ``disable=None``, tqdm's own switch that draws nothing when its stream
(stderr) is not a terminal. fairseq's own progress bars (fairseq-train's ``--log-format``) are fairseq's.
"""
from tqdm import tqdm


def progress(iterable=None, show=True, **kwargs):
    """``tqdm(iterable, **kwargs)``, drawn only when ``show`` and stderr is a terminal (redrawn at most every 2 s)."""
    kwargs.setdefault("mininterval", 2)
    return tqdm(iterable, disable=None if show else True, **kwargs)

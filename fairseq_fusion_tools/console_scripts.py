"""Where a console script (fairseq-train, fusion-prepare-text, ...) of this Python's environment is: the tools that
run others as subprocesses (the comparison, the GPU check) start them by this path."""
import os
import shutil
import sys


def console_script(name):
    """Path of a console script (fairseq-train, ...) of this Python's environment, or its bare name on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    if os.path.exists(beside):
        return beside
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found beside {sys.executable} nor on PATH: is fairseq installed (make install)?")
    return found

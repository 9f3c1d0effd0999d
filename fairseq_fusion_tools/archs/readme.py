"""fusion-archs --readme FILE: the architecture table written between the ARCH TABLE markers of FILE."""
import os
import shutil
import tempfile

from fairseq_fusion_tools.user_files import fail
from fairseq_fusion.models import catalog

def update_readme(path, block):
    """Replace what stands between the ARCH TABLE markers of ``path`` with ``block`` (a whole new file, or nothing)."""
    if not os.path.isfile(path):
        fail(f"--readme {path}: no such file")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    begin, end = catalog.README_BEGIN, catalog.README_END
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        fail(f"--readme {path}: expected one '{begin}' line followed by one '{end}' line")
    head, rest = text.split(begin)
    tail = rest.split(end)[1]
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder, delete=False, suffix=".tmp") as f:
        try:
            f.write(head + begin + "\n" + block + "\n" + end + tail)
        except BaseException:
            os.unlink(f.name)
            raise
    shutil.copymode(path, f.name)  # the temporary file is private (0600)
    os.replace(f.name, path)

"""scripts/install_fairseq.sh keeps what it finds: a fairseq >= 0.12 that imports is kept, one that fails to import is
reported with its error and left alone, an older one is refused; nothing is installed in those cases (the
environments here are throwaway venvs with a stand-in fairseq module)."""
import os
import subprocess
import sys

import pytest

from conftest import REPO

SCRIPT = os.path.join(REPO, "scripts", "install_fairseq.sh")


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    path = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = subprocess.run([str(path / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return path, site


@pytest.mark.parametrize("module, status, expected", [
    ('__version__ = "0.12.3"\n', 0, "fairseq already importable: 0.12.3"),
    ('__version__ = "0.12.2"\n', 0, "fairseq already importable: 0.12.2"),  # fairseq 0.12.2 imports on Python 3.10
    ('raise ImportError("libnat missing")\n', 1,
     "install_fairseq: a fairseq is installed but does not import; it is kept as it is. The error: ImportError: libnat missing"),
    ('__version__ = "0.10.2"\n', 1, "install_fairseq: fairseq 0.10.2 "),
])
def test_an_existing_fairseq_is_kept_or_reported_never_replaced(venv, module, status, expected):
    path, site = venv
    stand_in = os.path.join(site, "fairseq.py")
    with open(stand_in, "w") as f:
        f.write(module)
    proc = subprocess.run(["bash", SCRIPT], env=dict(os.environ, PY=str(path / "bin" / "python")),
                          capture_output=True, text=True)
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert expected in (proc.stdout + proc.stderr).splitlines()[0]
    assert open(stand_in).read() == module  # left as it was; no pip ran (the venv has none)

"""scripts/install_fairseq.sh keeps what it finds: a fairseq >= 0.12 that imports is kept, one that fails to import is
reported with its error and left alone, an older one is refused; nothing is installed in those cases (the
environments here are throwaway venvs with a stand-in fairseq module). make install reports no conflict for fairseq's
torchaudio, left out on purpose, and every other one (scripts/pip_check.sh)."""
import os
import shutil
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


def write_dist(site, name, version, requires=()):
    """An installed distribution's metadata (what pip check reads), without code."""
    info = os.path.join(site, f"{name.replace('-', '_')}-{version}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires))
    open(os.path.join(info, "RECORD"), "w").close()
    return info


def write_wheel(folder, name, version):
    """A pure-python wheel of ``name`` with nothing in it, installable offline (pip install --no-index)."""
    import zipfile

    path = os.path.join(folder, f"{name}-{version}-py3-none-any.whl")
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture(scope="module")
def venv_with_fairseq_metadata(tmp_path_factory):
    """A venv with pip (offline) and ve-fairseq's metadata: it requires torchaudio (absent, as after make install)
    and numpy (installed by the test, as make install's package step installs fairseq's dependencies)."""
    path = tmp_path_factory.mktemp("pipvenv")
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    py = str(path / "bin" / "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    write_dist(site, "ve-fairseq", "0.12.3", ["torchaudio>=0.8.0", "numpy"])
    return py, site, str(tmp_path_factory.mktemp("wheels"))


def pip_install(py, wheel, *flags):
    return subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index", *flags, wheel],
                          capture_output=True, text=True, check=True)


def test_make_install_prints_no_error_for_fairseqs_torchaudio(venv_with_fairseq_metadata):
    """The user's report: make install printed pip's "ERROR: pip's dependency resolver ... ve-fairseq requires
    torchaudio, which is not installed" (torchaudio is left out on purpose). Reproduced with pip itself: installing a
    dependency of fairseq prints it; make install's way (its package step's flags, then scripts/pip_check.sh) prints
    nothing."""
    py, site, wheels = venv_with_fairseq_metadata
    assert "ERROR: pip's dependency resolver" in pip_install(py, write_wheel(wheels, "numpy", "1.0")).stderr
    recipe = subprocess.run(["make", "-n", "-W", "Makefile", "install"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout
    step = next(line for line in recipe.splitlines() if "pip install" in line and '-e ".[' in line)
    assert "--no-warn-conflicts" in step and "bash scripts/pip_check.sh" in recipe.split(step, 1)[1]
    quiet = pip_install(py, write_wheel(wheels, "numpy", "1.1"), "--force-reinstall", "--no-warn-conflicts")
    check = subprocess.run(["bash", os.path.join(REPO, "scripts", "pip_check.sh")], env=dict(os.environ, PY=py),
                           capture_output=True, text=True)
    assert check.returncode == 0 and quiet.stderr + check.stdout + check.stderr == ""


def test_pip_check_still_reports_other_broken_requirements(venv_with_fairseq_metadata):
    """Only fairseq's torchaudio is set aside: any other missing requirement is printed (and torchaudio is not)."""
    py, site, _ = venv_with_fairseq_metadata
    info = write_dist(site, "some-plugin", "1.0", ["missing-thing"])
    try:
        check = subprocess.run(["bash", os.path.join(REPO, "scripts", "pip_check.sh")], env=dict(os.environ, PY=py),
                               capture_output=True, text=True)
    finally:
        shutil.rmtree(info)  # the venv as the other test expects it
    assert check.returncode == 0
    assert "some-plugin 1.0 requires missing-thing, which is not installed." in check.stderr
    assert "torchaudio" not in check.stderr.split("aside):", 1)[1]

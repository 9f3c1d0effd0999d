"""The one place that says where the shared real data lives.

Default: ``../shared/data`` beside the repository; the environment variable
``FUSION_DATA`` (set by ``make ... DATA=DIR``) overrides it. Tests, the demo and the
benchmarks all resolve their corpora through here.
"""
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the plugin's folder, what fairseq's --user-dir names (the tools' own folder is not a plugin)
PLUGIN_DIR = os.path.join(REPO_ROOT, "fairseq_fusion")


def data_root():
    return os.path.abspath(os.environ.get("FUSION_DATA") or os.path.join(REPO_ROOT, "..", "shared", "data"))


def data_path(*parts, must_exist=True):
    path = os.path.join(data_root(), *parts)
    if must_exist and not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} not found: expected the shared data folder (see ../shared/data/README.md) at "
            f"{data_root()}; set FUSION_DATA=DIR (or make ... DATA=DIR) to point elsewhere"
        )
    return path


def find_text(prefix, lang):
    """``PREFIX.LANG`` or ``PREFIX.LANG.gz``; a clear error naming both when neither exists."""
    for path in (f"{prefix}.{lang}", f"{prefix}.{lang}.gz"):
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"no text file {prefix}.{lang} or {prefix}.{lang}.gz (expected one sentence per line)")

"""The one place that says where the shared real data and the repository's recipes live.

Data, the first of: ``FUSION_DATA`` (set by ``make ... DATA=DIR``), ``../shared/data`` beside the repository where it
exists, the cache ``FUSION_DATA_CACHE`` (default ``~/.cache/fairseq-fusion/data``), which ``fusion-fetch-data``
(``make data``) fills from the public origins (``shared_data/``). The first two are read-only:
nothing writes there. Tests, the demo and the benchmarks all resolve their corpora through here. A package installed
without the repository (``pip install .``: no ``recipes/`` beside it) has no ``../shared/data``: it reads the cache
once fetched, and what needs ``recipes/`` says so in one line (``recipe_path``).
"""
import errno
import os

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the plugin's folder, what fairseq's --user-dir names (the tools' own folder is not a plugin)
PLUGIN_DIR = os.path.join(REPO_ROOT, "fairseq_fusion")
RECIPES_DIR = os.path.join(REPO_ROOT, "recipes")


def in_repository():
    """Whether the tools run from the repository (make install, pip install -e) rather than an installed copy."""
    return os.path.isfile(os.path.join(RECIPES_DIR, "common", "recipe.sh"))


def recipe_path(*parts, what="this command"):
    """A file under the repository's ``recipes/``; FileNotFoundError (one line) where it is not there."""
    path = os.path.join(RECIPES_DIR, *parts)
    if not os.path.exists(path):
        where = "an installed package (pip install .) has none" if not in_repository() else f"{path} is missing"
        raise FileNotFoundError(f"{what} needs the repository's recipes/{'/'.join(parts)}: {where}; run it from a "
                                "clone of the repository (make install)")
    return path


def shared_root():
    """``../shared/data`` beside the repository (None for an installed copy: not site-packages/../shared/data)."""
    return os.path.abspath(os.path.join(REPO_ROOT, "..", "shared", "data")) if in_repository() else None


def cache_root():
    """Where ``fusion-fetch-data`` puts the data by default: ``$FUSION_DATA_CACHE``, else
    ``~/.cache/fairseq-fusion/data``."""
    return os.path.abspath(os.path.expanduser(os.environ.get("FUSION_DATA_CACHE") or
                                              os.path.join("~", ".cache", "fairseq-fusion", "data")))


def given_root():
    """The folder ``FUSION_DATA`` names (``make ... DATA=DIR``), or None."""
    return os.path.abspath(os.environ["FUSION_DATA"]) if os.environ.get("FUSION_DATA") else None


def data_root():
    """The data folder: ``FUSION_DATA``, else ``../shared/data`` where it exists, else the cache (where
    ``fusion-fetch-data`` puts the files; an installed copy needs it fetched first)."""
    if given_root():
        return given_root()
    shared = shared_root()
    if shared and os.path.isdir(shared):
        return shared
    if shared is None and not os.path.isdir(cache_root()):
        raise FileNotFoundError("no data folder: set FUSION_DATA=DIR, the shared data's folder (an installed package, "
                                "pip install ., has no default), or fetch it into the cache: fusion-fetch-data")
    return cache_root()


def data_path(*parts, must_exist=True):
    path = os.path.join(data_root(), *parts)
    if must_exist and not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} not found: expected the shared data folder (see ../shared/data/README.md) at "
            f"{data_root()}; set FUSION_DATA=DIR (or make ... DATA=DIR) to point elsewhere, or fetch the files: "
            "make data (fusion-fetch-data)"
        )
    return path


def find_text(prefix, lang):
    """``PREFIX.LANG`` or ``PREFIX.LANG.gz``; a clear error naming both when neither exists."""
    for path in (f"{prefix}.{lang}", f"{prefix}.{lang}.gz"):
        if os.path.exists(path):
            return path
    hint = "; the prefix goes without the language and .gz" if prefix.endswith((".gz", "." + lang)) else ""
    # the filename makes it one line naming the flag of the prefix (fairseq_fusion_tools/user_files.py)
    raise FileNotFoundError(errno.ENOENT, f"no text file {prefix}.{lang} or {prefix}.{lang}.gz (expected one sentence "
                            f"per line{hint})", f"{prefix}.{lang}")

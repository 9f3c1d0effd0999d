"""fusion-user-dir: print the absolute folder of the installed fairseq_fusion package, the plugin that fairseq's
--user-dir (fairseq-hydra-train: common.user_dir) names, so fairseq's commands find it from any directory.

Examples: fairseq-train DATA --user-dir $(fusion-user-dir) ...; fairseq-hydra-train --config-dir REPO/recipes/hydra
--config-name ARCH task.data=DATA common.user_dir=$(fusion-user-dir). It is a module of its own, beside the package,
so that it answers at once: the package is located, not imported (importing it loads fairseq and torch).
"""
import argparse
import importlib.util
import os


def user_dir():
    """The absolute path of the fairseq_fusion package, found without running its ``__init__``."""
    spec = importlib.util.find_spec("fairseq_fusion")
    if spec is None or spec.origin is None:
        raise SystemExit("fairseq-fusion: error: the fairseq_fusion package is not installed in this Python "
                         "(make install, then source .venv/bin/activate)")
    return os.path.dirname(os.path.abspath(spec.origin))


def get_parser():
    return argparse.ArgumentParser(prog="fusion-user-dir", description=" ".join(__doc__.split("\n\n")[0].split()))


def cli_main(argv=None):
    get_parser().parse_args(argv)
    print(user_dir())


if __name__ == "__main__":
    cli_main()

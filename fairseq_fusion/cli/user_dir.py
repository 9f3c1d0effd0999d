"""fusion-user-dir: print the folder of the installed fairseq_fusion package, the plugin fairseq loads with
--user-dir, so that fairseq's commands find it from any directory:

    fairseq-train DATA ... --user-dir "$(fusion-user-dir)"
    fairseq-hydra-train --config-dir REPO/recipes/hydra --config-name ARCH task.data=DATA common.user_dir="$(fusion-user-dir)"
"""
import argparse
import os


def user_dir():
    """The absolute path of the fairseq_fusion package (this file's grandparent folder), without importing more."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli_main(argv=None):
    argparse.ArgumentParser(prog="fusion-user-dir", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    print(user_dir())


if __name__ == "__main__":
    cli_main()

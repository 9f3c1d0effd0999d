"""fusion-gpu-speed: the GPU profile and speed benchmark; see ``fairseq_fusion_tools/gpu/speed.py``."""
import sys

from ..gpu import speed

get_parser = speed.get_parser  # the parser alone (--help, tests)


def cli_main():
    sys.exit(speed.main(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

"""fusion-gpu-speed: the GPU profile and speed benchmark; see ``fairseq_fusion_tools.gpu_speed``."""
import sys

from .. import gpu_speed

get_parser = gpu_speed.get_parser  # the parser alone (--help, tests)


def cli_main():
    sys.exit(gpu_speed.main(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

"""fusion-gpu-check: the GPU acceptance run (every arch in fp32/fp16/bf16, DDP, the benchmark); see ``fairseq_fusion_tools/gpu/check.py``."""
import sys

from ..gpu import check

get_parser = check.get_parser  # the parser alone (--help, tests)


def cli_main():
    sys.exit(check.main(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

"""fusion-benchmark: speed and memory of archs against fairseq's transformer (see fairseq_fusion_tools.benchmark)."""
from .. import benchmark

get_parser = benchmark.get_parser  # the parser alone (--help, tests)


def cli_main():
    benchmark.cli_main()


if __name__ == "__main__":
    cli_main()

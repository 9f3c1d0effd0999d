"""fusion-benchmark: speed and memory of archs against fairseq's transformer (see fairseq_fusion.benchmark)."""
from .. import benchmark


def cli_main():
    benchmark.cli_main()

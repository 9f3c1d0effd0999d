"""fusion-compare: archs (and flag combinations) x seeds, one dataset, one budget, one table; see ``fairseq_fusion.compare``."""
from .. import compare


def cli_main():
    compare.main(compare.get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

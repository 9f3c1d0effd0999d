"""fusion-compare: archs (and flag combinations) x seeds, one dataset, one budget, one table; see
``fairseq_fusion_tools/compare/`` (``command``: the steps; the runs, the table, ``budget``: --budget-from-curve,
``parallel``: --jobs)."""
from ..compare import command

get_parser = command.get_parser  # the parser alone (--help, tests)


def cli_main():
    command.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

"""fusion-compare: archs (and flag combinations) x seeds, one dataset, one budget, one table; see ``fairseq_fusion_tools.compare``."""
import signal

from .. import compare

get_parser = compare.get_parser  # the parser alone (--help, tests)


def cli_main():
    signal.signal(signal.SIGTERM, compare.exit_on_sigterm)  # SIGKILL cannot be caught: its fairseq-train trains on
    compare.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

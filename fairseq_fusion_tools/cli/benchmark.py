"""fusion-benchmark: speed and memory of archs against fairseq's transformer (see fairseq_fusion_tools/benchmark/)."""
from ..benchmark import command

get_parser = command.get_parser  # the parser alone (--help, tests)


def cli_main():
    command.main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

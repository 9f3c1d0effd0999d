"""``python -m fairseq_fusion_tools.benchmark --worker ...``: the process of one measured run (``command.run_worker``
starts it), a command-line run of its own: its refusals are one line, as fusion-benchmark's."""
from fairseq_fusion import command_line

from .command import get_parser, main

command_line.configure()
main(get_parser().parse_args())

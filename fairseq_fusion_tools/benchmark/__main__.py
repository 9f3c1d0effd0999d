"""``python -m fairseq_fusion_tools.benchmark --worker ...``: the process of one measured run (``command.run_worker``
starts it)."""
from .command import get_parser, main

main(get_parser().parse_args())

"""One rank of a CPU distributed fairseq-train run (used by test_distributed_resume.py).

Runs fairseq-train's own entry point unchanged; the only addition is that every rank
(not only the master, who writes checkpoints) dumps its model's parameters after each
checkpoint save, so the test can compare the ranks, and prints the graphs torch.compile built. Usage: dist_worker.py DUMP_FILE ARGS...
"""
import sys

import torch
from fairseq import checkpoint_utils
from fairseq_cli import train

dump_file, *command = sys.argv[1:]
sys.argv = command
_save = checkpoint_utils.save_checkpoint


def save_and_dump(cfg, trainer, epoch_itr, val_loss):
    out = _save(cfg, trainer, epoch_itr, val_loss)
    torch.save({k: v.detach().clone() for k, v in trainer.get_model().state_dict().items()}, dump_file)
    return out


checkpoint_utils.save_checkpoint = save_and_dump
train.cli_main()
from torch._dynamo.utils import counters  # noqa: E402  (what --fusion-compile built, for the test to read)

print(f"| torch.compile graphs built: {counters['stats']['unique_graphs']}", flush=True)

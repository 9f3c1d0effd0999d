"""One rank of a two-rank CPU run (gloo) of fairseq's Trainer with --fusion-log-internals (test_internals_ranks.py).

Usage: internals_rank_worker.py RANK PORT DATA_DIR OUT_JSON CRITERION:MODE... Each case, in one process group: each
rank builds the same model (same seed), takes its own batch, computes that batch's figures on its own (a forward
alone, before training: the one-process path), then runs one update of fairseq's Trainer, whose DDP reduces the
logging outputs (MODE ``summed``: the criterion's own ``all_reduce_dict`` path; ``gathered``: its outputs declared not
summable, so ``all_gather_list``; ``layerdrop``: summed, with LayerDrop, whose training figures stay each rank's own).
Writes {"CRITERION:MODE": {"own": ..., "logged": ..., "per_update": ...}, ...} to OUT_JSON.
"""
import json
import sys

import torch
import torch.distributed as dist

import fairseq_fusion  # noqa: F401  (the plugin's changes, as --user-dir applies them)
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from fairseq.logging import metrics
from fairseq.trainer import Trainer
from fairseq_fusion.modules import internals
from test_contracts import build, training_sample

ARCH = "transformer_lexical_shortcuts"
# each rank's batch: other lengths, so the gates' means differ
BATCHES = [((7, 5, 9, 4), (5, 8, 3, 6)), ((3, 11, 6), (9, 2, 7))]


def one_case(rank, data_dir, criterion_name, mode):
    model, task, args = build(ARCH, data_dir, dropout="0", criterion=criterion_name, extra=[
        "--fusion-log-internals", "--attention-dropout", "0", "--optimizer", "adam", "--lr", "1e-3",
        "--max-tokens", "1000", "--distributed-world-size", "2", "--distributed-rank", str(rank),
        "--ddp-backend", "legacy_ddp", *(["--encoder-layerdrop", "0.5", "--decoder-layerdrop", "0.5"]
                                          if mode == "layerdrop" else [])])
    sample = training_sample(task, *BATCHES[rank])
    model.train(mode != "layerdrop")  # LayerDrop: every figure the model has (no layer skipped)
    with torch.no_grad():  # this rank's figures on its own: a forward and the one-process means
        model(**sample["net_input"])
    own = {k: float(v) for k, v in internals.means([internals.take(model)]).items()}

    cfg = convert_namespace_to_omegaconf(args)
    criterion = task.build_criterion(cfg.criterion)
    if mode == "gathered":
        criterion.logging_outputs_can_be_summed = lambda: False
    trainer = Trainer(cfg, task, model, criterion)
    with metrics.aggregate() as agg:  # a fresh aggregator: this case's meters, none of an earlier case's
        per_update = trainer.train_step([sample])
    logged = {k[len(internals.PREFIX):]: float(agg[k].avg) for k in agg.keys() if k.startswith(internals.PREFIX)}
    return {"own": own, "logged": logged, "per_update": sorted(per_update)}


def main(rank, port, data_dir, out, cases):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    results = {}
    for case in cases:
        results[case] = one_case(rank, data_dir, *case.split(":"))
        dist.barrier()
    with open(out, "w") as f:
        json.dump(results, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    rank, port, data_dir, out, *cases = sys.argv[1:]
    main(int(rank), int(port), data_dir, out, cases)

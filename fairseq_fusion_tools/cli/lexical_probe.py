"""fusion-lexical-probe: how much lexical content each encoder/decoder layer keeps (Emelin et
al. 2019, §4.1, Fig. 3-4; per sub-word frequency bin and part of speech, A.3).

Trains a classifier per layer (512 hidden units, ReLU, dropout 0.5; A.1) on the frozen
model's states of a sample of --train-split to recover the sub-word at each position, with
early stopping on --valid-split, and reports its accuracy on --split, per layer, per
frequency bin (10 equal-size bins of sub-word types) and, with tag files, per part of
speech (NOUN / VERB / ADJ-ADV / OTHER). States go to float16 files in a temporary folder
next to --out (removed at the end); probes are trained --probe-group-size at a time.

  fusion-lexical-probe --path ckpt/checkpoint_last.pt --data data-bin \\
      --train-split train --max-train-sentences 100000 --valid-split valid --split test \\
      --source-pos-tags test.tags.en --target-pos-tags test.tags.de --out results/lexical_probe
"""
import argparse
import ast
import os
import shutil
import tempfile

from ..analysis import lexical_probe as probe
from ..analysis.common import add_common_args, check_split, load_model
from ..outputs import locked, write_outputs
from ..analysis.lexical_pos import PositionCategories
from ..analysis.lexical_store import StateStore
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-lexical-probe", description=description_of(__doc__))
    add_common_args(p, split="test")
    p.add_argument("--train-split", default="train", help="Split the probes are trained on (default: %(default)s).")
    p.add_argument("--max-train-sentences", type=int, default=100000,
                   help="Random sample of this many training sentences (default: %(default)s).")
    p.add_argument("--max-train-positions", type=int, default=1000000,
                   help="At most this many training positions per side (disk: 2 bytes x dim x layers each).")
    p.add_argument("--valid-split", default="valid", help="Held-out split for early stopping (default: %(default)s).")
    p.add_argument("--max-valid-sentences", type=int, default=None, help="Use at most this many early-stopping sentences.")
    p.add_argument("--max-epochs", type=int, default=20, help="Most training epochs per probe (default: %(default)s).")
    p.add_argument("--patience", type=int, default=3,
                   help="Stop a probe after this many epochs without a better held-out accuracy (default: %(default)s).")
    p.add_argument("--lr", type=float, default=1e-3, help="Probe learning rate (Adam; halved on each epoch without improvement).")
    p.add_argument("--warmup-updates", type=int, default=200, help="Linear learning-rate warm-up (default: %(default)s).")
    p.add_argument("--batch-size", type=int, default=512, help="Positions per probe update (default: %(default)s).")
    p.add_argument("--probe-group-size", type=int, default=4,
                   help="Probes trained at once; memory grows with it (default: %(default)s).")
    p.add_argument("--hidden", type=int, default=512, help="Classifier hidden units (A.1: 512).")
    p.add_argument("--probe-dropout", type=float, default=0.5, help="Classifier dropout (A.1: 0.5).")
    p.add_argument("--bins", type=int, default=10, help="Frequency bins (A.3: 10).")
    p.add_argument("--source-pos-tags", default=None, help="POS tags of --split's source side: one line per sentence, one tag per word.")
    p.add_argument("--target-pos-tags", default=None, help="POS tags of --split's target side (as --source-pos-tags).")
    p.add_argument("--bpe-dir", default=None, help="Folder with SPLIT.bpe.LANG for the tags (default: DATA/tok).")
    p.add_argument("--seed", type=int, default=1, help="Seed of the training sample and of the probes (default: %(default)s).")
    return p


def pos_categories(args, task):
    """side -> PositionCategories of --split, from the tag files given."""
    data = args.data or task.cfg.data
    bpe_dir = args.bpe_dir or os.path.join(data, "tok")
    dataset = task.dataset(args.split)
    found = {}
    for side, tags, lang, sizes in (("encoder", args.source_pos_tags, task.cfg.source_lang, dataset.src_sizes),
                                    ("decoder", args.target_pos_tags, task.cfg.target_lang, dataset.tgt_sizes)):
        if tags is None:
            continue
        if not os.path.exists(tags):
            fail(f"fusion-lexical-probe: --{'source' if side == 'encoder' else 'target'}-pos-tags {tags}: no such file")
        bpe = os.path.join(bpe_dir, f"{args.split}.bpe.{lang}")
        if not os.path.exists(bpe):
            fail(f"fusion-lexical-probe: {bpe}: no BPE text of --split {args.split} for the POS tags "
                             "(fusion-prepare-text writes DATA/tok/SPLIT.bpe.LANG; else give --bpe-dir)")
        n = len(sizes) if args.sentences is None else min(args.sentences, len(sizes))
        try:
            found[side] = PositionCategories(tags, bpe, sizes[:n], side)
        except ValueError as e:
            fail(f"fusion-lexical-probe: {e}")
    return found


def main(args):
    splits = {"train": args.train_split, "valid": args.valid_split, "test": args.split}
    if len(set(splits.values())) < 3:
        fail(f"fusion-lexical-probe: --train-split, --valid-split and --split must differ, got {splits}")
    model, task, cfg = load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    for flag, split in (("--split", args.split), ("--train-split", args.train_split), ("--valid-split", args.valid_split)):
        check_split(task, split, flag)
    task.load_dataset(args.split)
    categories = pos_categories(args, task)
    device = next(model.parameters()).device
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix=os.path.basename(args.out) + ".states.", dir=out_dir)
    stores = {k: StateStore(os.path.join(work, k)) for k in splits}
    try:
        probe.write_states(model, task, args.train_split, stores["train"], args.max_tokens, args.max_train_sentences,
                           args.max_train_positions, sample_seed=args.seed, desc=f"states {args.train_split}")
        probe.write_states(model, task, args.valid_split, stores["valid"], args.max_tokens, args.max_valid_sentences,
                           args.max_train_positions, desc=f"states {args.valid_split}")
        probe.write_states(model, task, args.split, stores["test"], args.max_tokens, args.sentences,
                           categories=categories, desc=f"states {args.split}")
        del model
        dicts = {"encoder": task.source_dictionary, "decoder": task.target_dictionary}
        result = probe.probe(stores, dicts, group_size=args.probe_group_size, n_bins=args.bins, hidden=args.hidden,
                             dropout=args.probe_dropout, lr=args.lr, warmup=args.warmup_updates, max_epochs=args.max_epochs,
                             patience=args.patience, batch_size=args.batch_size, seed=args.seed, device=device)
    finally:
        for s in stores.values():
            s.remove()
        shutil.rmtree(work, ignore_errors=True)
    for side, r in result.items():
        print(f"| {side:7s} accuracy by layer (emb, 1..N): " + " ".join(f"{a:.3f}" for a in r["accuracy"]))
    data = {"checkpoint": args.path, "arch": cfg.model.arch, "splits": splits,
            "max_train_sentences": args.max_train_sentences, "hidden": args.hidden, "dropout": args.probe_dropout,
            "pos_tags": {"encoder": args.source_pos_tags, "decoder": args.target_pos_tags}, **result}
    title = f"of {args.path} ({cfg.model.arch}, {args.split})"
    write_outputs(args.out, data, probe.plot(result, title))
    return data


def cli_main():
    main(locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

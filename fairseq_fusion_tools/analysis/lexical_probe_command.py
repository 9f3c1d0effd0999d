"""fusion-lexical-probe's run: the states of each checkpoint stored on disk, the probes trained, the figure."""
import ast
import os
import shutil
import tempfile

from . import lexical_probe as probe
from .common import check_split, load_model, with_updates
from ..outputs import write_outputs
from .lexical_pos import PositionCategories
from .lexical_store import StateStore
from fairseq_fusion_tools.user_files import fail


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
    title = f"of {with_updates(args.path, args.path)} ({cfg.model.arch}, {args.split})"
    write_outputs(args.out, data, probe.plot(result, title))
    return data

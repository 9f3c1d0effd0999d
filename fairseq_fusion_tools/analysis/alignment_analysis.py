"""fusion-alignment-analysis's run: each checkpoint's attention aligned and scored (AER, cumulative coverage), the
figure.
"""
import ast
import itertools
import os

from . import alignment
from . import alignment_stream as stream
from .common import load_model, with_updates
from ..outputs import write_outputs
from ..scoring import alignment_links
from fairseq_fusion_tools.user_files import fail


def analyze_checkpoint(path, args):
    model, task, cfg = load_model(path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    file_langs = tuple(args.file_langs.split("-")) if args.file_langs else alignment.file_languages(args.parallel)
    swap = alignment.model_direction(task, file_langs, args.swap)
    codes = args.bpe_codes or os.path.join(cfg.task.data, "bpe.codes")
    if args.bpe_codes and not os.path.exists(codes):
        fail(f"fusion-alignment-analysis: --bpe-codes {codes}: no such file")
    bpe = alignment.load_bpe(codes if os.path.exists(codes) else None)
    if bpe is None:
        print(f"| no BPE codes at {codes}: words are looked up whole (pass --bpe-codes)")
    lower = stream.lowercase_sides(task, args.lowercase)
    pairs = itertools.islice(stream.iter_parallel(args.parallel), args.sentences)
    gold = itertools.islice(alignment_links.iter_links(args.gold, one_indexed=True), args.sentences) if args.gold else None
    layers, n, unk = stream.analyze_stream(model, task, pairs, gold, bpe, swap, lower, args.batch_size)
    for r in layers:
        aer = f"AER {100 * r['aer']:.2f} P {100 * r['precision']:.2f} R {100 * r['recall']:.2f} " if "aer" in r else ""
        print(f"| layer {r['layer']}: {aer}C<=i {100 * r['cumulative_coverage']:.2f}")
    return {
        "checkpoint": path, "arch": cfg.model.arch, "sentences": n, "swap": swap,
        "lowercase": {"model_source": lower[0], "model_target": lower[1]},
        "bpe_codes": codes if bpe is not None else None, "unknown_subwords": unk, "layers": layers,
    }


def main(args):
    labels = args.labels.split(",") if args.labels else [with_updates(os.path.basename(p), p) for p in args.path]
    if len(labels) != len(args.path):
        fail(f"fusion-alignment-analysis: --labels has {len(labels)} names but --path has {len(args.path)} checkpoints")
    for f, flag in [(args.parallel, "--parallel"), (args.gold, "--gold")] + [(p, "--path") for p in args.path]:
        if f is not None and not os.path.exists(f):
            fail(f"fusion-alignment-analysis: {flag} {f}: no such file")
    if os.path.isfile(args.parallel) and os.path.getsize(args.parallel) == 0:
        fail(f"fusion-alignment-analysis: --parallel {args.parallel}: empty file; expected 'source ||| target' lines")
    entries = []
    for path, label in zip(args.path, labels):
        try:
            entries.append({"label": label, **analyze_checkpoint(path, args)})
        except ValueError as e:
            fail(f"fusion-alignment-analysis: {e}")
    data = {"parallel": args.parallel, "gold": args.gold, "checkpoints": entries}
    title = (f"Encoder attention of {', '.join(args.path)} on {os.path.basename(args.parallel)} "
             f"({entries[0]['sentences']} sentences)")
    write_outputs(args.out, data, stream.plot(entries, title))
    return data

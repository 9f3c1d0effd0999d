"""Benchmark harness: each arch against fairseq's stock ``transformer`` in the same run.

For every arch (and ``transformer``), in a fresh subprocess so that peak memory is its own:
build the model at the same size on the same binarized data, train with fairseq's
``Trainer`` (the code path of fairseq-train; ``--fp16`` on CUDA) for warm-up updates and
then measured updates (target words/s), then decode the test split with fairseq's
``SequenceGenerator`` (beam 5, sentences/s). Prints a markdown table with ratios to
``transformer`` and writes JSON. No timing is asserted anywhere.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

SIZES = {
    # d, ffn, heads, enc layers, dec layers
    "small": ["--encoder-embed-dim", "128", "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512",
              "--decoder-ffn-embed-dim", "512", "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
              "--encoder-layers", "3", "--decoder-layers", "3"],
    "base": ["--encoder-embed-dim", "512", "--decoder-embed-dim", "512", "--encoder-ffn-embed-dim", "2048",
             "--decoder-ffn-embed-dim", "2048", "--encoder-attention-heads", "8", "--decoder-attention-heads", "8",
             "--encoder-layers", "6", "--decoder-layers", "6"],
}


def measure(args):
    """Runs in the worker process: returns the metrics of one arch."""
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.sequence_generator import SequenceGenerator
    from fairseq.trainer import Trainer
    from fairseq import utils

    import fairseq_fusion  # noqa: F401
    from fairseq_fusion import fusion_options

    cuda = torch.cuda.is_available() and not args.cpu
    criterion = fusion_options.default_criterion(args.arch)  # label_smoothed_cross_entropy for transformer
    argv = [args.data, "--task", "translation", "--arch", args.arch, *SIZES[args.size], "--share-all-embeddings",
            "--optimizer", "adam", "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100",
            "--criterion", criterion, "--label-smoothing", "0.1", "--max-tokens", str(args.max_tokens),
            "--seed", "1", "--num-workers", "0", "--dropout", "0.1"]
    argv += ["--fp16"] if cuda and args.fp16 else (["--cpu"] if not cuda else [])
    parser = options.get_training_parser()
    targs = options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(targs)
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    n_params = sum(p.numel() for p in model.parameters())
    crit = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, crit)
    itr = trainer.get_train_iterator(epoch=1, load_dataset=False).next_epoch_itr(shuffle=True)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    words, t0 = 0, None
    for i, sample in enumerate(itr):
        if i == args.warmup_updates:
            if cuda:
                torch.cuda.synchronize()
            t0, words = time.perf_counter(), 0
        trainer.train_step([sample])
        words += sample["ntokens"]
        if i + 1 >= args.warmup_updates + args.updates:
            break
    if cuda:
        torch.cuda.synchronize()
    train_wps = words / (time.perf_counter() - t0)

    task.load_dataset(args.gen_subset)
    dataset = task.dataset(args.gen_subset)
    gen_model = trainer.get_model().eval()
    generator = SequenceGenerator([gen_model], task.target_dictionary, beam_size=5, max_len_a=1.2, max_len_b=10)
    order = dataset.ordered_indices()
    order = order[order < args.decode_sentences]
    batches = dataset.batch_by_size(order, max_sentences=args.decode_batch_size)
    n_sent, t0 = 0, time.perf_counter()
    with torch.no_grad():
        for batch in batches:
            sample = dataset.collater([dataset[j] for j in batch])
            if cuda:
                sample = utils.move_to_cuda(sample)
            generator.generate([gen_model], sample)
            n_sent += len(batch)
    if cuda:
        torch.cuda.synchronize()
    decode_sps = n_sent / (time.perf_counter() - t0)
    if cuda:
        peak_mb = torch.cuda.max_memory_allocated() / 2**20
    else:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {
        "arch": args.arch, "params": n_params, "train_words_per_s": train_wps, "decode_sentences_per_s": decode_sps,
        "peak_memory_mb": peak_mb, "device": "cuda" + (" fp16" if args.fp16 else "") if cuda else "cpu",
        "size": args.size, "updates_measured": args.updates, "sentences_decoded": n_sent,
    }


def markdown_table(results, baseline="transformer"):
    base = next((r for r in results if r["arch"] == baseline), None)
    lines = [
        "| arch | params | train words/s | ratio | decode sent/s | ratio | peak mem (MB) | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        def ratio(key):
            return f"{r[key] / base[key]:.2f}" if base else "-"
        lines.append(
            f"| {r['arch']} | {r['params'] / 1e6:.2f}M | {r['train_words_per_s']:.0f} | {ratio('train_words_per_s')} | "
            f"{r['decode_sentences_per_s']:.1f} | {ratio('decode_sentences_per_s')} | {r['peak_memory_mb']:.0f} | {ratio('peak_memory_mb')} |"
        )
    return "\n".join(lines)


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-benchmark", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="binarized translation data (train and test splits)")
    p.add_argument("--archs", default="fusion_transformer", help="comma-separated archs; transformer is always added")
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--max-tokens", type=int, default=4000)
    p.add_argument("--warmup-updates", type=int, default=5, help="updates before timing starts")
    p.add_argument("--updates", type=int, default=20, help="timed training updates")
    p.add_argument("--gen-subset", default="test")
    p.add_argument("--decode-sentences", type=int, default=200)
    p.add_argument("--decode-batch-size", type=int, default=64)
    p.add_argument("--fp16", action="store_true", help="on CUDA: train and decode with --fp16")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--out", default="benchmark.json", help="JSON output file")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--arch", help=argparse.SUPPRESS)
    return p


def main(args):
    if args.worker:
        print("RESULT " + json.dumps(measure(args)), flush=True)
        return
    if not os.path.isdir(args.data):
        raise SystemExit(f"fusion-benchmark: --data {args.data} is not a directory (expected binarized data from fusion-prepare-text)")
    archs = ["transformer"] + [a for a in args.archs.split(",") if a and a != "transformer"]
    results = []
    for i, arch in enumerate(archs):
        print(f"| [{i + 1}/{len(archs)}] {arch} ...", flush=True)
        cmd = [sys.executable, "-m", "fairseq_fusion.benchmark", "--worker", "--arch", arch] + [
            a for a in sys.argv[1:] if a != "--worker"
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if proc.returncode != 0 or not line:
            raise SystemExit(f"fusion-benchmark: {arch} failed:\n{proc.stderr[-3000:]}")
        results.append(json.loads(line[-1][len("RESULT "):]))
        r = results[-1]
        print(f"|   {r['train_words_per_s']:.0f} words/s, {r['decode_sentences_per_s']:.1f} sent/s, {r['peak_memory_mb']:.0f} MB", flush=True)
    table = markdown_table(results)
    print(table)
    with open(args.out, "w") as f:
        json.dump({"results": results, "table": table, "settings": {k: v for k, v in vars(args).items() if k not in ("worker", "arch")}}, f, indent=2)
    print(f"| wrote {args.out}")


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

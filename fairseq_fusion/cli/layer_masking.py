"""fusion-layer-masking: mask each encoder layer of a layer-attention model in turn at inference
and report the relative change of BLEU and of the output length (Liu et al. 2021, §3.3, Fig. 2).

Each masked model is loaded with the model override ``layer_attention_mask`` = n, as
``fairseq-generate --model-overrides "{'layer_attention_mask': n}"`` would. BLEU is tokenized
BLEU on the BPE-removed text (the paper's metric).

  fusion-layer-masking --path ckpt/checkpoint_best.pt --data /tmp/m30k --split test --out results/masking
"""
import argparse
import ast

from ..analysis.common import add_common_args, new_figure, write_outputs
from ..analysis.layer_fusion import masking_sweep


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-layer-masking", description=__doc__.split("\n")[0])
    add_common_args(p, split="test")
    p.add_argument("--layers", default=None, help="comma-separated encoder layers to mask (default: all attended, 0 = embeddings)")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--lenpen", type=float, default=1.0)
    p.add_argument("--max-len-a", type=float, default=1.2)
    p.add_argument("--max-len-b", type=int, default=10)
    return p


def main(args):
    layers = [int(x) for x in args.layers.split(",")] if args.layers else None
    base, results = masking_sweep(
        args.path, args.data, args.split, layers, cpu=args.cpu, overrides=ast.literal_eval(args.model_overrides),
        beam=args.beam, lenpen=args.lenpen, max_len_a=args.max_len_a, max_len_b=args.max_len_b,
        max_tokens=args.max_tokens, max_sentences=args.max_sentences,
    )
    labels = ["emb" if r["masked_layer"] == 0 else str(r["masked_layer"]) for r in results]
    fig, axes = new_figure(1, 2, figsize=(9, 3.2))
    for ax, key, title in ((axes[0], "bleu_change", "(a) BLEU"), (axes[1], "length_change", "(b) output length")):
        values = [r[key] for r in results]
        ax.bar(labels, values, color=["tab:red" if v < 0 else "tab:blue" for v in values])
        ax.axhline(0, color="k", linewidth=0.8)
        ax.set_xlabel("masked encoder layer")
        ax.set_ylabel("relative change (%)")
        ax.set_title(title)
    write_outputs(args.out, {"path": args.path, "split": args.split, "baseline": base, "masked": results}, fig)
    print(f"| unmasked: BLEU {base['bleu']:.2f}, length {base['length']:.2f} ({base['sentences']} sentences)")
    for r in results:
        print(f"| mask {r['masked_layer']}: BLEU {r['bleu']:.2f} ({r['bleu_change']:+.1f}%), "
              f"length {r['length']:.2f} ({r['length_change']:+.1f}%)")


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

"""fusion-layer-masking: mask each encoder layer of a layer-attention model in turn at inference
and report the relative change of the task's metric and of the output length (Liu et al. 2021,
§3.3, Fig. 1-2).

Each masked model is loaded with the model override ``layer_attention_mask`` = n, as
``fairseq-generate --model-overrides "{'layer_attention_mask': n}"`` would, and decoded with
fairseq's generator: every ``fairseq-generate`` generation option (``--beam``, ``--lenpen``,
``--min-len``, ``--no-repeat-ngram-size``, ``--max-len-a/b``, ...) is accepted, and
``--post-process`` / ``--bpe gpt2`` turn the output back into text. ``--metric``: bleu
(tokenized BLEU on the post-processed text, the paper's metric for translation), sacrebleu, chrf,
or a metric a task registered (``fairseq_fusion_tools/scoring/metrics.py``).

  # translation (the paper: beam 4)
  fusion-layer-masking --path ckpt/checkpoint_best.pt --data data-bin/multi30k --split test --out results/masking
  # summarization settings (Liu et al. A.2): beam 4, length penalty 2.0, 55-140 tokens, no repeated 3-grams
  fusion-layer-masking --path sum/checkpoint_best.pt --data data-bin/cnndm --beam 4 --lenpen 2.0 --min-len 55 \\
      --max-len-a 0 --max-len-b 140 --no-repeat-ngram-size 3 --bpe gpt2 --gpt2-encoder-json encoder.json \\
      --gpt2-vocab-bpe vocab.bpe --metric rouge --out results/masking_cnndm
"""
import argparse
import ast
import dataclasses

from fairseq.dataclass.configs import GenerationConfig

from ..analysis.common import add_common_args, technique_of

from ..outputs import figure_title, locked, new_figure, write_outputs
from ..analysis.layer_fusion import TRANSLATION_GENERATION, generation_args, masking_sweep
from ..scoring.metrics import get_metric, known_metrics
from ._tools import add_generation_args, description_of
from fairseq_fusion_tools.user_files import fail

POST_PROCESS = ["subword_nmt", "sentencepiece", "wordpiece", "letter", "_EOW", "none"]


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-layer-masking", description=description_of(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    add_common_args(p, split="test")
    p.add_argument("--layers", default=None, help="Comma-separated encoder layers to mask (default: all attended, 0 = embeddings).")
    p.add_argument("--metric", default="bleu", help=f"Corpus metric, one of {known_metrics()} (default: %(default)s).")
    p.add_argument("--post-process", default=None, choices=POST_PROCESS,
                   help="How fairseq post-processes the output tokens (default: subword_nmt; none with --bpe gpt2).")
    p.add_argument("--bpe", default=None, choices=["gpt2"], help="Decode fairseq's GPT-2 BPE after --post-process none.")
    p.add_argument("--gpt2-encoder-json", default=None, help="With --bpe gpt2: the encoder.json file.")
    p.add_argument("--gpt2-vocab-bpe", default=None, help="With --bpe gpt2: the vocab.bpe file.")
    add_generation_args(p)
    p.set_defaults(**TRANSLATION_GENERATION)
    return p


def gpt2_bpe(args):
    if args.bpe is None:
        return None
    missing = [f for f in ("gpt2_encoder_json", "gpt2_vocab_bpe") if not getattr(args, f)]
    if missing:
        fail(f"fusion-layer-masking: --bpe gpt2 needs {', '.join('--' + m.replace('_', '-') for m in missing)} "
                         "(fairseq's GPT-2 BPE files)")
    if args.post_process not in (None, "none"):
        fail("fusion-layer-masking: --bpe gpt2 decodes the token ids itself: use --post-process none")
    args.post_process = "none"
    from fairseq.data import encoders

    return encoders.build_bpe(argparse.Namespace(bpe="gpt2", gpt2_encoder_json=args.gpt2_encoder_json,
                                                  gpt2_vocab_bpe=args.gpt2_vocab_bpe))


def plot(results, baseline, metric, title):
    """Relative change of the metric (a) and of the output length (b) by masked encoder layer, from the unmasked
    model's ``baseline`` (its score and length: the 0 line, its value in each panel's title)."""
    labels = ["emb" if r["masked_layer"] == 0 else str(r["masked_layer"]) for r in results]
    fig, axes = new_figure(1, 2, figsize=(9, 3.6))
    panels = ((axes[0], "score_change", f"(a) {metric}", f"{baseline['score']:.2f}"),
              (axes[1], "length_change", "(b) output length", f"{baseline['length']:.2f} words"))
    for ax, key, name, base in panels:
        values = [r[key] for r in results]
        ax.bar(labels, values, color=["tab:red" if v < 0 else "tab:blue" for v in values])
        ax.axhline(0, color="k", linewidth=0.8)  # the unmasked model
        ax.set_xlabel("masked encoder layer")
        ax.set_ylabel("relative change from unmasked (%)")
        ax.set_title(f"{name}, unmasked {base}")
    return figure_title(fig, title, fontsize=10)


def main(args):
    try:
        get_metric(args.metric)
    except (ValueError, FileNotFoundError) as e:
        fail(f"fusion-layer-masking: {e}")
    layers = [int(x) for x in args.layers.split(",")] if args.layers else None
    bpe = gpt2_bpe(args)
    args.post_process = args.post_process or "subword_nmt"
    gen_args = generation_args(**{f.name: getattr(args, f.name) for f in dataclasses.fields(GenerationConfig)
                                  if hasattr(args, f.name)})
    with technique_of(args.path, "fusion-layer-masking"):
        base, results = masking_sweep(
        args.path, args.data, args.split, layers, cpu=args.cpu, overrides=ast.literal_eval(args.model_overrides),
            metric=args.metric, gen_args=gen_args, post_process=args.post_process, bpe=bpe,
            max_tokens=args.max_tokens, max_sentences=args.sentences,
        )
    fig = plot(results, base, args.metric, f"Masking encoder layers of {args.path} ({args.split})")
    generation = {k: v for k, v in vars(gen_args).items() if v != getattr(GenerationConfig(), k)}
    write_outputs(args.out, {"path": args.path, "split": args.split, "metric": args.metric,
                             "generation": generation, "post_process": args.post_process, "bpe": args.bpe,
                             "baseline": base, "masked": results}, fig)
    print(f"| unmasked: {args.metric} {base['score']:.2f}, length {base['length']:.2f} ({base['sentences']} sentences)")
    for r in results:
        print(f"| mask {r['masked_layer']}: {args.metric} {r['score']:.2f} ({r['score_change']:+.1f}%), "
              f"length {r['length']:.2f} ({r['length_change']:+.1f}%)")


def cli_main():
    main(locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

"""fusion-layer-masking's run: the masking sweep decoded and scored, the figure."""
import argparse
import ast
import dataclasses

from fairseq.dataclass.configs import GenerationConfig

from .common import technique_of, with_updates
from ..outputs import figure_title, mark_narrow_range, new_figure, share_range, write_outputs
from .layer_fusion import generation_args, masking_sweep
from ..scoring.metrics import get_metric
from fairseq_fusion_tools.user_files import fail


POST_PROCESS = ["subword_nmt", "sentencepiece", "wordpiece", "letter", "_EOW", "none"]


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
    share_range(axes)  # both panels are relative changes in %: one scale
    for ax in axes:
        mark_narrow_range(ax)
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
    fig = plot(results, base, args.metric, f"Masking encoder layers of {with_updates(args.path, args.path)} ({args.split})")
    generation = {k: v for k, v in vars(gen_args).items() if v != getattr(GenerationConfig(), k)}
    write_outputs(args.out, {"path": args.path, "split": args.split, "metric": args.metric,
                             "generation": generation, "post_process": args.post_process, "bpe": args.bpe,
                             "baseline": base, "masked": results}, fig)
    print(f"| unmasked: {args.metric} {base['score']:.2f}, length {base['length']:.2f} ({base['sentences']} sentences)")
    for r in results:
        print(f"| mask {r['masked_layer']}: {args.metric} {r['score']:.2f} ({r['score_change']:+.1f}%), "
              f"length {r['length']:.2f} ({r['length_change']:+.1f}%)")

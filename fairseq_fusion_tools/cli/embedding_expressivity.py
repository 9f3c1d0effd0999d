"""fusion-embedding-expressivity: normalized log singular values of embedding matrices (Liu et al.
2021, Fig. 3-4): the whole matrix, a random half of its dimensions and, for fine-grained layer
attention models, the more- and less-attended halves ordered by the top decoder layer's weights
on the embedding layer. Several checkpoints can be compared (Fig. 4: vanilla vs SurfaceFusion).

  fusion-embedding-expressivity --path fgla/checkpoint_best.pt --compare vanilla/checkpoint_best.pt \\
      --labels FGLA,Vanilla --out results/expressivity
"""
import argparse
import ast

from ..analysis.common import add_checkpoint_args, load_model

from ..outputs import figure_title, locked, new_figure, write_outputs
from ..analysis.layer_fusion import expressivity_curves
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-embedding-expressivity", description=description_of(__doc__))
    add_checkpoint_args(p, weights_only=True)
    p.add_argument("--compare", nargs="*", default=[], help="More checkpoints to plot alongside.")
    p.add_argument("--labels", default=None, help="Comma-separated names of --path and --compare (default: file paths).")
    p.add_argument("--embedding", default="encoder", choices=["encoder", "decoder", "output"],
                   help="Which matrix (default: the source embeddings; tied models share one).")
    p.add_argument("--seed", type=int, default=1, help="Seed of the random half of dimensions.")
    return p


def plot(models, embedding):
    """The curves of each checkpoint (``models``: [{path, label, curves: {name: values}}]) in one panel."""
    fig, ax = new_figure(figsize=(6, 4))
    for entry in models:
        for name, values in entry["curves"].items():
            ax.plot(values, label=f"{entry['label']}: {name}" if len(models) > 1 else name)
    ax.set_xlabel("index of singular value")
    ax.set_ylabel("ln(sigma_i / sigma_1)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return figure_title(fig, f"Singular values of the {embedding} embeddings of {', '.join(m['path'] for m in models)}",
                        fontsize=10)


def main(args):
    paths = [args.path] + list(args.compare)
    labels = args.labels.split(",") if args.labels else paths
    if len(labels) != len(paths):
        fail(f"fusion-embedding-expressivity: --labels has {len(labels)} names for {len(paths)} checkpoints")
    models = []
    for path, label in zip(paths, labels):
        model, _, _ = load_model(path, args.data, ast.literal_eval(args.model_overrides), cpu=True)
        models.append({"path": path, "label": label, "curves": expressivity_curves(model, args.embedding, args.seed)})
    write_outputs(args.out, {"embedding": args.embedding, "models": models}, plot(models, args.embedding))
    for entry in models:
        for name, values in entry["curves"].items():
            print(f"| {entry['label']} {name}: mean ln(sigma/sigma_1) = {sum(values) / len(values):.3f} over {len(values)} values")


def cli_main():
    main(locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

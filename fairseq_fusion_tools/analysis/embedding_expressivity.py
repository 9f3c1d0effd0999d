"""fusion-embedding-expressivity's run: the embeddings' singular value curves of each checkpoint, the figure."""
import ast

from .common import checkpoint_labels, load_model
from ..outputs import figure_title, mark_narrow_range, new_figure, write_outputs
from .layer_fusion import expressivity_curves


def plot(models, embedding):
    """The curves of each checkpoint (``models``: [{path, label, curves: {name: values}}]) in one panel."""
    fig, ax = new_figure(figsize=(6, 4))
    for entry in models:
        for name, values in entry["curves"].items():
            ax.plot(values, label=f"{entry['label']}: {name}")
    ax.set_xlabel("index of singular value")
    ax.set_ylabel("ln(sigma_i / sigma_1)")
    mark_narrow_range(ax)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return figure_title(fig, f"Singular values of the {embedding} embeddings of {', '.join(m['path'] for m in models)}",
                        fontsize=10)


def main(args):
    paths = [args.path] + list(args.compare)
    labels = checkpoint_labels(paths, args.labels, "fusion-embedding-expressivity")
    models = []
    for path, label in zip(paths, labels):
        model, _, _ = load_model(path, args.data, ast.literal_eval(args.model_overrides), cpu=True)
        models.append({"path": path, "label": label, "curves": expressivity_curves(model, args.embedding, args.seed)})
    write_outputs(args.out, {"embedding": args.embedding, "models": models}, plot(models, args.embedding))
    for entry in models:
        for name, values in entry["curves"].items():
            print(f"| {entry['label']} {name}: mean ln(sigma/sigma_1) = {sum(values) / len(values):.3f} over {len(values)} values")

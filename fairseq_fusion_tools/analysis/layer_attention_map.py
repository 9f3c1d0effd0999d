"""fusion-layer-attention-map's run: the layer attention matrix of a checkpoint, the heatmap."""
import ast

from .common import load_model, technique_of, with_updates
from ..outputs import figure_title, new_figure, write_outputs
from .layer_fusion import layer_attention_matrix


def plot(matrix, path):
    """Heatmap of ``matrix`` (decoder layers x encoder layers 0..N) with its values, titled with the checkpoint and
    its update count; the colours on the weights' whole range [0, 1] (a map of weights within 0.01 of each other is
    not drawn from black to yellow), so maps of two checkpoints compare."""
    m, n1 = matrix.shape
    fig, ax = new_figure(figsize=(2.4 + 0.9 * m, 1.6 + 0.7 * n1))
    im = ax.imshow(matrix.T.numpy(), origin="lower", cmap="viridis", aspect="auto", vmin=0, vmax=1)
    for i in range(m):
        for j in range(n1):
            ax.text(i, j, f"{matrix[i, j]:.2f}", ha="center", va="center", color="w", fontsize=8)
    ax.set_xticks(range(m), [str(i + 1) for i in range(m)])
    ax.set_yticks(range(n1), ["emb"] + [str(j) for j in range(1, n1)])
    ax.set_xlabel("decoder layer")
    ax.set_ylabel("encoder layer")
    fig.colorbar(im, ax=ax)
    return figure_title(fig, f"Layer attention of {with_updates(path, path)}", fontsize=9)


def main(args):
    model, _, _ = load_model(args.path, args.data, ast.literal_eval(args.model_overrides), cpu=True)
    with technique_of(args.path, "fusion-layer-attention-map"):
        matrix = layer_attention_matrix(model)  # decoder layers x encoder layers
    fig = plot(matrix, args.path)
    data = {"path": args.path, "weights": matrix.tolist(),
            "rows": "decoder layers 1..M", "columns": "encoder layers 0 (word embeddings)..N"}
    write_outputs(args.out, data, fig)
    for i, row in enumerate(matrix.tolist()):
        print(f"| decoder layer {i + 1}: " + " ".join(f"{w:.3f}" for w in row))

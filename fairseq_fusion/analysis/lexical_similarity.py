"""Cosine similarity between the embeddings and each layer's states (Emelin et al. 2019,
§4.1 and A.3, Fig. 6-7).

For every non-padding position, cos(E_t, H^l_t) between the embedding at position t and the
state of layer l at t (output after the FFN), averaged over positions, per layer, for the
encoder and the decoder. Two readings of "the embeddings" are reported: the embedding layer
output (scaled embeddings + positions, what layer 1 reads; the default of the paper's code)
and the scaled token embeddings alone (no positions).
"""
from typing import Dict

import torch.nn.functional as F

REFERENCES = ("embedding_layer", "token_embeddings")


def similarity(states) -> Dict:
    result = {}
    for side, s in states.items():
        refs = {"embedding_layer": s["layers"][0], "token_embeddings": s["embed"]}
        result[side] = {
            ref: [F.cosine_similarity(e, h, dim=-1).mean().item() for h in s["layers"][1:]]
            for ref, e in refs.items()
        }
        result[side]["positions"] = int(s["tokens"].numel())
    return result


def plot(result, title=""):
    from .common import new_figure

    fig, ax = new_figure(figsize=(6, 4))
    for side, style in zip(result, ("-", "--")):
        for ref, marker in zip(REFERENCES, ("o", "s")):
            sims = result[side][ref]
            ax.plot(range(1, len(sims) + 1), sims, style, marker=marker, label=f"{side} vs {ref.replace('_', ' ')}")
    ax.set_xticks(range(1, len(sims) + 1))
    ax.set_xlabel("layer")
    ax.set_ylabel("mean cosine similarity")
    ax.set_title(f"embeddings vs layer states {title}".strip())
    ax.legend(fontsize=7)
    return fig


"""Cosine similarity between the embeddings and each layer's states (Emelin et al. 2019,
§4.1 and A.3, Fig. 6-7).

For every non-padding position, cos(E_t, H^l_t) between the embedding at position t and the
state of layer l at t (output after the FFN), averaged over positions, per layer, for the
encoder and the decoder. Two readings of "the embeddings" are reported: the embedding layer
output (scaled embeddings + positions, what layer 1 reads; the default of the paper's code)
and the scaled token embeddings alone (no positions). Streams: per batch, only the sums of
the cosines and the position counts are kept.
"""
from typing import Dict

import torch.nn.functional as F

from .lexical_states import iter_states

REFERENCES = ("embedding_layer", "token_embeddings")


class SimilarityAccumulator:
    def __init__(self):
        self.sums, self.positions = {}, {}

    def add(self, states):
        """``states``: side -> {"tokens", "embed", "layers"} of one batch."""
        for side, s in states.items():
            refs = {"embedding_layer": s["layers"][0], "token_embeddings": s["embed"]}
            sums = self.sums.setdefault(side, {ref: [0.0] * (len(s["layers"]) - 1) for ref in REFERENCES})
            for ref, e in refs.items():
                for i, h in enumerate(s["layers"][1:]):
                    sums[ref][i] += F.cosine_similarity(e, h, dim=-1).sum().item()
            self.positions[side] = self.positions.get(side, 0) + int(s["tokens"].numel())

    def result(self) -> Dict:
        return {side: {**{ref: [x / self.positions[side] for x in sums[ref]] for ref in REFERENCES},
                       "positions": self.positions[side]} for side, sums in self.sums.items()}


def similarity(states) -> Dict:
    """Mean cosines over all positions of ``states`` (one batch or a whole split in one dict)."""
    acc = SimilarityAccumulator()
    acc.add(states)
    return acc.result()


def stream_similarity(model, task, split, max_tokens=4000, max_sentences=None) -> Dict:
    acc = SimilarityAccumulator()
    for states in iter_states(model, task, split, max_tokens, max_sentences, desc="similarity"):
        acc.add(states)
    return acc.result()


def plot(result, title=""):
    from ..outputs import figure_title, mark_narrow_range, new_figure

    fig, ax = new_figure(figsize=(6, 4))
    for side, style in zip(result, ("-", "--")):
        for ref, marker in zip(REFERENCES, ("o", "s")):
            sims = result[side][ref]
            ax.plot(range(1, len(sims) + 1), sims, style, marker=marker, label=f"{side} vs {ref.replace('_', ' ')}")
    ax.set_xticks(range(1, len(sims) + 1))
    ax.set_xlabel("layer")
    ax.set_ylabel("mean cosine similarity")
    mark_narrow_range(ax)
    figure_title(fig, f"Embeddings vs layer states {title}".strip(), fontsize=10)
    ax.legend(fontsize=7)
    return fig

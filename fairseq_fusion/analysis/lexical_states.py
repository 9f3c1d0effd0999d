"""Per-position states of every encoder/decoder layer, for the lexical analyses of Emelin et
al. 2019 (§4.1, A.3): the probe, the embedding similarity, the gate statistics.

A layer's state is its output after the feed-forward sub-layer (footnote 4): the output of
``encoder.layers.i`` / ``decoder.layers.i`` (before any layer combination). Layer 0 is the
embedding layer (scaled embeddings + positions, what layer 1 reads). Each position is
labelled with the sub-word at that position: the source token (encoder) and the decoder's
input token (``prev_output_tokens``; the sub-word embedded at that position). Padding is
dropped; the model runs teacher-forced in eval mode.
"""
from typing import Dict, List

import torch

from .common import capture, iterate_batches

SIDES = ("encoder", "decoder")


def layer_names(model) -> Dict[str, List[str]]:
    return {side: [f"{side}.layers.{i}" for i in range(len(getattr(model, side).layers))] for side in SIDES}


@torch.no_grad()
def collect_states(model, task, split, max_tokens=4000, max_sentences=None, desc=None):
    """side -> {"tokens": N, "embed": N x C (scaled token embeddings), "layers": [N x C] * (L+1)}."""
    names = layer_names(model)
    pad = task.source_dictionary.pad()
    out = {side: {"tokens": [], "embed": [], "layers": [[] for _ in range(len(names[side]) + 1)]} for side in SIDES}
    all_names = names["encoder"] + names["decoder"]
    for sample in iterate_batches(task, split, max_tokens, max_sentences, model=model, desc=desc):
        net = sample["net_input"]
        with capture(model, all_names) as rec:
            enc = model.encoder(net["src_tokens"], src_lengths=net["src_lengths"], return_all_hiddens=True)
            _, extra = model.decoder(net["prev_output_tokens"], encoder_out=enc)
            _, dec_embed, _ = model.decoder.embed(net["prev_output_tokens"], None)
        sides = {
            "encoder": (net["src_tokens"], enc["encoder_states"][0], enc["encoder_embedding"][0].transpose(0, 1)),
            "decoder": (net["prev_output_tokens"], extra["inner_states"][0], dec_embed),
        }
        for side, (tokens, layer0, embed) in sides.items():
            keep = tokens.ne(pad).t()  # T x B
            o = out[side]
            o["tokens"].append(tokens.t()[keep])
            o["embed"].append(embed[keep].float())
            o["layers"][0].append(layer0[keep].float())
            for i, name in enumerate(names[side]):
                o["layers"][i + 1].append(rec[name][0][keep].float())
    for side in SIDES:
        o = out[side]
        o["tokens"] = torch.cat(o["tokens"]).cpu()
        o["embed"] = torch.cat(o["embed"]).cpu()
        o["layers"] = [torch.cat(x).cpu() for x in o["layers"]]
    return out


def layer_labels(n_layers):
    return ["emb"] + [str(i) for i in range(1, n_layers)]

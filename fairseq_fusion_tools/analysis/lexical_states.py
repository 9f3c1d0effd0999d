"""Per-position states of every encoder/decoder layer, batch by batch, for the lexical
analyses of Emelin et al. 2019 (§4.1, A.3): the probe, the embedding similarity, the gates.

A layer's state is its output after the feed-forward sub-layer (footnote 4): the output of
``encoder.layers.i`` / ``decoder.layers.i`` (before any layer combination). Layer 0 is the
embedding layer (scaled embeddings + positions, what layer 1 reads). Each position is
labelled with the sub-word at that position: the source token (encoder, source dictionary)
and the decoder's input token (``prev_output_tokens``, target dictionary). Padding is
dropped; the model runs teacher-forced in eval mode. Nothing is kept across batches: the
callers accumulate what they need (counts, sums) or write the states to disk.
"""
from typing import Dict, Iterator, List

import torch

from .common import capture, iterate_batches

SIDES = ("encoder", "decoder")


def layer_names(model) -> Dict[str, List[str]]:
    return {side: [f"{side}.layers.{i}" for i in range(len(getattr(model, side).layers))] for side in SIDES}


def side_dictionaries(task) -> Dict:
    """Encoder positions carry source sub-words, decoder positions target sub-words."""
    return {"encoder": task.source_dictionary, "decoder": task.target_dictionary}


def side_tokens(net) -> Dict[str, torch.Tensor]:
    """B x T sub-word ids at each side's positions."""
    return {"encoder": net["src_tokens"], "decoder": net["prev_output_tokens"]}


@torch.no_grad()
def iter_states(model, task, split, max_tokens=4000, max_sentences=None, desc=None, sample_seed=None) -> Iterator:
    """One dict per batch: side -> {"tokens": N, "embed": N x C (scaled token embeddings),
    "layers": [N x C] * (L+1), "sentence": N (dataset index), "position": N (index among the
    sentence's non-padding positions)}, on the model's device, positions in time-major order."""
    names = layer_names(model)
    pad = task.source_dictionary.pad()
    all_names = names["encoder"] + names["decoder"]
    for sample in iterate_batches(task, split, max_tokens, max_sentences, model=model, desc=desc, sample_seed=sample_seed):
        net = sample["net_input"]
        with capture(model, all_names) as rec:
            enc = model.encoder(net["src_tokens"], src_lengths=net["src_lengths"], return_all_hiddens=True)
            _, extra = model.decoder(net["prev_output_tokens"], encoder_out=enc, features_only=True)
            _, dec_embed, _ = model.decoder.embed(net["prev_output_tokens"], None)
        layer0 = {"encoder": (enc["encoder_states"][0], enc["encoder_embedding"][0].transpose(0, 1)),
                  "decoder": (extra["inner_states"][0], dec_embed)}
        out = {}
        for side, tokens in side_tokens(net).items():
            nonpad = tokens.ne(pad)
            keep = nonpad.t()  # T x B
            position = (nonpad.long().cumsum(1) - 1).t()[keep]
            sentence = sample["id"].to(tokens.device).unsqueeze(0).expand_as(keep)[keep]
            states, embed = layer0[side]
            out[side] = {
                "tokens": tokens.t()[keep], "sentence": sentence, "position": position,
                "embed": embed[keep].float(),
                "layers": [states[keep].float()] + [rec[n][0][keep].float() for n in names[side]],
            }
        yield out


def layer_labels(n_layers):
    return ["emb"] + [str(i) for i in range(1, n_layers)]

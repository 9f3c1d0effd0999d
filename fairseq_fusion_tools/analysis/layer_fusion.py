"""Analyses of Liu et al., ICLR 2021 (encoder layer fusion, SurfaceFusion).

- ``layer_attention_matrix``: Fig. 1, the weight each decoder layer gives each encoder layer,
  averaged over the D dimensions (eval mode: no DropConnect);
- ``masking_sweep``: §3.3 / Fig. 2, relative change of the task's metric (BLEU for translation,
  ``scoring.metrics``) and output length when encoder layer n is masked at inference (weight
  zeroed, the others renormalized), with fairseq's generation options;
- ``expressivity_curves``: Fig. 3-4, normalized log singular values ln(sigma_i / sigma_1) of an
  embedding matrix, and of its more-/less-attended halves of dimensions ordered by the top
  decoder layer's weights on the embedding layer w_hat^{M,0,d} (plus a random half);
- ``bilingual_similarity``: Table 3, cosine similarity of aligned source/target embeddings over
  a bilingual dictionary, "All" pairs and "Non-Shared" pairs (source word != target word).
"""
import argparse
import gzip
import math
from collections import Counter

import torch

from fairseq_fusion.modules.layer_attention import LayerAttention
from .common import MissingTechnique, iterate_batches, load_model


def layer_attention_module(model):
    reader = getattr(model.decoder, "encoder_reader", None)
    if not isinstance(reader, LayerAttention):
        raise MissingTechnique("this checkpoint has no layer attention: train it with --layer-attention fine|coarse "
                         "(e.g. --arch transformer_fine_grained_layer_attention)")
    return reader


@torch.no_grad()
def layer_attention_matrix(model):
    """M x (N+1) weights (rows: decoder layers, columns: encoder layers 0..N), mean over dims.

    With ``--layer-attention-top-only`` the lower decoder layers read X^N alone (weight 1).
    """
    reader = layer_attention_module(model)
    was_training = reader.training
    reader.eval()
    weights = reader.layer_weights().float().mean(-1)  # A x S
    reader.train(was_training)
    n_enc = reader.num_encoder_layers
    matrix = torch.zeros(reader.num_decoder_layers, n_enc + 1)
    matrix[:, n_enc] = 1.0
    for a, m in enumerate(reader.attending):
        matrix[m] = 0.0
        for s, n in enumerate(reader.sources):
            matrix[m, n] = weights[a, s]
    return matrix


# the masking tool's translation setting (Liu et al.: beam 4; outputs up to 1.2 x source + 10 tokens)
TRANSLATION_GENERATION = dict(beam=4, max_len_a=1.2, max_len_b=10)


def generation_args(**overrides):
    """fairseq's generation options (``GenerationConfig`` defaults) as the namespace
    ``task.build_generator`` reads, with ``overrides`` (e.g. beam=4, lenpen=2.0, min_len=55)."""
    import dataclasses

    from fairseq.dataclass.configs import GenerationConfig

    fields = {f.name: getattr(GenerationConfig(), f.name) for f in dataclasses.fields(GenerationConfig)
              if not f.name.startswith("_")}
    unknown = set(overrides) - set(fields)
    if unknown:
        raise ValueError(f"not fairseq generation options: {sorted(unknown)}")
    return argparse.Namespace(**{**fields, **overrides})


def decode_split(model, task, split, gen_args=None, post_process="subword_nmt", bpe=None, max_tokens=4000,
                 max_sentences=None, desc=None):
    """Generation over ``split`` with fairseq's generator and options (``gen_args``, see
    ``generation_args``): (hypotheses, references) after ``post_process`` (fairseq's
    ``--post-process``, e.g. subword_nmt, sentencepiece, none) and ``bpe.decode`` (e.g. fairseq's
    GPT-2 BPE), in sentence-id order. Only the texts are kept, batch by batch."""
    from fairseq import utils

    generator = task.build_generator([model], gen_args or generation_args(**TRANSLATION_GENERATION))
    tgt_dict = task.target_dictionary

    def text(tokens):
        line = tgt_dict.string(tokens, post_process)
        return bpe.decode(line) if bpe is not None else line

    out = {}
    for sample in iterate_batches(task, split, max_tokens, max_sentences, model, desc=desc):
        hyps = task.inference_step(generator, [model], sample)
        for i, sid in enumerate(sample["id"].tolist()):
            ref = utils.strip_pad(sample["target"][i], tgt_dict.pad())
            out[sid] = (text(hyps[i][0]["tokens"].int().cpu()), text(ref.int().cpu()))
    ids = sorted(out)
    return [out[i][0] for i in ids], [out[i][1] for i in ids]


def score_and_length(hyps, refs, metric="bleu"):
    """The corpus ``metric`` (``scoring.metrics``; bleu = tokenized BLEU, the paper's) and mean length in words."""
    from ..scoring.metrics import get_metric

    return {"metric": metric, "score": get_metric(metric)(hyps, refs),
            "length": sum(len(h.split()) for h in hyps) / max(len(hyps), 1), "sentences": len(hyps)}


def relative_change(value, base):
    return 100.0 * (value - base) / base if base else float("nan")


def masking_sweep(path, data=None, split="test", layers=None, cpu=False, overrides=None, metric="bleu", **decode):
    """Decode ``split`` unmasked, then with each encoder layer masked through the model override
    ``layer_attention_mask`` (the one ``fairseq-generate --model-overrides`` uses); ``decode``:
    ``decode_split``'s options (generation options, post-processing, BPE, batch size)."""
    overrides = dict(overrides or {})
    model, task, _ = load_model(path, data, dict(overrides, layer_attention_mask=None), cpu)
    reader = layer_attention_module(model)
    layers = list(reader.sources) if layers is None else layers
    base = score_and_length(*decode_split(model, task, split, desc="unmasked", **decode), metric=metric)
    results = []
    for n in layers:
        model, task, _ = load_model(path, data, dict(overrides, layer_attention_mask=n), cpu)
        if layer_attention_module(model).mask != n:
            raise RuntimeError(f"layer_attention_mask={n} did not reach the loaded model")
        res = score_and_length(*decode_split(model, task, split, desc=f"mask layer {n}", **decode), metric=metric)
        res.update(masked_layer=n, score_change=relative_change(res["score"], base["score"]),
                   length_change=relative_change(res["length"], base["length"]))
        results.append(res)
    return base, results


def normalized_log_singular_values(matrix):
    """ln(sigma_i / sigma_max) of a (rows x dims) matrix, largest first (Gao et al. 2019)."""
    sigma = torch.linalg.svdvals(matrix.double())
    return torch.log(sigma / sigma.max()).tolist()


def embedding_matrix(model, which="encoder"):
    if which == "encoder":
        return model.encoder.embed_tokens.weight.detach().float()
    if which == "decoder":
        return model.decoder.embed_tokens.weight.detach().float()
    if which == "output":
        return model.decoder.output_projection.weight.detach().float()
    raise ValueError(f"--embedding: expected encoder, decoder or output, got {which!r}")


def attended_dimension_order(model):
    """Dimensions sorted by the top decoder layer's weight on the embedding layer, w_hat^{M,0,d}, descending;
    ``None`` when the model has no fine-grained layer attention."""
    try:
        reader = layer_attention_module(model)
    except ValueError:
        return None
    if reader.granularity != "fine":
        return None
    was_training = reader.training
    reader.eval()
    with torch.no_grad():
        w = reader.layer_weights()[-1, reader.sources.index(0)]  # top attending layer, embedding layer
    reader.train(was_training)
    return torch.argsort(w.float(), descending=True)


def expressivity_curves(model, which="encoder", seed=1):
    """{"all": ..., "random": ..., and with fine-grained layer attention "more attended", "less attended"}."""
    emb = embedding_matrix(model, which)
    dims = emb.size(1)
    half = dims // 2
    g = torch.Generator().manual_seed(seed)
    curves = {"all": normalized_log_singular_values(emb),
              "random": normalized_log_singular_values(emb[:, torch.randperm(dims, generator=g)[:half]])}
    order = attended_dimension_order(model) if which == "encoder" else None
    if order is not None:
        curves["more attended"] = normalized_log_singular_values(emb[:, order[:half]])
        curves["less attended"] = normalized_log_singular_values(emb[:, order[half:]])
    return curves


def read_dictionary(path):
    """Bilingual dictionary: one ``source target`` pair a line (whitespace-separated; ``|||`` allowed)."""
    opener = gzip.open if path.endswith(".gz") else open
    pairs = []
    with opener(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            fields = line.replace("|||", " ").split()
            if not fields:
                continue
            if len(fields) != 2:
                raise ValueError(f"{path}:{lineno}: expected 'source target', got {line.strip()!r}")
            pairs.append((fields[0], fields[1]))
    return pairs


def _read_links(text_path, links_path):
    """[(source words, target words, [(i, j, link text) of sure links as written])] per line."""
    rows = []
    with open(text_path, encoding="utf-8") as ft, open(links_path, encoding="utf-8") as fl:
        for lineno, (text, links) in enumerate(zip(ft, fl), 1):
            if "|||" not in text:
                raise ValueError(f"{text_path}:{lineno}: expected 'source ||| target'")
            src, tgt = (side.split() for side in text.split("|||"))
            sure = []
            for link in links.split():
                if "p" in link:  # possible link (ipj)
                    continue
                try:
                    i, j = (int(x) for x in link.split("-"))
                except ValueError:
                    raise ValueError(f"{links_path}:{lineno}: expected links 'i-j' (or 'ipj'), got {link!r}") from None
                sure.append((i, j, link))
            rows.append((lineno, src, tgt, sure))
    return rows


def links_index_base(rows, links_path):
    """0 or 1: the first word's index in ``links_path`` (fast_align writes 0, gold .talp files 1),
    read from the file: an index 0 proves 0-based, an index equal to a sentence length 1-based."""
    zero = any(i == 0 or j == 0 for _, _, _, sure in rows for i, j, _ in sure)
    full = any(i == len(src) or j == len(tgt) for _, src, tgt, sure in rows for i, j, _ in sure)
    if zero and full:
        raise ValueError(f"{links_path}: links use both index 0 and the sentence length: "
                         "neither 0-based nor 1-based (wrong text file for these links?)")
    if not zero and not full:
        raise ValueError(f"{links_path}: cannot tell whether links are 0-based (fast_align) or 1-based "
                         "(.talp): give --links-index-base 0 or 1")
    return 0 if zero else 1


def dictionary_from_alignments(text_path, links_path, min_count=1, reverse=False, index_base=None):
    """Word pairs of sure links (``i-j``; ``ipj`` possible links are skipped) of a word alignment
    (``src ||| tgt`` text file and links: a gold ``.talp`` file, 1-based, or fast_align's output,
    0-based; ``index_base`` None reads it from the file), counted, kept with >= ``min_count``.
    ``reverse`` swaps the sides (e.g. De-En alignments for an En->De model)."""
    rows = _read_links(text_path, links_path)
    base = links_index_base(rows, links_path) if index_base is None else index_base
    if base not in (0, 1):
        raise ValueError(f"--links-index-base: expected 0 or 1, got {base}")
    counts = Counter()
    for lineno, src, tgt, sure in rows:
        for i, j, link in sure:
            i, j = i - base, j - base
            if not (0 <= i < len(src) and 0 <= j < len(tgt)):
                raise ValueError(f"{links_path}:{lineno}: link {link} outside the sentence lengths "
                                 f"({len(src)}, {len(tgt)} words, {base}-based)")
            counts[(tgt[j], src[i]) if reverse else (src[i], tgt[j])] += 1
    return [pair for pair, c in counts.items() if c >= min_count]


def bilingual_similarity(model, task, pairs):
    """Mean cosine similarity of source-embedding(s) and target-embedding(t) over dictionary pairs
    whose words are both single entries of the model's vocabularies; "All" and "Non-Shared" (s != t)."""
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    src_emb = model.encoder.embed_tokens.weight.detach().float()
    tgt_emb = model.decoder.embed_tokens.weight.detach().float()
    kept = [(s, t) for s, t in dict.fromkeys(pairs)
            if src_dict.index(s) != src_dict.unk() and tgt_dict.index(t) != tgt_dict.unk()]
    if not kept:
        raise ValueError("no dictionary pair has both words in the model's vocabularies")
    s_idx = torch.tensor([src_dict.index(s) for s, _ in kept])
    t_idx = torch.tensor([tgt_dict.index(t) for _, t in kept])
    cos = torch.nn.functional.cosine_similarity(src_emb[s_idx], tgt_emb[t_idx], dim=-1)
    non_shared = torch.tensor([s != t for s, t in kept])
    return {
        "all": cos.mean().item(),
        "non_shared": cos[non_shared].mean().item() if non_shared.any() else math.nan,
        "pairs": len(kept), "non_shared_pairs": int(non_shared.sum()),
        "dictionary_pairs": len(set(pairs)),
    }

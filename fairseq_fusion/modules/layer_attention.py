"""Layer attention over encoder layers: each decoder layer reads its own mix of X^0..X^N.

Liu et al., ICLR 2021, *Understanding and Improving Encoder Layer Fusion in Seq2Seq
Learning*, §3.2 (fine-grained layer attention), Table 1 (coarse-grained layer attention of
Bapna et al. 2018 as the EncoderFusion baseline), §3.3 / Fig. 2 (layer masking) and §4,
first paragraph (only the uppermost decoder layer attends the embedding and output layers).

Fine-grained (§3.2): decoder layer m attends

    S^m = sum_{n=0..N} w_hat^{m,n} ⊙ X^n,
    w_hat^{m,n,d} = exp(w^{m,n,d}) / sum_{n'} exp(w^{m,n',d}),   W ∈ R^{M x (N+1) x D}

instead of X^N. Coarse-grained (Bapna et al. 2018): one scalar per (m, n), W ∈ R^{M x (N+1)},
softmax over n. Readings chosen here:

- X^0 is ``encoder_out["encoder_embedding"]``: fairseq's *scaled* word embeddings
  sqrt(D) * E[x] without positions (the paper's X_emb: in fairseq X^0 = sqrt(D) E[x] + pos,
  Eq. 2, so X_emb carries the same scale as the other layers' inputs), without dropout;
- X^1..X^{N-1} are the encoder layers' outputs (``encoder_states[1:N]``) and X^N is the
  encoder output ``encoder_out["encoder_out"]`` (after the final LayerNorm of a pre-norm
  encoder, or whatever a layer combiner made the stack's output);
- the paper is silent on normalization and dropout of X^0 and S^m; the named archs follow the
  authors' code: X^0 gets the model's ``--dropout`` in training
  (``--layer-attention-embed-dropout``) and, in a post-norm encoder, a LayerNorm of its own;
  S^m gets a LayerNorm shared by all decoder layers (``--layer-attention-layernorm``, both
  LayerNorms) and then dropout (``--layer-attention-dropout``, 0.1 as the authors' default):

      X^0 = LN_emb(dropout(sqrt(D) E[x])),   S^m = dropout(LN(sum_n w_hat^{m,n} ⊙ X^n));

  the three flags off give the earlier reading (no LayerNorm, no dropout);
- DropConnect (Wan et al. 2013) with p = 0.3, training only: each w^{m,n,d} is dropped
  (set to 0 before the softmax) with probability p and W is divided by 1 - p, i.e.
  dropout on W before the softmax, as the paper writes;
- W is initialized uniformly in ±sqrt(2 / (M + N + 1)) (the authors' code; the paper is silent);
- the coarse baseline uses the same X^0..X^N and the same DropConnect, so Table 1's
  comparison differs only in the granularity of the weights;
- ``top_only`` (§4): decoder layers 1..M-1 read X^N as usual; layer M reads a
  (fine or coarse) mix of {X^0, X^N} only, W ∈ R^{1 x 2 x D};
- masking (§3.3): encoder layer n gets weight 0 and the other weights are renormalized,
  which is the softmax with w^{m,n,.} = -inf; encoding itself (Eq. 1) is unchanged.

The mix depends on the source only: it is computed once per sentence in the encoder's
output (key ``layer_attention_memory``, one T x B x C tensor per attending decoder layer,
reordered by beam search like every encoder output), and the decoder's seam (c) reads it.
"""
import math

import torch
import torch.nn.functional as F
from fairseq.modules import LayerNorm
from torch import nn

from .. import fusion_options
from . import internals
from ..fusion_options import EXTENDS, REMOVES, REPLACES, Claim, Flag, OptionGroup, Range
from ..errors import FusionError

MEMORY_KEY = "layer_attention_memory"


TOP_STATES = ("output", "last-layer")


class LayerAttention(nn.Module):
    """Seam (c) reader (a ``seams.EncoderReader``): decoder layer m attends S^m, a softmax-weighted sum of
    encoder layers."""

    def __init__(self, num_decoder_layers, num_encoder_layers, embed_dim, granularity="fine",
                 dropconnect=0.3, top_only=False, mask=None,
                 embed_dropout=0.0, layernorm=False, embed_norm=False, mix_dropout=0.0, top_state="output"):
        super().__init__()
        if granularity not in ("fine", "coarse"):
            raise FusionError(f"--layer-attention: expected 'fine' or 'coarse', got {granularity!r}")
        self.num_decoder_layers = num_decoder_layers
        self.num_encoder_layers = num_encoder_layers
        self.granularity = granularity
        self.top_only = top_only
        self.dropconnect = dropconnect
        # the encoder layers each attending decoder layer mixes (indices into X^0..X^N)
        self.sources = [0, num_encoder_layers] if top_only else list(range(num_encoder_layers + 1))
        self.attending = [num_decoder_layers - 1] if top_only else list(range(num_decoder_layers))
        shape = (len(self.attending), len(self.sources)) + ((embed_dim,) if granularity == "fine" else (1,))
        self.weight = nn.Parameter(torch.empty(shape))
        bound = math.sqrt(2.0 / (num_decoder_layers + num_encoder_layers + 1))
        nn.init.uniform_(self.weight, -bound, bound)
        self.mask = mask
        self.embed_dropout = embed_dropout  # dropout on X^0 (training only)
        self.mix_dropout = mix_dropout  # dropout on S^m (training only)
        self.embed_norm = LayerNorm(embed_dim) if embed_norm else None  # LN of X^0
        self.mix_norm = LayerNorm(embed_dim) if layernorm else None  # LN of S^m, shared by all m
        # X^N: the encoder output (after a pre-norm encoder's final LayerNorm) or the last layer's output before it
        self.top_state = top_state
        self.internals_sink = None  # --fusion-log-internals (internals.py): entropy and embedding weight per layer

    def record_internals(self):
        """The learned weights (no DropConnect), per attending decoder layer m: their entropy over the encoder
        layers (nats, mean over the D dimensions) and the weight on the word embeddings (n = 0), mean over D; at
        validation also every weight (the map of the paper's Fig. 1)."""
        w = self.weight.detach().float()
        if self.mask is not None:
            keep = torch.tensor([n != self.mask for n in self.sources], device=w.device)
            w = w.masked_fill(~keep.view(1, -1, 1), float("-inf"))
        probs = torch.softmax(w, dim=1)  # A x S x D
        spread = internals.entropy(probs, dim=1).mean(-1)  # A
        on_embed = probs[:, self.sources.index(0)].mean(-1) if 0 in self.sources else None
        for i, m in enumerate(self.attending):
            internals.record(self, f"layer_attention/dec{m}_entropy", spread[i])
            if on_embed is not None:
                internals.record(self, f"layer_attention/dec{m}_on_embed", on_embed[i])
        if not self.training:  # validation: the whole map (TensorBoard draws it as an image, compat/tensorboard_images.py)
            for i, m in enumerate(self.attending):
                for j, n in enumerate(self.sources):
                    internals.record(self, f"layer_attention/map_dec{m}_enc{n}", probs[i, j].mean())

    def set_mask(self, layer):
        """Mask encoder layer ``layer`` (0 = embeddings, N = output) or ``None`` for no mask."""
        if layer is not None and layer not in self.sources:
            raise FusionError(
                f"--layer-attention-mask {layer}: expected one of the attended encoder layers "
                f"{self.sources} (0 = word embeddings, {self.num_encoder_layers} = encoder output)"
            )
        self.mask = layer

    def layer_weights(self):
        """w_hat: softmax over encoder layers, A x S x D (D = 1 if coarse); DropConnect when training."""
        w = F.dropout(self.weight, p=self.dropconnect, training=self.training)
        if self.mask is not None:
            keep = torch.tensor([n != self.mask for n in self.sources], device=w.device)
            w = w.masked_fill(~keep.view(1, -1, 1), float("-inf"))
        return torch.softmax(w.float(), dim=1).to(w)

    def layer_inputs(self, encoder_out):
        """X^n for the attended n: word embeddings, layer outputs, encoder output (T x B x C)."""
        states = encoder_out["encoder_states"]
        inputs = []
        for n in self.sources:
            if n == 0:
                x0 = F.dropout(encoder_out["encoder_embedding"][0].transpose(0, 1),
                               p=self.embed_dropout, training=self.training)
                inputs.append(x0 if self.embed_norm is None else self.embed_norm(x0))
            elif n == self.num_encoder_layers and self.top_state == "output":
                inputs.append(encoder_out["encoder_out"][0])
            else:
                inputs.append(states[n])
        return inputs

    def add_encoder_output(self, out, ctx):
        """Encoder hook: out[MEMORY_KEY] = [S^m for each attending decoder layer m]."""
        inputs = torch.stack(self.layer_inputs(out), dim=0)  # S x T x B x C
        if self.internals_sink is not None:
            self.record_internals()
        weights = self.layer_weights()  # A x S x D
        # every attending layer's mix in one product (one per-layer einsum copied the whole stack each time)
        if weights.size(-1) == 1:  # coarse: one weight per encoder layer, a plain matrix product
            s, t, b, c = inputs.shape
            mixes = (weights[..., 0] @ inputs.reshape(s, -1)).view(-1, t, b, c).unbind(0)
        else:
            mixes = torch.einsum("stbc,asc->atbc", inputs, weights).unbind(0)
        if self.mix_norm is not None:
            mixes = [self.mix_norm(mix) for mix in mixes]
        out[MEMORY_KEY] = [F.dropout(mix, p=self.mix_dropout, training=self.training) for mix in mixes]

    def encoder_memory(self, idx, encoder_out, incremental_state):
        memory = None
        if encoder_out is not None and idx in self.attending:
            memory = encoder_out[MEMORY_KEY][self.attending.index(idx)]
        padding_mask = None
        if encoder_out is not None and len(encoder_out["encoder_padding_mask"]) > 0:
            padding_mask = encoder_out["encoder_padding_mask"][0]
        if memory is None and encoder_out is not None:
            memory = encoder_out["encoder_out"][0]
        return memory, padding_mask


def parameter_count(num_decoder_layers, num_encoder_layers, embed_dim, granularity, top_only,
                    layernorm=False, embed_norm=False):
    """Parameters the paper's W adds: M x (N+1) x D (fine), M x (N+1) (coarse); top only: 1 x 2 (x D);
    plus 2 D per LayerNorm (of S^m; of X^0)."""
    layers, sources = (1, 2) if top_only else (num_decoder_layers, num_encoder_layers + 1)
    norms = 2 * embed_dim * (int(layernorm) + int(embed_norm))
    return layers * sources * (embed_dim if granularity == "fine" else 1) + norms


def validate(args):
    # the flags' choices and ranges: fusion_options.check_values; sub-flags without the technique: check_requirements
    if args.layer_attention == "none":
        return
    if getattr(args, "no_cross_attention", False):
        raise FusionError("--layer-attention changes what the decoder's encoder attention reads, "
                         "which --no-cross-attention removes; drop one of them")
    mask, n = args.layer_attention_mask, args.encoder_layers
    allowed = [0, n] if args.layer_attention_top_only else list(range(n + 1))
    if mask is not None and mask not in allowed:
        raise FusionError(
            f"--layer-attention-mask {mask}: expected an attended encoder layer {allowed} "
            f"(0 = word embeddings, {n} = encoder output"
            + (", --layer-attention-top-only attends only these two)" if args.layer_attention_top_only else ")")
        )


def claims(args):
    mode = args.layer_attention
    return [] if mode == "none" else [Claim("decoder.encoder_reader", REPLACES, f"--layer-attention {mode}")]


def attach(model, args):
    if args.layer_attention == "none":
        return
    encoder, decoder = model.encoder, model.decoder
    reader = LayerAttention(
        len(decoder.layers), len(encoder.layers), encoder.embed_tokens.embedding_dim,
        granularity=args.layer_attention, dropconnect=args.layer_attention_dropconnect,
        top_only=bool(args.layer_attention_top_only),
        embed_dropout=args.dropout if args.layer_attention_embed_dropout else 0.0,
        layernorm=bool(args.layer_attention_layernorm),
        embed_norm=bool(args.layer_attention_layernorm) and not getattr(args, "encoder_normalize_before", False),
        mix_dropout=args.layer_attention_dropout, top_state=args.layer_attention_top_state,
    )
    reader.set_mask(args.layer_attention_mask)
    decoder.encoder_reader = reader
    encoder.extra_output_hooks.append(reader.add_encoder_output)
    encoder.extra_out_batch_dims[MEMORY_KEY] = 1


fusion_options.register(
    OptionGroup(
        title="layer attention over encoder layers (Liu et al. 2021, Bapna et al. 2018)",
        name="layer_attention",
        flags=[
            Flag("layer_attention", "none",
                 "decoder layer m attends S^m = sum_n softmax_n(w^{m,n}) * X^n over encoder layers "
                 "n = 0 (word embeddings) .. N: 'fine' (one weight per dimension, Liu et al. §3.2) "
                 "or 'coarse' (one scalar per layer pair, Bapna et al. 2018)",
                 type=str, choices=["none", "fine", "coarse"], switch=True),
            Flag("layer_attention_dropconnect", 0.3,
                 "DropConnect probability on the layer-attention weights W (training only)", type=float,
                 bounds=Range(0, 1, high_open=True, what="a probability"), requires=["layer_attention"]),
            Flag("layer_attention_top_only", False,
                 "only the top decoder layer attends, and only the embedding and output layers (§4)",
                 type=bool, requires=["layer_attention"]),
            Flag("layer_attention_mask", None,
                 "inference analysis (§3.3): zero the weight of this encoder layer (0 = embeddings) "
                 "and renormalize the others; e.g. --model-overrides \"{'layer_attention_mask': 0}\"",
                 type=int, requires=["layer_attention"]),
            Flag("layer_attention_embed_dropout", False,
                 "apply --dropout to X^0 (the word embeddings) in training, as the authors' code "
                 "(named archs: true)", type=bool, requires=["layer_attention"]),
            Flag("layer_attention_layernorm", False,
                 "LayerNorm S^m (one LayerNorm shared by the decoder layers) and, in a post-norm encoder, "
                 "X^0, as the authors' code (named archs: true)", type=bool, requires=["layer_attention"]),
            Flag("layer_attention_top_state", "output",
                 "what X^N, the top encoder layer, is: the encoder output, after a pre-norm encoder's final "
                 "LayerNorm (output, default), or the last layer's output before it (last-layer: the authors' code "
                 "with --encoder-normalize-before); a post-norm encoder has no final LayerNorm, the two are one",
                 type=str, choices=list(TOP_STATES), requires=["layer_attention"]),
            Flag("layer_attention_dropout", 0.0,
                 "dropout on S^m in training, after the LayerNorm (authors' code and named archs: 0.1)",
                 type=float, bounds=Range(0, 1, high_open=True, what="a probability"), requires=["layer_attention"]),
        ],
        validate=validate,
        claims=claims,
        attach=attach,
    )
)

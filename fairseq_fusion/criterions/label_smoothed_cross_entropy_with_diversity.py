"""Label-smoothed cross-entropy with the layer-diversity regularizer of Dou et al. (2018),
"Exploiting Deep Representations for Neural Machine Translation", §3.2, Eq. 9-10.

    L_diversity = 1/(L-1) sum_{l=1}^{L-1} D(H^l, H^{l+1}),                         (Eq. 10)
    D(H^l, H^{l+1}) = 1/N sum_n (1 - cos^2(h^l_n, h^{l+1}_n)),  n over non-padding positions.

H^l is the output of layer l of a stack (what the layer module returns, before any layer
aggregation of seam (b) is applied); the embedding layer is not a layer of Eq. 10.
``--diversity-in`` chooses the stacks; with both, L_diversity is the sum of the encoder's and
the decoder's Eq. 10 (each is a regularizer of its stack). With LayerDrop
(``--encoder-layerdrop``/``--decoder-layerdrop``) Eq. 10 runs over the layers that ran in the
step, the neighbours of a dropped layer counting as adjacent; a step that keeps fewer than two
layers of a stack adds nothing for that stack.

Sign convention: §3.2 says the term *encourages* diversity ("maximize the diversity across
layers") while Eq. 9 adds it to a loss that is minimized. We implement the text: the
minimized loss is L_likelihood - lambda * L_diversity (lambda = --diversity-lambda, 1.0 as
in the paper), so training increases the diversity. fairseq's losses are sums over the
sample (normalized by ``sample_size`` for the gradient), so the per-sample term enters as
lambda * L_diversity * sample_size; the logged ``loss`` includes it, ``nll_loss`` does not,
and ``diversity`` (plus ``diversity_encoder`` / ``diversity_decoder``) is logged on its own.
"""
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Dict, List

import torch
import torch.nn.functional as F
from fairseq import metrics, utils
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.dataclass import ChoiceEnum
from ..errors import FusionError

SIDES = ("both", "encoder", "decoder")


@dataclass
class LabelSmoothedCrossEntropyWithDiversityConfig(LabelSmoothedCrossEntropyCriterionConfig):
    diversity_lambda: float = field(
        default=1.0, metadata={"help": "lambda of Eq. 9: weight of the layer diversity (maximized)"}
    )
    diversity_in: ChoiceEnum(list(SIDES)) = field(
        default="both", metadata={"help": "stacks whose adjacent layers are made diverse (Eq. 10)"}
    )


def layer_diversity(states: List[torch.Tensor], keep: torch.Tensor) -> torch.Tensor:
    """Eq. 10 for one stack: ``states`` = [H^1..H^L] (T x B x C), ``keep`` = B x T, True at tokens."""
    if len(states) < 2:
        raise ValueError(f"layer diversity (Eq. 10) needs at least 2 layers, the stack has {len(states)}")
    # in fp32 (a no-op for fp32 states): in half precision the sums over tokens, and in the backward
    # fairseq's loss scale times lambda * sample_size, overflow (docs/fairseq_features.md, "Loss scaling")
    weights = keep.t().float()  # T x B
    distances = []
    for lower, upper in zip(states[:-1], states[1:]):
        cos = F.cosine_similarity(lower.float(), upper.float(), dim=-1, eps=1e-8)
        distances.append(((1 - cos.pow(2)) * weights).sum() / weights.sum())
    return torch.stack(distances).mean()


@contextmanager
def layer_outputs(stack):
    """Record the output of every layer of ``stack`` (encoder or decoder) during a forward."""
    outputs: List[torch.Tensor] = []

    def hook(_module, _inputs, out):
        outputs.append(out[0] if isinstance(out, tuple) else out)

    handles = [layer.register_forward_hook(hook) for layer in stack.layers]
    try:
        yield outputs
    finally:
        for handle in handles:
            handle.remove()


@register_criterion(
    "label_smoothed_cross_entropy_with_diversity", dataclass=LabelSmoothedCrossEntropyWithDiversityConfig
)
class LabelSmoothedCrossEntropyWithDiversityCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(self, task, sentence_avg, label_smoothing, ignore_prefix_size=0,
                 report_accuracy=False, diversity_lambda=1.0, diversity_in="both"):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if str(diversity_in) not in SIDES:
            raise FusionError(f"--diversity-in: expected one of {SIDES}, got {diversity_in!r}")
        self.diversity_lambda = diversity_lambda
        self.sides = [s for s in ("encoder", "decoder") if str(diversity_in) in ("both", s)]

    def diversity(self, outputs: Dict[str, List[torch.Tensor]], sample, num_layers: Dict[str, int]) -> Dict[str, torch.Tensor]:
        keep = {
            "encoder": sample["net_input"]["src_tokens"].ne(self.padding_idx),
            "decoder": sample["target"].ne(self.padding_idx),
        }
        out = {}
        for side in self.sides:
            ran = outputs[side]
            if len(ran) < 2 and num_layers[side] >= 2:  # LayerDrop kept fewer than 2 layers this step
                out[side] = keep[side].new_zeros((), dtype=torch.float)
            else:
                out[side] = layer_diversity(ran, keep[side])
        return out

    def forward(self, model, sample, reduce=True):
        with layer_outputs(model.encoder) as enc, layer_outputs(model.decoder) as dec:
            net_output = model(**sample["net_input"])
        loss, nll_loss = self.compute_loss(model, net_output, sample, reduce=reduce)
        sample_size = sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
        num_layers = {side: len(getattr(model, side).layers) for side in ("encoder", "decoder")}
        per_side = self.diversity({"encoder": enc, "decoder": dec}, sample, num_layers)
        diversity = sum(per_side.values())
        loss = loss - self.diversity_lambda * diversity * sample_size  # maximize L_diversity (see docstring)
        logging_output = {
            "loss": loss.data,
            "nll_loss": nll_loss.data,
            "ntokens": sample["ntokens"],
            "nsentences": sample["target"].size(0),
            "sample_size": sample_size,
            "diversity": diversity.data * sample_size,
        }
        for side, value in per_side.items():
            logging_output[f"diversity_{side}"] = value.data * sample_size
        if self.report_accuracy:
            n_correct, total = self.compute_accuracy(model, net_output, sample)
            logging_output["n_correct"] = utils.item(n_correct.data)
            logging_output["total"] = utils.item(total.data)
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
        for key in ("diversity", "diversity_encoder", "diversity_decoder"):
            if any(key in log for log in logging_outputs):
                value = sum(log.get(key, 0) for log in logging_outputs)
                metrics.log_scalar(key, value / sample_size, sample_size, round=4)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True

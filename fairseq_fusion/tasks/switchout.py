"""SwitchOut (Wang, Pham, Dai, Neubig, EMNLP 2018) for fairseq's translation tasks.

Each training pair (x, y) is replaced by a corrupted one: for a sentence s of |s| words, sample
n in {0, ..., |s|} with P(n) proportional to exp(-n * tau), corrupt each word with probability
n / |s|, and put a word drawn uniformly from the vocabulary in its place (a different word; the
special symbols are neither replaced nor drawn). Source and target have their own tau (Liu et al.
2021, CoNLL-14 GEC: 0.8 source, 0.9 target). The target labels and the decoder input get the
same corruption. Only ``train_step`` corrupts: validation and decoding see the data as it is.

The temperature: Wang et al.'s Eq. writes P(n) ~ exp(-n / tau), their appendix code (and the
code of Liu et al.) computes softmax(-n * tau); ``--switchout-temperature`` picks the reading,
default the code's (``multiply``), the one Liu et al.'s settings were run with.
"""
from dataclasses import dataclass, field

import torch
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from .. import host_sync
from ..errors import FusionError


def corruption_counts(lengths, tau, reading="multiply", generator=None, steps=None):
    """n per sentence: P(n) ~ exp(-n * tau) (``multiply``) or exp(-n / tau) (``divide``) on {0..length}.

    ``steps``: a number above every length (P(n) is 0 from the length on); default the longest + 1, read
    on the host."""
    if steps is None:
        steps = int(lengths.max().item()) + 1 if lengths.numel() else 1
    n = torch.arange(steps, dtype=torch.float64, device=lengths.device)
    logits = -n * tau if reading == "multiply" else -n / tau
    logits = logits.unsqueeze(0).expand(len(lengths), steps)
    logits = logits.masked_fill(n.unsqueeze(0) > lengths.unsqueeze(1).double(), float("-inf"))
    probs = torch.softmax(logits, dim=1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def switchout(tokens, tau, dictionary, reading="multiply", generator=None):
    """Corrupted copy of ``tokens`` (B x T) and the mask of replaced positions.

    Drawn on ``generator``'s device (default: the tokens'). On the CPU, n is drawn over {0..longest};
    elsewhere over {0..T}, T the padded length, without reading the lengths on the host (the same
    distribution, other random numbers)."""
    device = tokens.device if generator is None else generator.device
    special = tokens < dictionary.nspecial
    words = ~special
    lengths = words.sum(1)
    steps = None if host_sync.host_reads_are_free(tokens) else tokens.size(1) + 1
    n = corruption_counts(lengths.to(device), tau, reading, generator, steps).to(tokens.device)
    rate = (n.double() / lengths.clamp(min=1).double()).unsqueeze(1).expand_as(tokens)
    draw = torch.rand(tokens.shape, generator=generator, dtype=torch.float64, device=device).to(tokens.device)
    replace = (draw < rate) & words
    # a different word, uniform over the non-special entries (fairseq's padding symbols excluded)
    lo, hi = dictionary.nspecial, _vocabulary_end(dictionary)
    offset = torch.randint(1, max(2, hi - lo), tokens.shape, generator=generator, device=device).to(tokens.device)
    new = lo + (tokens - lo + offset) % (hi - lo)
    return torch.where(replace, new, tokens), replace


def _vocabulary_end(dictionary):
    """Index after the last real entry (``Dictionary.pad_to_multiple_`` appends ``madeupwordNNNN``)."""
    end = len(dictionary)
    while end > dictionary.nspecial and dictionary[end - 1].startswith("madeupword"):
        end -= 1
    return end


TEMPERATURE = ChoiceEnum(["multiply", "divide"])


@dataclass
class SwitchOutConfig(TranslationConfig):
    switchout_tau_src: float = field(default=0.0, metadata={"help": "SwitchOut tau of the source (0: off)"})
    switchout_tau_tgt: float = field(default=0.0, metadata={"help": "SwitchOut tau of the target (0: off)"})
    switchout_temperature: TEMPERATURE = field(
        default="multiply", metadata={"help": "P(n) ~ exp(-n * tau) as Wang et al.'s and Liu et al.'s code (multiply) "
                                              "or exp(-n / tau) as Wang et al.'s equation (divide)"})


class SwitchOutMixin:
    """``train_step`` on a SwitchOut-corrupted copy of the sample; every other step unchanged."""

    def _check_switchout(self):
        for side in ("src", "tgt"):
            tau = getattr(self.cfg, f"switchout_tau_{side}", 0.0)
            if tau < 0:
                raise FusionError(f"--switchout-tau-{side} must be >= 0 (0: off), got {tau}")

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        cfg = self.cfg
        if cfg.switchout_tau_src > 0 or cfg.switchout_tau_tgt > 0:
            sample = switchout_sample(sample, cfg.switchout_tau_src, cfg.switchout_tau_tgt, self.source_dictionary,
                                      self.target_dictionary, cfg.switchout_temperature)
        return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)


def switchout_sample(sample, tau_src, tau_tgt, src_dict, tgt_dict, reading="multiply", generator=None):
    """A copy of a fairseq translation sample with SwitchOut applied to source, target and decoder input."""
    net_input = dict(sample["net_input"])
    out = dict(sample, net_input=net_input)
    if tau_src > 0:
        net_input["src_tokens"], _ = switchout(net_input["src_tokens"], tau_src, src_dict, reading, generator)
    if tau_tgt > 0 and sample.get("target") is not None:
        target, replaced = switchout(sample["target"], tau_tgt, tgt_dict, reading, generator)
        out["target"] = target
        prev = net_input.get("prev_output_tokens")
        if prev is not None:  # prev = [eos, y1, ..., yn]: position i + 1 holds target position i
            prev = prev.clone()
            prev[:, 1:] = torch.where(replaced[:, :-1], target[:, :-1], prev[:, 1:])
            net_input["prev_output_tokens"] = prev
    return out


@register_task("translation_switchout", dataclass=SwitchOutConfig)
class TranslationSwitchOutTask(SwitchOutMixin, TranslationTask):
    """fairseq's ``translation`` task with SwitchOut on the training batches (``--switchout-tau-src/-tgt``)."""

    def __init__(self, cfg, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self._check_switchout()

"""``translation_with_phrases``: translation whose source sentences carry parse-tree phrase spans.

For ``--phrase-segmentation parse`` (Xu et al. 2020, Table 2 "+Parse"). Next to each
binarized source file ``{split}.{src}-{tgt}.{src}.bin`` lies ``{split}.{src}-{tgt}.{src}.phrases``
(written by ``fusion-parse-spans``): one line per sentence, the lengths in BPE sub-words of its
phrases, left to right, summing to the sentence's sub-words (without ``</s>``). Batches get
``net_input["src_phrase_lengths"]`` (B x K, 0-padded), which the model's encoder reads.

Raw input (fairseq-interactive, the hub's ``translate``, fusion-contrastive-score) has no span file:
``--phrase-trees FILE`` (its parse trees) or ``--phrase-parser stanza`` gives its spans (``phrase_spans``).
"""
import os
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import torch
from fairseq.data import BaseWrapperDataset
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask

from ..modules.phrase_segmentation import PHRASE_LENGTHS_KEY
from ..modules.phrase_segmentation import ROUNDINGS
from .phrase_spans import InferenceSpans
from .switchout import SwitchOutConfig, SwitchOutMixin
from ..errors import FusionError

SPAN_SUFFIX = "phrases"


def span_path(data_dir: str, split: str, src: str, tgt: str) -> str:
    return os.path.join(data_dir, f"{split}.{src}-{tgt}.{src}.{SPAN_SUFFIX}")


def format_spans(lengths: Sequence[int]) -> str:
    return " ".join(str(n) for n in lengths)


def read_phrase_spans(path: str, src_sizes: Optional[Sequence[int]] = None) -> List[List[int]]:
    """Phrase lengths per sentence; checked against the binarized source sizes (with ``</s>``)."""
    if not os.path.exists(path):
        raise FusionError(
            f"{path}: no phrase-span file; write it with fusion-parse-spans from one parse tree per source line"
        )
    spans = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            try:
                lengths = [int(tok) for tok in line.split()]
            except ValueError:
                raise FusionError(f"{path} line {i}: expected phrase lengths (positive integers), got {line.strip()!r}")
            if not lengths or min(lengths) <= 0:
                raise FusionError(f"{path} line {i}: expected one or more positive phrase lengths, got {line.strip()!r}")
            if src_sizes is not None and i <= len(src_sizes) and sum(lengths) != src_sizes[i - 1] - 1:
                raise FusionError(
                    f"{path} line {i}: the phrases cover {sum(lengths)} sub-words but source sentence {i} "
                    f"has {src_sizes[i - 1] - 1} (+ </s>): spans written for other data?"
                )
            spans.append(lengths)
    if src_sizes is not None and len(spans) != len(src_sizes):
        raise FusionError(f"{path}: {len(spans)} lines but the binarized source has {len(src_sizes)} sentences")
    return spans


class PhraseSpanDataset(BaseWrapperDataset):
    """Adds each source sentence's phrase lengths to the batch (``net_input["src_phrase_lengths"]``)."""

    def __init__(self, dataset, spans: List[List[int]]):
        super().__init__(dataset)
        self.spans = spans

    def __getattr__(self, name):
        """LanguagePairDataset's attributes (src, tgt, src_sizes, ...) for fairseq-generate and analyses."""
        if name == "dataset":
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __getitem__(self, index):
        item = self.dataset[index]
        item[PHRASE_LENGTHS_KEY] = torch.tensor(self.spans[index], dtype=torch.long)
        return item

    def collater(self, samples, pad_to_length=None):
        batch = self.dataset.collater(samples, pad_to_length=pad_to_length)
        if not batch:
            return batch
        by_id = {int(s["id"]): s[PHRASE_LENGTHS_KEY] for s in samples}
        rows = [by_id[int(i)] for i in batch["id"]]  # the collater sorts the batch
        lengths = torch.zeros(len(rows), max(len(r) for r in rows), dtype=torch.long)
        for b, row in enumerate(rows):
            lengths[b, : len(row)] = row
        batch["net_input"][PHRASE_LENGTHS_KEY] = lengths
        return batch


@dataclass
class TranslationWithPhrasesConfig(SwitchOutConfig):
    phrase_trees: Optional[str] = field(default=None, metadata={
        "help": "inference on raw input (fairseq-interactive, hub translate, contrastive scoring): a file of its parse "
                "trees, one bracketed tree per sentence in the model's tokenization, looked up by the sentence's words"})
    phrase_parser: ChoiceEnum(["none", "stanza"]) = field(default="none", metadata={
        "help": "inference on raw input: parse each source sentence with this parser (stanza: its constituency "
                "parser on the pre-tokenized words; pip install stanza) where --phrase-trees has no tree"})
    phrase_parser_lang: Optional[str] = field(default=None, metadata={"help": "the parser's language (default: --source-lang)"})
    phrase_parser_dir: Optional[str] = field(default=None, metadata={"help": "the parser's model folder (default: its own)"})
    phrase_fallback: ChoiceEnum(["ngram", "error"]) = field(default="ngram", metadata={
        "help": "inference on raw input: a sentence without a usable tree gets n-gram spans (with a warning, "
                "counted) or is an error"})
    phrase_span_rounding: ChoiceEnum(list(ROUNDINGS)) = field(default="ceil", metadata={
        "help": "inference on raw input: the phrase size limit's rounding, as fusion-parse-spans --phrase-size-rounding"})


@register_task("translation_with_phrases", dataclass=TranslationWithPhrasesConfig)
class TranslationWithPhrasesTask(SwitchOutMixin, TranslationTask):
    """Also takes SwitchOut's ``--switchout-tau-src/-tgt`` (replacements keep the lengths, so the spans hold)."""

    _inference_spans = None

    def inference_spans(self) -> Optional[InferenceSpans]:
        """The span source of raw input (None when neither --phrase-trees nor --phrase-parser is given)."""
        cfg = self.cfg
        if self._inference_spans is None and (cfg.phrase_trees or cfg.phrase_parser not in (None, "none")):
            self._inference_spans = InferenceSpans(
                cfg.phrase_trees, cfg.phrase_parser, cfg.phrase_parser_lang or cfg.source_lang, cfg.phrase_parser_dir,
                cfg.phrase_fallback, cfg.phrase_span_rounding)
        return self._inference_spans

    def add_inference_spans(self, dataset, src_tokens):
        """``dataset`` (of the raw sentences ``src_tokens``) with their phrase spans, when a span source is given."""
        spans = self.inference_spans()
        if spans is None:
            return dataset
        eos = self.source_dictionary.eos()
        lines = [self.source_dictionary.string(t[t.ne(eos)] if torch.is_tensor(t) else t) for t in src_tokens]
        return PhraseSpanDataset(dataset, spans(lines))

    def build_dataset_for_inference(self, src_tokens, src_lengths, constraints=None):
        dataset = super().build_dataset_for_inference(src_tokens, src_lengths, constraints=constraints)
        return self.add_inference_spans(dataset, src_tokens)

    def inference_step(self, generator, models, sample, prefix_tokens=None, constraints=None):
        """fairseq-interactive rebuilds each batch from ``src_tokens`` alone: the spans come back here."""
        net_input = sample["net_input"]
        if PHRASE_LENGTHS_KEY not in net_input and self.inference_spans() is not None:
            src = net_input["src_tokens"]
            pad = self.source_dictionary.pad()
            rows = [row[row.ne(pad)] for row in src.cpu()]
            lines = [self.source_dictionary.string(row[row.ne(self.source_dictionary.eos())]) for row in rows]
            spans = self.inference_spans()(lines)
            lengths = torch.zeros(len(spans), max(len(s) for s in spans), dtype=torch.long)
            for b, row in enumerate(spans):
                lengths[b, : len(row)] = torch.tensor(row)
            sample = dict(sample, net_input=dict(net_input, **{PHRASE_LENGTHS_KEY: lengths.to(src.device)}))
        return super().inference_step(generator, models, sample, prefix_tokens=prefix_tokens, constraints=constraints)

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        paths = self.cfg.data.split(os.pathsep)
        data_dir = paths[(epoch - 1) % len(paths)]
        dataset = self.datasets[split]
        path = span_path(data_dir, split, self.cfg.source_lang, self.cfg.target_lang)
        self.datasets[split] = PhraseSpanDataset(dataset, read_phrase_spans(path, dataset.src_sizes))


INFERENCE_OPTIONS = ("phrase_trees", "phrase_parser", "phrase_parser_lang", "phrase_parser_dir", "phrase_fallback",
                     "phrase_span_rounding")


def configure_inference_spans(task, **options):
    """Set the raw-input span options (``INFERENCE_OPTIONS``) on a loaded task: the hub's ``from_pretrained`` and
    fusion-contrastive-score, whose task comes from the checkpoint (which may predate these options)."""
    options = {k: v for k, v in options.items() if v is not None}
    if not options:
        return task
    unknown = sorted(set(options) - set(INFERENCE_OPTIONS))
    if unknown:
        raise FusionError(f"unknown phrase-span options {unknown}; expected some of {list(INFERENCE_OPTIONS)}")
    if not isinstance(task, TranslationWithPhrasesTask):
        raise FusionError(f"{', '.join(options)}: phrase spans of raw input are for parse-tree phrase models, whose task "
                         f"is translation_with_phrases; this checkpoint's task is {type(task).__name__}")
    import contextlib

    from omegaconf import OmegaConf, open_dict

    cfg, defaults = task.cfg, TranslationWithPhrasesConfig()
    with open_dict(cfg) if OmegaConf.is_config(cfg) else contextlib.nullcontext():
        for key in INFERENCE_OPTIONS:  # a task config written before these options existed gets their defaults
            setattr(cfg, key, options.get(key, getattr(cfg, key) if hasattr(cfg, key) else getattr(defaults, key)))
    task._inference_spans = None
    return task

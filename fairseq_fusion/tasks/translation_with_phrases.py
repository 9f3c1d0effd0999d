"""``translation_with_phrases``: translation whose source sentences carry parse-tree phrase spans.

For ``--phrase-segmentation parse`` (Xu et al. 2020, Table 2 "+Parse"). Next to each
binarized source file ``{split}.{src}-{tgt}.{src}.bin`` lies ``{split}.{src}-{tgt}.{src}.phrases``
(written by ``fusion-parse-spans``): one line per sentence, the lengths in BPE sub-words of its
phrases, left to right, summing to the sentence's sub-words (without ``</s>``). Batches get
``net_input["src_phrase_lengths"]`` (B x K, 0-padded), which the model's encoder reads.
"""
import os
from typing import List, Optional, Sequence

import torch
from fairseq.data import BaseWrapperDataset
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationTask

from ..modules.phrase_segmentation import PHRASE_LENGTHS_KEY
from .switchout import SwitchOutConfig, SwitchOutMixin

SPAN_SUFFIX = "phrases"


def span_path(data_dir: str, split: str, src: str, tgt: str) -> str:
    return os.path.join(data_dir, f"{split}.{src}-{tgt}.{src}.{SPAN_SUFFIX}")


def format_spans(lengths: Sequence[int]) -> str:
    return " ".join(str(n) for n in lengths)


def read_phrase_spans(path: str, src_sizes: Optional[Sequence[int]] = None) -> List[List[int]]:
    """Phrase lengths per sentence; checked against the binarized source sizes (with ``</s>``)."""
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path}: no phrase-span file; write it with fusion-parse-spans from one parse tree per source line"
        )
    spans = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            try:
                lengths = [int(tok) for tok in line.split()]
            except ValueError:
                raise ValueError(f"{path} line {i}: expected phrase lengths (positive integers), got {line.strip()!r}")
            if not lengths or min(lengths) <= 0:
                raise ValueError(f"{path} line {i}: expected one or more positive phrase lengths, got {line.strip()!r}")
            if src_sizes is not None and i <= len(src_sizes) and sum(lengths) != src_sizes[i - 1] - 1:
                raise ValueError(
                    f"{path} line {i}: the phrases cover {sum(lengths)} sub-words but source sentence {i} "
                    f"has {src_sizes[i - 1] - 1} (+ </s>): spans written for other data?"
                )
            spans.append(lengths)
    if src_sizes is not None and len(spans) != len(src_sizes):
        raise ValueError(f"{path}: {len(spans)} lines but the binarized source has {len(src_sizes)} sentences")
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


@register_task("translation_with_phrases", dataclass=SwitchOutConfig)
class TranslationWithPhrasesTask(SwitchOutMixin, TranslationTask):
    """Also takes SwitchOut's ``--switchout-tau-src/-tgt`` (replacements keep the lengths, so the spans hold)."""

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        super().load_dataset(split, epoch=epoch, combine=combine, **kwargs)
        paths = self.cfg.data.split(os.pathsep)
        data_dir = paths[(epoch - 1) % len(paths)]
        dataset = self.datasets[split]
        path = span_path(data_dir, split, self.cfg.source_lang, self.cfg.target_lang)
        self.datasets[split] = PhraseSpanDataset(dataset, read_phrase_spans(path, dataset.src_sizes))

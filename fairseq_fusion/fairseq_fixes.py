"""Narrow patches of two fairseq 0.12 bugs that change what users measure.

- ``data_utils.batch_by_size`` drops the last batch when its size is not a multiple of
  ``--required-batch-size-multiple`` (default 8): ``fairseq-generate`` then skips up to 7 test
  sentences, the longest ones (sentences are batched by length), and validation and training
  lose them too (facebookresearch/fairseq issues 5036, 5351). We keep that batch: the batches
  cover ``indices`` in order, so the dropped sentences are the tail of ``indices``; every
  other batch is unchanged.
- ``NGramRepeatBlock`` without its CUDA extension (CPU, and GPU wheels without it) compares the
  last n-1 entries of the whole token buffer, i.e. padding, so ``--no-repeat-ngram-size`` blocks
  nothing (issues 4709, 5206). We pass it the tokens generated so far (``tokens[:, :step + 1]``),
  what the CUDA extension reads.
"""
import numpy as np


def _keep_last_batch(batch_by_size):
    def wrapper(indices, *args, **kwargs):
        batches = batch_by_size(indices, *args, **kwargs)
        covered = sum(len(b) for b in batches)
        if covered < len(indices):
            batches = list(batches) + [np.asarray(indices[covered:], dtype=np.int64)]
        return batches

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _generated_tokens_only(no_repeat_ngram):
    def wrapper(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
        return no_repeat_ngram(self, tokens[:, : step + 1], lprobs, bsz, beam_size, step)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def patch_fairseq():
    from fairseq import ngram_repeat_block
    from fairseq.data import data_utils

    if not getattr(data_utils.batch_by_size, "patched_by_fairseq_fusion", False):
        data_utils.batch_by_size = _keep_last_batch(data_utils.batch_by_size)
    block = ngram_repeat_block.NGramRepeatBlock
    if not getattr(block._no_repeat_ngram, "patched_by_fairseq_fusion", False):
        block._no_repeat_ngram = _generated_tokens_only(block._no_repeat_ngram)

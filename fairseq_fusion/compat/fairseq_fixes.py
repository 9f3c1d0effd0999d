"""Narrow patches of seven fairseq 0.12 bugs that change what users measure (0.12.0-0.12.3; the diverse beam search
bug is in fairseq's main branch too).

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
- ``FP16Optimizer.build_optimizer`` never flattens the fp32 master copy under ``--bf16`` ("faster on TPUs"), so on a
  GPU fairseq's Adam and the gradient norm loop over every parameter: 3940 kernel launches per base-size step against
  1660 with ``--fp16``, 117 against 95 ms per step on an H100 (docs/gpu.md). On CUDA we flatten it as
  ``--fp16`` does (``--fp16-no-flatten-grads`` still turns it off; ``--tpu`` keeps fairseq's choice): the same
  elementwise updates, on one tensor. An optimizer without flat-parameter support keeps the per-parameter copy.
- ``DiverseBeamSearch.step`` keeps its groups' token overlap in one row per sentence of the batch (built at step 0 in
  the batch's order) but reads and writes it at ``original_batch_idxs``, the sentences' dataset ids (``sample["id"]``,
  narrowed as sentences finish): ``--diverse-beam-groups`` ends in ``IndexError`` at step 1 of any batch but the
  first, for every arch (fairseq's tests pass samples without ids, which count 0..bsz-1). We pass it each sentence's
  row in the step-0 batch instead, which is what it indexes.
- ``--encoder-layers-to-keep`` / ``--decoder-layers-to-keep`` are declared ``List[int]``, so fairseq-train's parser
  gives a list ([0, 2]), but ``TransformerModel.build_model`` and ``checkpoint_utils.prune_state_dict`` split the
  string "0,2": ``AttributeError: 'list' object has no attribute 'split'`` for fairseq's ``transformer`` too. Before
  the build we write the list back as that string, in the arguments fairseq keeps (so ``prune_state_dict``, given the
  same arguments at load time, and the saved checkpoint read the string too).
- A model trained with ``--encoder-layers-to-keep 0,2`` from scratch is saved with its kept layers numbered 0, 1 and
  the option still in its configuration, so loading it prunes them again (keeps layer 0, finds no layer 2) and ends
  in "Missing key(s)". ``prune_state_dict`` now leaves a side whose checkpoint already holds exactly as many layers
  as the option keeps (a full model holds more); every other checkpoint is pruned as before.
- ``trainer._catalog_shared_params`` files every module's parameter slot by its value, and a ``Linear(bias=False)``
  holds ``None`` there: every bias-free projection "shares" the output projection's absent bias, and the trainer logs
  one false ``detected shared parameter: ...bias <- ...bias`` line for each (24 with lexical shortcuts). We leave the
  empty slots out; real shared parameters (tied embeddings) are found as before.
"""
import contextlib
import math
import re
from typing import List

import numpy as np
import torch
from omegaconf import OmegaConf, open_dict


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
    """fairseq's ``no_repeat_ngram`` (``NGramRepeatBlock._no_repeat_ngram``) replaced by ``_no_repeat_ngram`` below,
    fairseq's code on ``tokens[:, : step + 1]``: a method of its own (of the same name), not a call of fairseq's with
    ``self`` passed on, so TorchScript compiles it (a scripted ``SequenceGenerator`` with ``no_repeat_ngram_size``)."""
    wrapper = _no_repeat_ngram
    wrapper.patched_by_fairseq_fusion = True
    wrapper.fairseq_no_repeat_ngram = no_repeat_ngram  # fairseq's own
    return wrapper


def _no_repeat_ngram(self, tokens, lprobs, bsz: int, beam_size: int, step: int):
    """For each hypothesis, the tokens that would repeat one of its n-grams get -inf (fairseq's code, but on the
    generated tokens only: fairseq reads every column of ``tokens``, whose unwritten end is padding)."""
    n = self.no_repeat_ngram_size
    banned_tokens = [torch.jit.annotate(List[int], []) for _ in range(bsz * beam_size)]
    if step + 2 - n >= 0:
        cpu_tokens: List[List[int]] = tokens[:, : step + 1].cpu().tolist()
        for bbsz_idx in range(bsz * beam_size):
            ngram_to_check = cpu_tokens[bbsz_idx][-(n - 1):]
            for i in range(step + 2 - n):
                if ngram_to_check == cpu_tokens[bbsz_idx][i: i + n - 1]:
                    banned_tokens[bbsz_idx].append(cpu_tokens[bbsz_idx][i + n - 1])
    for bbsz_idx in range(bsz * beam_size):
        lprobs[bbsz_idx][torch.tensor(banned_tokens[bbsz_idx], dtype=torch.int64)] = torch.tensor(-math.inf).to(lprobs)
    return lprobs


def _flat_bf16_on_cuda(build_optimizer):
    def wrapper(cls, cfg, params, **kwargs):
        import torch
        from fairseq import optim

        common = cfg.common
        if not (getattr(common, "bf16", False) and not getattr(common, "tpu", False)
                and not getattr(common, "fp16_no_flatten_grads", False) and torch.cuda.is_available()):
            return build_optimizer.__func__(cls, cfg, params, **kwargs)
        params = list(params)
        fp32_params = cls.build_fp32_params(cfg.optimizer, params, flatten=True)
        fp32_optimizer = optim.build_optimizer(cfg.optimizer, [fp32_params])
        if not fp32_optimizer.supports_flat_params:
            return build_optimizer.__func__(cls, cfg, params, **kwargs)
        return cls(cfg, params, fp32_optimizer, fp32_params, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    wrapper.fairseq_build_optimizer = build_optimizer  # fairseq's own (tests compare with it)
    return classmethod(wrapper)


def _layers_to_keep_as_text(build_model):
    def wrapper(cls, args, task, *rest, **kwargs):
        for side in ("encoder", "decoder"):
            keep = getattr(args, f"{side}_layers_to_keep", None)
            if keep is not None and not isinstance(keep, str):  # a list, or an OmegaConf ListConfig
                setattr(args, f"{side}_layers_to_keep", ",".join(str(layer) for layer in keep))
        return build_model(cls, args, task, *rest, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    return classmethod(wrapper)


def _prune_unpruned_only(prune_state_dict):
    def wrapper(state_dict, model_cfg):
        for side in ("encoder", "decoder"):
            keep = getattr(model_cfg, f"{side}_layers_to_keep", None) if model_cfg else None
            if not isinstance(keep, str) or not keep:
                continue
            layers = {m.group(1) for m in map(re.compile(rf"^{side}.*\.layers\.(\d+)").search, state_dict) if m}
            if len(layers) == len(keep.split(",")):  # already pruned (what prune_state_dict would then set)
                with open_dict(model_cfg) if OmegaConf.is_config(model_cfg) else contextlib.nullcontext():
                    setattr(model_cfg, f"{side}_layers_to_keep", None)
        return prune_state_dict(state_dict, model_cfg)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _overlap_rows_not_ids(step_fn):
    def wrapper(self, step, lprobs, scores, prev_output_tokens=None, original_batch_idxs=None):
        if original_batch_idxs is not None:
            if step == 0:
                self.fusion_step0_ids = original_batch_idxs
            # the row of each remaining sentence in the step-0 batch (ids are unique in a batch)
            original_batch_idxs = (original_batch_idxs.unsqueeze(1) == self.fusion_step0_ids).int().argmax(1)
        return step_fn(self, step, lprobs, scores, prev_output_tokens, original_batch_idxs)

    wrapper.patched_by_fairseq_fusion = True
    wrapper.fairseq_step = step_fn  # fairseq's own (tests compare with it)
    return wrapper


def _real_parameters_only(catalog_shared_params):
    """fairseq's catalog of shared parameters without the ``None`` slots of bias-free modules."""
    def wrapper(module, memo=None, prefix=""):
        if memo is not None:  # fairseq's own recursion
            return catalog_shared_params(module, memo, prefix)
        memo = {}
        catalog_shared_params(module, memo, prefix)
        return [names for param, names in memo.items() if param is not None and len(names) > 1]

    wrapper.patched_by_fairseq_fusion = True
    return wrapper

"""One arch in one dtype, in this process: what ``fairseq-train --fp16`` / ``--bf16`` and ``fairseq-generate`` do.

The arguments are parsed by fairseq-train's own parser (``train_argv`` is the command line), the model is trained
by fairseq's ``Trainer`` (fp32, or FP16Optimizer with fp32 master weights for ``--fp16`` and ``--bf16``), for exactly
``updates`` updates (an update skipped for gradient overflow is retried on the next batch, as fairseq-train does,
and counted); then fairseq's validation loss over the whole valid split (``valid_loss``, bits per token, through
the task's ``valid_step`` and ``reduce_metrics``), and the first test sentences decoded by the task's generator
(``inference_step``, as fairseq-generate), detokenized and scored with sacreBLEU against the raw references.
Running every arch and dtype in one process saves fairseq-train's start-up (imports, CUDA context, data loading:
about 5 s a run, 35 archs x 3 dtypes would spend 9 of the 10 minutes on it).
"""
import argparse
import math
import os
import time

from ..fairseq_runs import COMMON, SIZES, TRAINING
from ..data_paths import PLUGIN_DIR

VALID_MAX_TOKENS = 12000  # the valid split in a few batches (forward only, no activations kept)
DTYPE_FLAGS = {"fp32": [], "fp16": ["--fp16"], "bf16": ["--bf16"]}
# fairseq 0.12's parser turns --bf16 into --tpu as well (torch_xla), which stops fairseq-train on a GPU or CPU; the
# check resets it, as a fairseq-hydra-train config with common.bf16 and no common.tpu does
BF16_NOTE = ("bf16 runs are fairseq-train's --bf16 with --tpu reset: fairseq 0.12's parser sets --tpu with --bf16, "
             "and fairseq-train --bf16 then stops in torch_xla (fairseq-hydra-train with common.bf16=true does not)")


def train_argv(data, arch, dtype, size="small", updates=30, seed=1, cpu=False):
    """fairseq-train's arguments (after the executable) for one run: ``make demo``'s settings at ``size``."""
    from fairseq_fusion import fusion_options

    criterion = fusion_options.default_criterion(arch)
    argv = [data, "--user-dir", PLUGIN_DIR, "--task", "translation", "--arch", arch,
            *SIZES[size], *COMMON, *TRAINING[size], "--criterion", criterion,
            *(["--label-smoothing", "0.1"] if "label_smoothed" in criterion else []),
            "--max-update", str(updates), "--seed", str(seed), "--num-workers", "0", "--disable-validation", "--no-save",
            *DTYPE_FLAGS[dtype]]
    if cpu:  # the smoke mode; fairseq's flat fp32 master copy of --fp16 calls torch.cuda
        argv += ["--cpu"] + (["--fp16-no-flatten-grads"] if dtype == "fp16" else [])
    return argv


def parse(argv):
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf

    args = options.parse_args_and_arch(options.get_training_parser(), argv)
    args.tpu = False  # see BF16_NOTE
    return convert_namespace_to_omegaconf(args)


def setup_task(data, cpu=False):
    """The translation task with train, valid and test loaded: shared by every run (the same data and dictionaries)."""
    from fairseq import tasks

    cfg = parse(train_argv(data, "fusion_transformer", "fp32", cpu=cpu))
    task = tasks.setup_task(cfg.task)
    for split in ("train", "valid", "test"):
        task.load_dataset(split, combine=False, epoch=1)
    return task


def _sync(cuda):
    if cuda:
        import torch
        torch.cuda.synchronize()


def valid_loss(trainer, task, cuda):
    """fairseq's valid_loss (bits per token: the criterion's loss over the target tokens, as fairseq-train reports
    it) of the trainer's model over the whole valid split."""
    import torch
    from fairseq import metrics, utils

    model, criterion = trainer.get_model(), trainer.get_criterion()
    model.eval()
    criterion.eval()
    itr = task.get_batch_iterator(
        dataset=task.dataset("valid"), max_tokens=VALID_MAX_TOKENS,
        max_positions=utils.resolve_max_positions(task.max_positions(), model.max_positions()),
        ignore_invalid_inputs=False, seed=1, disable_iterator_cache=True).next_epoch_itr(shuffle=False)
    logs = []
    with torch.no_grad():
        for sample in itr:
            sample = utils.move_to_cuda(sample) if cuda else sample
            logs.append(task.valid_step(sample, model, criterion)[2])
    with metrics.aggregate(new_root=True) as agg:
        task.reduce_metrics(logs, criterion)
        return float(agg["loss"].avg)  # as fairseq logs it, before rounding to 3 decimals


def decode_bleu(task, model, data, sentences, beam, cuda, batch_size=100):
    """sacreBLEU of the first ``sentences`` test sentences, decoded as fairseq-generate does (detokenized)."""
    import torch
    from fairseq import utils

    from ..scoring import evaluation
    from fairseq_fusion.encoders.prepared import _manifest

    manifest = _manifest(data)
    dataset, tgt_dict = task.dataset("test"), task.target_dictionary
    n = min(sentences, len(dataset))
    model.eval()
    generator = task.build_generator([model], argparse.Namespace(beam=beam, max_len_a=1.2, max_len_b=10))
    hyps = [None] * n
    with torch.no_grad():
        for start in range(0, n, batch_size):
            sample = dataset.collater([dataset[i] for i in range(start, min(n, start + batch_size))])
            sample = utils.move_to_cuda(sample) if cuda else sample
            for i, hypos in zip(sample["id"].tolist(), task.inference_step(generator, [model], sample)):
                hyps[i] = tgt_dict.string(hypos[0]["tokens"].int().cpu(), "subword_nmt")
    target = manifest["target_lang"]
    hyps = evaluation.detokenize(hyps, target, detruecase=bool(manifest.get("truecase")))
    refs = evaluation.read_lines(os.path.join(data, "tok", f"test.raw.{target}"))[:n]
    score = evaluation.score(hyps, refs, target, detok_only=True)["sacrebleu"]
    return {"bleu": score["score"], "bleu_signature": score["signature"], "sentences": n, "first_hypothesis": hyps[0]}


def train_and_decode(task, data, arch, dtype, size="small", updates=30, seed=1, cpu=False, decode_sentences=100,
                     beam=5, initial_valid=False):
    """Train ``arch`` in ``dtype`` for ``updates`` updates on the task's data, then validate and decode; the figures."""
    import numpy as np
    import torch
    from fairseq import utils
    from fairseq.trainer import Trainer

    cuda = not cpu
    cfg = parse(train_argv(data, arch, dtype, size, updates, seed, cpu))
    np.random.seed(seed)  # as fairseq-train does before building the model: every dtype starts from the same weights
    utils.set_torch_seed(seed)
    model = task.build_model(cfg.model)
    params = sum(p.numel() for p in model.parameters())
    trainer = Trainer(cfg, task, model, task.build_criterion(cfg.criterion))
    result = {"params": params}
    if initial_valid:
        result["initial_valid_loss"] = valid_loss(trainer, task, cuda)
    epoch_itr = trainer.get_train_iterator(epoch=1, load_dataset=False, disable_iterator_cache=True)
    trainer.begin_epoch(epoch_itr.epoch)
    losses, skipped, steps, words, t0 = [], 0, 0, 0, None
    start = time.perf_counter()
    while trainer.get_num_updates() < updates and steps < 2 * updates + 10:  # a bound on repeated overflows
        itr = epoch_itr.next_epoch_itr(shuffle=True)
        for sample in itr:
            if steps == 1:  # the first update (allocator, kernels' first calls) is not timed
                _sync(cuda)
                t0, words = time.perf_counter(), 0
            log = trainer.train_step([sample])
            steps += 1
            words += int(sample["ntokens"])
            if log is None:  # gradient overflow: the update is skipped
                skipped += 1
            else:
                losses.append(float(log["loss"]))
            if trainer.get_num_updates() >= updates or steps >= 2 * updates + 10:
                break
    _sync(cuda)
    elapsed = time.perf_counter() - (t0 if t0 is not None else start)
    result.update(updates=trainer.get_num_updates(), skipped_updates=skipped,
                  train_loss=losses[-1] if losses else math.nan, first_train_loss=losses[0] if losses else math.nan,
                  words_per_s=words / elapsed if elapsed > 0 else None, train_s=time.perf_counter() - start)
    scaler = getattr(trainer.optimizer, "scaler", None)
    if scaler is not None:
        result["loss_scale"] = float(scaler.loss_scale)
    result["valid_loss"] = valid_loss(trainer, task, cuda)
    result.update(decode_bleu(task, trainer.get_model(), data, decode_sentences, beam, cuda))
    result["seconds"] = time.perf_counter() - start
    del trainer, model
    if cuda:
        torch.cuda.empty_cache()
    return result

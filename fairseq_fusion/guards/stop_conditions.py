"""When a training stops: its budgets, and a divergence said as what it is.

Budgets are options with domains (``option_domains``, docs/usage.md "When a training stops"): fairseq gives 0 a
meaning, and the plugin keeps it: ``--max-update 0``, ``--max-epoch 0`` and ``--stop-time-hours 0`` mean no limit, so a
training with all three at 0 (fairseq's defaults) runs until it is stopped; a negative, NaN or infinite one is refused.

Divergence (``Trainer.train_step``): fairseq raises ``FloatingPointError`` when the gradients are NaN or infinite
("gradients are Nan/Inf") or when fp16's loss scale has fallen to ``--min-loss-scale`` ("Minimum loss scale
reached"), saves ``crash.pt``, re-runs the step under its ``NanDetector`` (which logs the first module whose output is
NaN) and ends in that exception's traceback, or in a ``StopIteration`` from the detector's hooks, which cannot read
the dict the encoders return. In a command-line run this is one line naming the update and the flags that likely
caused it, with their values.
"""
import functools

from ..errors import FusionError

MIN_LOSS_SCALE = "Minimum loss scale reached"
NAN_GRADIENTS = "gradients are Nan/Inf"
INCONSISTENT = "gradients are inconsistent between workers"


def _divergence(error):
    """The ``FloatingPointError`` of a diverged step: ``error`` itself, or the one a ``StopIteration`` of fairseq's
    NanDetector re-run interrupted; None for any other error."""
    seen = error
    while seen is not None:
        if isinstance(seen, FloatingPointError):
            return seen
        seen = seen.__context__
    return None


def divergence_line(error, trainer, update):
    """One line for fairseq's ``FloatingPointError`` at ``update``: what went non-finite and the flags to change."""
    import os

    cfg = trainer.cfg
    message = str(error)
    if INCONSISTENT in message:
        return (f"update {update}: the gradients differ between the ranks (fairseq's check); try --ddp-backend "
                "legacy_ddp, or GPUs of one generation")
    lr = list(cfg.optimization.lr) if not isinstance(cfg.optimization.lr, (int, float)) else [cfg.optimization.lr]
    lr = ",".join(f"{v:g}" for v in lr)
    warmup = getattr(cfg.lr_scheduler, "warmup_updates", None) if cfg.lr_scheduler is not None else None
    clip = cfg.optimization.clip_norm
    flags = [f"a lower --lr (now {lr})"]
    if warmup is not None:
        flags.append(f"a longer --warmup-updates (now {warmup})")
    flags.append(f"--clip-norm (now {clip:g})" if clip else "--clip-norm 0.1 (now none)")
    crash = os.path.join(cfg.checkpoint.save_dir, "crash.pt")
    saved = f"; fairseq saved the model before this update to {crash}" if os.path.exists(crash) else ""
    if MIN_LOSS_SCALE in message:
        scale = cfg.common.min_loss_scale
        return (f"training diverged at update {update}: the fp16 loss scale fell to --min-loss-scale {scale:g}, the "
                f"loss overflows fp16 at every scale; try {', '.join(flags)}, --bf16, or fp32 (no --fp16){saved}")
    precision = " in fp16" if cfg.common.fp16 else " in bf16" if cfg.common.bf16 else ""
    return (f"training diverged at update {update}: the loss or its gradients are NaN or infinite{precision}; try "
            f"{', '.join(flags)}{saved}")


def _named_divergence(train_step):
    """``Trainer.train_step`` whose divergence (``FloatingPointError``, or the ``StopIteration`` fairseq's NanDetector
    re-run ends in) is one line naming the update and the likely flags."""
    @functools.wraps(train_step)
    def wrapper(self, samples, *args, **kwargs):
        update = self.get_num_updates() + 1
        try:
            return train_step(self, samples, *args, **kwargs)
        except (FloatingPointError, StopIteration) as e:
            diverged = _divergence(e)
            if diverged is None:
                raise
            raise FusionError(divergence_line(diverged, self, update)) from e

    wrapper.patched_by_fairseq_fusion = True
    return wrapper

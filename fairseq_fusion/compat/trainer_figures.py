"""``--fusion-log-internals`` under fairseq's ``Trainer``: the figures reduced across ranks as fairseq reduces ``loss``.

Two wraps (``global_changes.py``, scope ``plugin``: a trainer of a plugin model, or any in a command-line run):

- ``Trainer._aggregate_logging_outputs`` (called only with more than one rank): the model's figures since the last
  update (``internals.take``: sums and forward counts) join the first logging output before fairseq sums the
  outputs across ranks (``all_reduce_dict``, device tensors in one buffer, no host sync) or gathers them
  (``all_gather_list``). fairseq zeroes (or drops) a rank's outputs for a dummy batch, the figures with them. A
  training forward under LayerDrop is left out (a rank that skips a layer records fewer figures, and the summed
  buffers must match in size): its figures stay rank-local and the next wrap logs them (rank 0's are printed).
- ``Trainer._reduce_and_log_stats``: figures not yet taken (one rank) join the outputs; each figure's mean over
  the forwards is logged (``internals.log_means``) into the aggregators open around the call (``train_inner``,
  ``train``, validation's), before fairseq opens its own per-update aggregator, whose values it reads at every
  update (``.item()``): the figures are read only at the log interval. The criterion and task reduce the outputs
  without the figures' entries.
"""
import functools

from ..modules import internals


def _figures_reduced(aggregate):
    @functools.wraps(aggregate)
    def wrapper(self, logging_outputs, *extra_stats_to_sum, ignore=False):
        model = getattr(self, "_model", None)
        if logging_outputs and not internals.varies_across_ranks(model):
            figures = internals.take(model)
            if figures:
                logging_outputs = [{**logging_outputs[0], **figures}, *logging_outputs[1:]]
        return aggregate(self, logging_outputs, *extra_stats_to_sum, ignore=ignore)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _figures_logged(reduce_and_log):
    @functools.wraps(reduce_and_log)
    def wrapper(self, logging_outputs, *args, **kwargs):
        figures = internals.take(getattr(self, "_model", None))
        if logging_outputs is not None:
            outputs = list(logging_outputs) + ([figures] if figures else [])
            internals.log_means(outputs)
            logging_outputs = internals.without_figures(logging_outputs)
        return reduce_and_log(self, logging_outputs, *args, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper

"""fusion-benchmark's memory measure: the peak tensor memory of one training step (``step_memory``; the module
docstring of ``benchmark/command.py`` says how), and the batch with the most attention-score elements
(``--memory-only``)."""


def _tensor_bytes(tensors, device_type):
    """Bytes of the distinct storages of ``tensors`` on ``device_type`` (views counted once)."""
    import torch
    seen, total = set(), 0
    for t in tensors:
        if torch.is_tensor(t) and t.device.type == device_type:
            storage = t.untyped_storage()
            if storage.data_ptr() not in seen:
                seen.add(storage.data_ptr())
                total += storage.nbytes()
    return total


def held_state_bytes(trainer, device_type="cpu"):
    """Parameters, their gradients and the optimizer state (model and criterion) the trainer holds."""
    params = list(trainer.model.parameters()) + list(trainer.criterion.parameters())
    tensors = params + [p.grad for p in params if p.grad is not None]
    optimizer = getattr(trainer, "_optimizer", None)  # None before the first step (fairseq builds it lazily)
    if optimizer is not None:
        for state in optimizer.optimizer.state.values():
            tensors += [v for v in state.values()]
    return _tensor_bytes(tensors, device_type)


def profiled_peak_increase(fn):
    """Run ``fn()`` under ``torch.profiler`` with ``profile_memory=True``; return the peak of the CPU
    tensor bytes allocated over the level at the start (allocations minus frees, in time order; a
    tensor allocated before and freed during ``fn`` counts negative), and the net change at the end.
    Exact sizes the allocator was asked for: independent of malloc's caching and of RSS."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(((e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]" and e.device_type() == DeviceType.CPU), key=lambda x: x[0])
    level = peak = 0
    for _, nbytes in events:
        level += nbytes
        peak = max(peak, level)
    return peak, level


def step_memory(trainer, sample, cuda):
    """Peak memory (MB) of one ``trainer.train_step([sample])``, with what was held before it."""
    import torch
    # what train_step does first; done here so that the previous step's gradients are not counted as held (the
    # profiler cannot see the release of a block allocated before it started, so they would count twice on CPU)
    trainer.zero_grad()
    if cuda:
        torch.cuda.synchronize()
        held = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        trainer.train_step([sample])
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        measure = "torch.cuda.max_memory_allocated, reset before the step"
    else:
        held = held_state_bytes(trainer, "cpu")
        increase, _ = profiled_peak_increase(lambda: trainer.train_step([sample]))
        peak = held + increase
        measure = ("parameters + optimizer state held at the step's start + peak of the tensor bytes the step allocates "
                   "on top (torch.profiler, profile_memory=True)")
    return {"peak_train_step_mb": peak / 2**20, "held_at_step_start_mb": held / 2**20,
            "step_increase_mb": (peak - held) / 2**20, "memory_measure": measure}


def batch_shape(sample):
    return {"sentences": int(sample["nsentences"]), "src_len": int(sample["net_input"]["src_tokens"].size(1)),
            "tgt_len": int(sample["target"].size(1)), "target_tokens": int(sample["ntokens"])}


def longest_batch(task, epoch_itr, split="train"):
    """The batch of the epoch with the most attention-score elements, sentences x longest length^2: long
    sentences in a full ``--max-tokens`` batch, where attention and per-token states cost most."""
    dataset = task.dataset(split)
    batches = epoch_itr.frozen_batches

    def key(i):
        b = batches[i]
        length = max(int(dataset.src_sizes[b].max()), int(dataset.tgt_sizes[b].max()))
        return len(b) * length * length

    best = max(range(len(batches)), key=key)
    return dataset.collater([dataset[j] for j in batches[best]])

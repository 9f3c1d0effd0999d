"""fusion-benchmark's worker (``python -m fairseq_fusion_tools.benchmark --worker``, a fresh process per run):
one arch trained with fairseq's ``Trainer`` and decoded at a forced length, timed, its memory and FLOPs counted."""
import time

from ..fairseq_runs import SIZES, count_flops
from .memory import batch_shape, longest_batch, step_memory


def measure(args):
    """Runs in the worker process: returns the metrics of one arch."""
    import torch
    from fairseq import options, tasks
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.sequence_generator import SequenceGenerator
    from fairseq.trainer import Trainer
    from fairseq import utils

    import fairseq_fusion  # noqa: F401
    from fairseq_fusion import fusion_options

    from .decode_profile import profile_decoding

    cuda = torch.cuda.is_available() and not args.cpu
    criterion = fusion_options.default_criterion(args.arch)  # label_smoothed_cross_entropy for transformer
    argv = [args.data, "--task", "translation", "--arch", args.arch, *SIZES[args.size], "--share-all-embeddings",
            "--optimizer", "adam", "--lr", "5e-4", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100",
            "--criterion", criterion, "--label-smoothing", "0.1", "--max-tokens", str(args.max_tokens),
            "--seed", "1", "--num-workers", "0", "--dropout", "0.1"]
    argv += ["--fp16"] if cuda and args.fp16 else (["--cpu"] if not cuda else [])
    parser = options.get_training_parser()
    targs = options.parse_args_and_arch(parser, argv)
    cfg = convert_namespace_to_omegaconf(targs)
    utils.set_torch_seed(1)
    task = tasks.setup_task(cfg.task)
    task.load_dataset("train")
    model = task.build_model(cfg.model)
    n_params = sum(p.numel() for p in model.parameters())
    crit = task.build_criterion(cfg.criterion)
    trainer = Trainer(cfg, task, model, crit)
    epoch_itr = trainer.get_train_iterator(epoch=1, load_dataset=False)
    if args.decode_profile:
        return {"arch": args.arch, "params": n_params, "size": args.size, "device": "cuda" if cuda else "cpu",
                **profile_decoding(args, task, trainer.get_model().eval(), cuda)}
    if args.memory_only:
        sample = longest_batch(task, epoch_itr)
        trainer.train_step([sample])  # builds the optimizer and its state: the measured step is a steady one
        return {"arch": args.arch, "params": n_params, **step_memory(trainer, sample, cuda), "batch": batch_shape(sample),
                "device": "cuda" + (" fp16" if args.fp16 else "") if cuda else "cpu", "size": args.size,
                "max_tokens": args.max_tokens}
    itr = epoch_itr.next_epoch_itr(shuffle=True)
    words, t0 = 0, None
    for i, sample in enumerate(itr):
        if i == args.warmup_updates:
            if cuda:
                torch.cuda.synchronize()
            t0, words = time.perf_counter(), 0
        trainer.train_step([sample])
        words += sample["ntokens"]
        if i + 1 >= args.warmup_updates + args.updates:
            break
    if cuda:
        torch.cuda.synchronize()
    train_wps = words / (time.perf_counter() - t0)

    train_sample = sample
    # one more step on the last batch, after the timing; deterministic, so measured in the first round only
    memory = step_memory(trainer, sample, cuda) if args.measure_memory else {}

    task.load_dataset(args.gen_subset)
    dataset = task.dataset(args.gen_subset)
    gen_model = trainer.get_model().eval()
    order = dataset.ordered_indices()
    order = order[order < args.decode_sentences]
    batches = dataset.batch_by_size(order, max_sentences=args.decode_batch_size)
    decode_sps, flops = {}, {}
    for beam in (int(b) for b in args.beams.split(",")):
        # forced length: EOS is blocked before step L and forced at step L, for every arch alike
        generator = SequenceGenerator([gen_model], task.target_dictionary, beam_size=beam, max_len_a=0,
                                      max_len_b=args.decode_length, min_len=args.decode_length)
        n_sent, t0 = 0, time.perf_counter()
        with torch.no_grad():
            for batch in batches:
                sample = dataset.collater([dataset[j] for j in batch])
                if cuda:
                    sample = utils.move_to_cuda(sample)
                hypos = generator.generate([gen_model], sample)
                n_sent += len(batch)
        if cuda:
            torch.cuda.synchronize()
        decode_sps[str(beam)] = n_sent / (time.perf_counter() - t0)
        assert all(len(h[0]["tokens"]) == args.decode_length + 1 for h in hypos), "forced length not reached"
        if args.count_flops:
            first = dataset.collater([dataset[j] for j in batches[0]])
            flops.setdefault("decode_per_token", {})[str(beam)] = count_flops(
                lambda: generator.generate([gen_model], utils.move_to_cuda(first) if cuda else first), no_grad=True
            ) / (len(batches[0]) * (args.decode_length + 1))
    if args.count_flops:  # the same training batch for every arch (same data, seed and --max-tokens)
        flops["train_per_token"] = count_flops(lambda: trainer.train_step([train_sample])) / float(train_sample["ntokens"])
        flops["operators"] = step_operators(trainer, train_sample)
    result = {
        "arch": args.arch, "params": n_params, "train_words_per_s": train_wps, "decode_sentences_per_s": decode_sps,
        **memory, "memory_batch": batch_shape(train_sample), "device": "cuda" + (" fp16" if args.fp16 else "") if cuda else "cpu",
        "size": args.size, "updates_measured": args.updates, "sentences_decoded": n_sent, "decode_length": args.decode_length,
    }
    if flops:
        result["flops"] = flops
    return result


def count_operators(fn):
    """Operators ``fn()`` dispatches, views left out (a view launches no kernel): on a GPU about one kernel launch
    each, so a step bound by the host's launches takes time in proportion to this count, not to its FLOPs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        kernels = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.kernels += not func.is_view
            return func(*args, **(kwargs or {}))

    with Count() as counter:
        fn()
    return counter.kernels


def step_operators(trainer, sample):
    """Operators of one training step: the model's forward and backward (the criterion's loss included), and the
    whole ``train_step`` (the optimizer too: a few per parameter tensor, or a few in all with a flat master copy)."""
    model, criterion = trainer.model, trainer.criterion
    prepared, _ = trainer._prepare_sample(sample)  # on the model's device, as train_step passes it
    model.train()

    def forward_backward():
        loss, _, _ = criterion(model, prepared)
        loss.backward()

    counts = {"forward_backward": count_operators(forward_backward)}
    trainer.zero_grad()
    counts["train_step"] = count_operators(lambda: trainer.train_step([sample]))
    return counts

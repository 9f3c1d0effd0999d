"""Where decoding time goes: the model's share of ``SequenceGenerator.generate`` and the search's.

fairseq's generator calls its ``EnsembleModel`` for the encoder (once per batch), the decoder (once
per step) and the reorders of the encoder output and incremental state (once per step); the rest
of the time is the search itself (scores, top-k, finished hypotheses), which does not depend on the
model. Timing those four calls splits decoding into model time and search time, so a measured speed
ratio can be compared with what the FLOP count predicts for the model part alone.
"""
import time
from contextlib import contextmanager

from ..fairseq_runs import count_flops

PARTS = ("forward_encoder", "forward_decoder", "reorder_encoder_out", "reorder_incremental_state")


@contextmanager
def timed_model_calls(generator, cuda=False):
    """Within the block, ``seconds[part]`` accumulates the time of each of the generator's model calls."""
    import torch

    model = generator.model
    seconds = {part: 0.0 for part in PARTS}
    originals = {part: getattr(model, part) for part in PARTS}

    def wrap(part, fn):
        def timed(*args, **kwargs):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            if cuda:
                torch.cuda.synchronize()
            seconds[part] += time.perf_counter() - t0
            return out
        return timed

    for part, fn in originals.items():
        setattr(model, part, wrap(part, fn))
    try:
        yield seconds
    finally:
        for part in PARTS:  # the instance attributes go; the class methods are back
            delattr(model, part)


def split_decode_time(generate_all, generator, cuda=False):
    """Run ``generate_all()`` with the model calls timed: {total_s, model_s, search_s, <part>_s}."""
    import torch

    with timed_model_calls(generator, cuda) as seconds:
        t0 = time.perf_counter()
        generate_all()
        if cuda:
            torch.cuda.synchronize()
        total = time.perf_counter() - t0
    model = sum(seconds.values())
    return {"total_s": total, "model_s": model, "search_s": total - model, **{f"{k}_s": v for k, v in seconds.items()}}


@contextmanager
def timed_decoder_ffn(model, cuda=False):
    """Within the block, ``seconds["ffn"]`` accumulates the time of every decoder layer's feed-forward sub-layer
    (from ``fc1``'s input to ``fc2``'s output: fc1, activation, dropout, fc2); 0 for a decoder without one."""
    import torch

    seconds, start, handles = {"ffn": 0.0}, {}, []

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def pre(module, inputs):
        sync()
        start["t"] = time.perf_counter()

    def post(module, inputs, output):
        sync()
        seconds["ffn"] += time.perf_counter() - start.pop("t")

    for layer in model.decoder.layers:
        if getattr(layer, "fc1", None) is not None and getattr(layer, "fc2", None) is not None:
            handles += [layer.fc1.register_forward_pre_hook(pre), layer.fc2.register_forward_hook(post)]
    try:
        yield seconds
    finally:
        for h in handles:
            h.remove()


def predicted_ratio(base_split, flop_ideal):
    """Decode speed ratio if the model part ran at its FLOP-ideal speed-up and the search cost stayed the
    transformer's: 1 / (model_share / flop_ideal + search_share)."""
    share = base_split["model_s"] / base_split["total_s"]
    return 1.0 / (share / flop_ideal + (1.0 - share))


def decode_profile_table(results):
    """Markdown: per arch (after its transformer run), the model's share of decoding time, the model-time and
    total speed ratios, the FLOP-ideal ratio and what it predicts for the total with the search cost unchanged."""
    lines = ["| arch | beam | transformer: model / search share | model-time ratio | FLOP-ideal | "
             "predicted decode ratio | measured (this run) | transformer: FFN share of decoder time | "
             "decoder-time ratio without the FFN time |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for base, r in zip(results[0::2], results[1::2]):
        b, a = base["decode_split"], r["decode_split"]
        ideal = base["decode_flops_per_token"] / r["decode_flops_per_token"]
        share = b["model_s"] / b["total_s"]
        lines.append(f"| {r['arch']} | {r['beam']} | {share:.2f} / {1 - share:.2f} | {b['model_s'] / a['model_s']:.2f} | "
                     f"{ideal:.2f} | {predicted_ratio(b, ideal):.2f} | {b['total_s'] / a['total_s']:.2f} | "
                     + _ffn_columns(base, r))
    return "\n".join(lines)


def _ffn_columns(base, r):
    b = base["decode_split"]
    if "ffn_s" not in b:
        return "- | - |"
    # if an arch saved exactly the transformer's FFN time (the simplified decoder drops the FFN), its decoder
    # steps would take forward_decoder - ffn: the ratio that removing the FFN's measured time gives
    return (f"{b['ffn_s'] / b['forward_decoder_s']:.2f} | "
            f"{b['forward_decoder_s'] / (b['forward_decoder_s'] - b['ffn_s']):.2f} |")


def profile_decoding(args, task, model, cuda):
    """Decoding time split into the model's calls and the search, and FLOPs per token."""
    import torch
    from fairseq import utils
    from fairseq.sequence_generator import SequenceGenerator

    task.load_dataset(args.gen_subset)
    dataset = task.dataset(args.gen_subset)
    order = dataset.ordered_indices()
    batches = dataset.batch_by_size(order[order < args.decode_sentences], max_sentences=args.decode_batch_size)
    samples = [dataset.collater([dataset[j] for j in b]) for b in batches]
    samples = [utils.move_to_cuda(s) for s in samples] if cuda else samples
    beam = int(args.beams.split(",")[0])
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=beam, max_len_a=0,
                                  max_len_b=args.decode_length, min_len=args.decode_length)

    def run():
        with torch.no_grad():
            for sample in samples:
                generator.generate([model], sample)

    run()  # warm-up
    split = split_decode_time(run, generator, cuda)
    with timed_decoder_ffn(model, cuda) as ffn:  # a second pass: the decoder's FFN sub-layers timed
        run()
    split["ffn_s"] = ffn["ffn"]
    flops = count_flops(lambda: generator.generate([model], samples[0]), no_grad=True)
    tokens = len(batches[0]) * (args.decode_length + 1)
    return {"beam": beam, "sentences": int(sum(len(b) for b in batches)), "decode_length": args.decode_length,
            "decode_split": split, "decode_flops_per_token": flops / tokens}

"""``fusion-gpu-speed --stages compile``: each arch trained eager and compiled on the same batches, over a real run.

Per dtype (the first first), per arch of ``--compile-archs`` (fairseq's ``transformer`` first, its forward compiled
by ``torch.compile``; every other arch through the plugin's ``--fusion-compile``), two runs of ``--compile-updates``
updates from the same seed on the same batches: eager, then compiled with ``--compile-backend`` and
``--compile-random``. Per run: words/s and ms per step after the first ``--compile-warmup-steps``, the seconds spent
compiling (the steps that built a graph, less a timed step each), graphs built and recompiles (graphs built after
the first update) over the whole run,
graph breaks, kernel launches per step (CUDA), peak memory (CUDA) and per step the logged loss; per compiled run the
loss differences to its eager run (first step; largest; mean over the timed steps) and the speed-up, and per arch
its words/s over eager ``transformer``'s in the same dtype. Stops before a pair of runs would pass the budget and
says which are left (run them with ``--compile-archs``).
"""
import statistics
import time


def settings(args, cuda):
    """(backend, random mode): inductor on CUDA unless ``--compile-backend`` says otherwise; the smoke mode traces."""
    return args.compile_backend or ("inductor" if cuda else "eager"), args.compile_random


def one_run(args, task, data, arch, dtype, mode, backend, random, cuda):
    """One training run of ``args.compile_updates`` updates: its record (without the comparison to eager)."""
    import torch
    from . import speed_measure as m

    m.reset_compiler()
    compiled = mode == "compiled"
    extra = ["--fusion-compile", backend, "--fusion-compile-random", random] if compiled and arch != "transformer" else []
    trainer, itr = m.build_trainer(task, data, arch, dtype, args.size, args.max_tokens[0], not cuda, extra=extra)
    if compiled and arch == "transformer":  # fairseq's own model: no plugin option, its forward compiled directly
        m.compile_forward(trainer.model, backend, random)
    stream = m.batches(itr)  # the same seed, so the same batches in the same order in both modes
    samples = [next(stream) for _ in range(args.compile_updates)]
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    losses, seconds, built = [], [], []
    for sample in samples:
        before = m.graphs_built()
        loss, s = m.logged_step(trainer, sample, cuda)
        losses.append(loss)
        seconds.append(s)
        built.append(m.graphs_built() - before)
    warm = args.compile_warmup_steps
    timed = seconds[warm:]
    words = sum(int(s["ntokens"]) for s in samples[warm:])
    median = statistics.median(timed)
    counters = m.dynamo_counters()
    r = {"arch": arch, "dtype": dtype, "mode": mode, "backend": backend if compiled else None,
         "random": random if compiled else None, "max_tokens": args.max_tokens[0], "size": args.size,
         "updates": len(samples), "timed_updates": len(timed), "words_per_s": words / sum(timed),
         "median_ms_train_step": 1e3 * median, "first_step_s": seconds[0],
         "compile_s": sum(s - median for s, b in zip(seconds, built) if b), "graphs_built": sum(built),
         "steps_that_built_graphs": [i + 1 for i, b in enumerate(built) if b],
         "recompiles": recompiles(built),
         "graph_breaks": sum(counters.get("graph_break", {}).values()),
         "shapes": len({m.shape_of(s) for s in samples}), "losses": losses, "dynamo_counters": counters,
         "peak_memory_mb": torch.cuda.max_memory_allocated() / 2 ** 20 if cuda else None,
         "launches_per_step": m.launches_per_step(trainer, samples[-1], cuda)}
    del trainer
    if cuda:
        torch.cuda.empty_cache()
    return r


def recompiles(built):
    """Graphs built after the first update that built any (``built``: graphs per update): what a new batch shape or
    value made dynamo compile again (the first update builds one graph per stretch between graph breaks)."""
    first = next((i for i, b in enumerate(built) if b), len(built))
    return sum(built[first + 1:])


def compare(eager, compiled):
    """The compiled run's loss differences to the eager run (the same batches), and its speed-up."""
    pairs = [(a, b) for a, b in zip(eager["losses"], compiled["losses"]) if None not in (a, b)]
    warm = eager["updates"] - eager["timed_updates"]
    timed = pairs[warm:] if len(pairs) > warm else pairs
    compiled.update(
        first_loss_difference=abs(pairs[0][0] - pairs[0][1]) if pairs else None,
        max_loss_difference=max((abs(a - b) for a, b in pairs), default=None),
        mean_loss_difference=(statistics.mean(b for _, b in timed) - statistics.mean(a for a, _ in timed)) if timed else None,
        speedup=compiled["words_per_s"] / eager["words_per_s"])


def run_compile(args, task, data, dtypes, cuda, deadline, doc, save, log):
    """Eager and compiled runs of every ``--compile-archs`` arch in every dtype, within the budget, into
    ``doc["compile"]`` (``save()`` after each arch)."""
    import torch
    from . import speed_measure as m
    from .check import error_line, select_archs

    backend, random = settings(args, cuda)
    archs = select_archs(args.compile_archs, "--compile-archs", also=("transformer",))
    results = {"backend": backend, "random": random, "cache_size_limit": torch._dynamo.config.cache_size_limit,
               "updates": args.compile_updates, "warmup_steps": args.compile_warmup_steps, "runs": []}
    doc["compile"] = results
    pairs = [(dtype, arch) for dtype in dtypes for arch in archs]
    last_s = 0.0
    for i, (dtype, arch) in enumerate(pairs):
        if time.time() + 1.2 * last_s > deadline:
            results["stopped"] = (f"stopped at the budget before {arch} {dtype}; left: "
                                  + ", ".join(f"{a} {d}" for d, a in pairs[i:]))
            log(f"| compile: {results['stopped']}")
            break
        start = time.time()
        runs = {}
        for mode in ("eager", "compiled"):
            try:
                runs[mode] = one_run(args, task, data, arch, dtype, mode, backend, random, cuda)
            except Exception as e:  # a diagnostic: the report says what failed, the other archs still run
                runs[mode] = {"arch": arch, "dtype": dtype, "mode": mode, "error": error_line(e)}
                log(f"| compile {arch} {dtype} {mode}: failed: {runs[mode]['error']}")
        if "error" not in runs["eager"] and "error" not in runs["compiled"]:
            compare(runs["eager"], runs["compiled"])
        base = [r for r in results["runs"] if r["arch"] == "transformer" and r["dtype"] == dtype
                and r["mode"] == "eager" and "error" not in r]
        for r in runs.values():
            if base and "error" not in r:
                r["vs_transformer_eager"] = r["words_per_s"] / base[0]["words_per_s"]
            results["runs"].append(r)
        c = runs["compiled"]
        if "error" not in c and "error" not in runs["eager"]:
            log(f"| compile {arch} {dtype}: eager {runs['eager']['words_per_s']:.0f} words/s, compiled "
                f"{c['words_per_s']:.0f} ({c['speedup']:.2f}x; {c['compile_s']:.0f} s compiling, {c['graphs_built']} "
                f"graphs, {c['recompiles']} recompiles, {c['graph_breaks']} breaks over {c['updates']} updates; loss "
                f"difference first {c['first_loss_difference']:.2g}, largest {c['max_loss_difference']:.2g})")
        last_s = max(last_s, time.time() - start)
        save()
    m.reset_compiler()
    return results

"""``fusion-gpu-speed``'s tables: the profile (ms per step before and after the plugin's attention setting, where the
time goes) and the benchmark (the transformer's words/s, ms per step and MFU; per arch the median over rounds of its
ratios to the transformer, the FLOP-ideal ratios, efficiencies, memory ratio and the paper's ratio), with the
targets of issue 39 (MFU >= 25% at the largest batch and >= 10% at 4096, efficiency >= 0.9, the paper's ratio).
"""
import statistics

MFU_TARGETS = {4096: 0.10}  # and 0.25 at the largest --max-tokens above 4096
EFFICIENCY_TARGET = 0.9


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(records):
    """One row per (arch, dtype, max_tokens), medians over the rounds."""
    from ..fairseq_runs import paper_ratios

    groups = {}
    for r in records:
        groups.setdefault((r["arch"], r["dtype"], r["max_tokens"]), []).append(r)
    largest = max((r["max_tokens"] for r in records), default=0)
    rows = []
    for (arch, dtype, max_tokens), runs in groups.items():
        row = {"arch": arch, "dtype": dtype, "max_tokens": max_tokens, "runs": len(runs),
               "words_per_s": _median(r["words_per_s"] for r in runs),
               "ms_per_step": _median(r["ms_per_step"] for r in runs), "mfu": _median(r["mfu"] for r in runs)}
        if arch == "transformer":
            target = MFU_TARGETS.get(max_tokens, 0.25 if max_tokens == largest and max_tokens > 4096 else None)
            row["mfu_target"] = target
            row["mfu_target_met"] = None if target is None else row["mfu"] >= target
        else:
            train_paper, decode_paper = paper_ratios(arch)
            ratios = [r["train_ratio"] for r in runs if "train_ratio" in r]
            row.update(train_ratio=_median(ratios), train_spread=(min(ratios), max(ratios)) if ratios else None,
                       train_flop_ideal=runs[0].get("train_flop_ideal"),
                       train_efficiency=_median(r.get("train_efficiency") for r in runs),
                       memory_ratio=_median(r.get("memory_ratio") for r in runs),
                       paper_train=train_paper, paper_decode=decode_paper)
            decoded = [r for r in runs if "decode_ratio" in r]
            if decoded:
                row["decode_ratio"] = {b: _median(r["decode_ratio"][b] for r in decoded) for b in decoded[0]["decode_ratio"]}
                row["decode_flop_ideal"] = decoded[0]["decode_flop_ideal"]
                row["decode_efficiency"] = {b: _median(r["decode_efficiency"][b] for r in decoded)
                                            for b in decoded[0]["decode_efficiency"]}
            row["efficiency_target_met"] = (None if row["train_efficiency"] is None
                                            else row["train_efficiency"] >= EFFICIENCY_TARGET)
            row["paper_target_met"] = (None if train_paper is None or row["train_ratio"] is None
                                       else row["train_ratio"] >= train_paper)
        rows.append(row)
    return rows


def _f(v, fmt="{:.2f}"):
    return "-" if v is None else fmt.format(v)


def _top_ops(entries, n=2):
    from .speed_measure import is_range

    ops = [e for e in entries if not is_range(e["name"])][:n]
    return ", ".join(f"{e['name']} {e['ms']:.1f} ms" for e in ops) or "-"


def profile_table(profile):
    lines = ["| arch | dtype | attention | ms/step, new shapes | ms/step, seen shapes | largest host costs of a "
             "new-shape step | GPU kernel time (ms) | attention kernels |", "|---|---|---|---:|---:|---|---:|---|"]
    for r in profile:
        p = r["profile_new_shape"]
        kernels = sorted({k.split("(")[0] for k in p["attention_kernels"] if k.startswith("aten::")})
        lines.append(f"| `{r['arch']}` | {r['dtype']} | {r['setting']} (cuDNN {'on' if r['cudnn_attention'] else 'off'}) | "
                     f"{r['median_ms_new']:.1f} | {r['median_ms_seen']:.1f} | {_top_ops(p['top_cpu'])} | "
                     f"{_f(p.get('kernel_ms'), '{:.1f}')} | {', '.join(kernels) or '-'} |")
    return "\n".join(lines)


def overhead_table(overhead):
    lines = [f"Host cost of one kernel launch issued back to back: {overhead['launch_us']:.1f} us.", "",
             "| arch | dtype | optimizer | ms/train_step | ms forward+backward alone | kernel launches/step |",
             "|---|---|---|---:|---:|---:|"]
    for r in overhead["runs"]:
        lines.append(f"| `{r['arch']}` | {r['dtype']} | {r['optimizer']} ({r['optimizer_class']}) | "
                     f"{r['median_ms_train_step']:.1f} | {_f(r.get('median_ms_forward_backward'), '{:.1f}')} | "
                     f"{r['launches_per_step'] if r['launches_per_step'] is not None else '-'} |")
    return "\n".join(lines)


def compile_table(compiled):
    lines = [f"torch.compile backend: {compiled['backend']} (random numbers: {compiled['random']}), dynamic shapes, "
             f"recompile limit per frame {compiled['cache_size_limit']}; {compiled['updates']} updates per run, the "
             f"first {compiled['warmup_steps']} left out of words/s and ms per step.", "",
             "| arch | dtype | forward | words/s | ms/step | speed-up | x eager transformer | compile s | graphs / "
             "recompiles / breaks | launches/step | peak MB | loss difference: first / largest / mean |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in compiled["runs"]:
        if "error" in r:
            lines.append(f"| `{r['arch']}` | {r['dtype']} | {r['mode']} | failed: {r['error']} | | | | | | | | |")
            continue
        loss = "-" if r["mode"] == "eager" else (f"{_f(r.get('first_loss_difference'), '{:.2g}')} / "
                                                  f"{_f(r.get('max_loss_difference'), '{:.2g}')} / "
                                                  f"{_f(r.get('mean_loss_difference'), '{:+.2g}')}")
        lines.append(f"| `{r['arch']}` | {r['dtype']} | {r['mode']} | {r['words_per_s']:.0f} | "
                     f"{r['median_ms_train_step']:.1f} | {_f(r.get('speedup'))} | {_f(r.get('vs_transformer_eager'))} | "
                     f"{r['compile_s']:.1f} | {r['graphs_built']} / {r['recompiles']} / {r['graph_breaks']} | "
                     f"{_f(r['launches_per_step'], '{}')} | {_f(r['peak_memory_mb'], '{:.0f}')} | {loss} |")
    if compiled.get("stopped"):
        lines += ["", f"Note: {compiled['stopped']}."]
    return "\n".join(lines)


def transformer_table(rows):
    lines = ["| dtype | --max-tokens | words/s | ms/step | MFU | target | met |", "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r["arch"] == "transformer":
            met = {True: "yes", False: "no", None: "-"}[r["mfu_target_met"]]
            lines.append(f"| {r['dtype']} | {r['max_tokens']} | {r['words_per_s']:.0f} | {r['ms_per_step']:.1f} | "
                         f"{100 * r['mfu']:.1f}% | {_f(r['mfu_target'] and 100 * r['mfu_target'], '{:.0f}%')} | {met} |")
    return "\n".join(lines)


def arch_table(rows):
    lines = ["| arch | dtype | --max-tokens | train ratio (spread) | FLOP-ideal | efficiency | paper train | "
             "decode ratio b4 / b10 | FLOP-ideal b4 / b10 | paper decode | memory ratio | targets met |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if r["arch"] == "transformer":
            continue
        spread = r["train_spread"]
        dec, ideal = r.get("decode_ratio"), r.get("decode_flop_ideal")
        met = [name for name, ok in (("efficiency", r["efficiency_target_met"]), ("paper", r["paper_target_met"])) if ok]
        missed = [name for name, ok in (("efficiency", r["efficiency_target_met"]), ("paper", r["paper_target_met"]))
                  if ok is False]
        lines.append(
            f"| `{r['arch']}` | {r['dtype']} | {r['max_tokens']} | {_f(r['train_ratio'])}"
            f" ({_f(spread and spread[0])}-{_f(spread and spread[1])}) | {_f(r['train_flop_ideal'])} | "
            f"{_f(r['train_efficiency'])} | {_f(r['paper_train'])} | "
            f"{'-' if not dec else _f(dec.get('4')) + ' / ' + _f(dec.get('10'))} | "
            f"{'-' if not ideal else _f(ideal.get('4')) + ' / ' + _f(ideal.get('10'))} | {_f(r['paper_decode'])} | "
            f"{_f(r['memory_ratio'])} | {', '.join(met) or '-'}{'; missed: ' + ', '.join(missed) if missed else ''} |")
    return "\n".join(lines)


def markdown(doc, short=False):
    m, rate = doc["machine"], doc["matmul_rate"]
    out = [] if short else [
        "# fusion-gpu-speed", "",
        f"{m['date']}, {m['device']}; torch {m['torch']}, CUDA {m['cuda']}, cuDNN {m.get('cudnn', '-')}, "
        f"fairseq {m['fairseq']}, Python {m['python']}; {doc.get('elapsed_s', 0):.0f} s. Matrix-product rate "
        f"({rate['dtype']}, {rate['n']}^3): {rate['flops_per_s'] / 1e12:.1f} TFLOP/s. cuDNN attention: torch's default "
        f"{'on' if m['cudnn_attention_torch_default'] else 'off'}, in the benchmark "
        f"{'on' if m['cudnn_attention_in_benchmark'] else 'off'}.", ""]
    if doc.get("profile"):
        out += ["## Profile: one training step", "", profile_table(doc["profile"]), ""]
    if doc.get("overhead"):
        out += ["## Overhead: where the step's time goes once attention is fixed", "", overhead_table(doc["overhead"]), ""]
    if doc.get("compile"):
        out += ["## torch.compile: eager against compiled training, on the same batches", "", compile_table(doc["compile"]), ""]
    if doc.get("rows"):
        out += ["## Benchmark: transformer", "", transformer_table(doc["rows"]), "",
                "## Benchmark: archs against the transformer (medians over rounds)", "", arch_table(doc["rows"]), ""]
    if doc.get("stopped"):
        out += [f"Note: {doc['stopped']}.", ""]
    return "\n".join(out)

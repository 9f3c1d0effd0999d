"""``fusion-gpu-check``'s verdicts and report: which runs pass, the machine it ran on, the markdown.

A half-precision run passes when its loss is finite, it made all its updates, its validation loss is within the
dtype's relative tolerance of the fp32 run of the same arch (same seed, data order and updates) and it decoded; the
fp32 run passes when its loss is finite, it made all its updates, its validation loss fell below the untrained
model's and it decoded. BLEU is reported, not judged: a few dozen updates leave it near zero.
"""
import math
import os
import platform
import subprocess


def _finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def judge_run(run, dtype, reference=None, tolerance=None, updates=None):
    """Problems of one run (empty: it passes). ``run``: the figures of ``check_train.train_and_decode`` (or
    ``{"error": ...}``); ``reference``: the fp32 run of the same arch, for a half dtype; ``tolerance``: relative."""
    if run.get("error"):
        return [f"{dtype}: {run['error']}"]
    problems = []
    for key, name in (("train_loss", "training loss"), ("valid_loss", "validation loss")):
        if not _finite(run.get(key)):
            problems.append(f"{dtype}: {name} {run.get(key)} is not finite")
    if updates is not None and run.get("updates") != updates:
        problems.append(f"{dtype}: {run.get('updates')} of {updates} updates made "
                        f"({run.get('skipped_updates', 0)} skipped for gradient overflow)")
    if not _finite(run.get("bleu")):
        problems.append(f"{dtype}: no BLEU from decoding")
    if problems:
        return problems
    if reference is None:  # fp32: the reference itself must have learned something
        if not _finite(run.get("initial_valid_loss")) or run["valid_loss"] >= run["initial_valid_loss"]:
            problems.append(f"{dtype}: validation loss {run['valid_loss']:.3f} after training is not below the "
                            f"untrained model's {run.get('initial_valid_loss')}")
        return problems
    if reference.get("error") or not _finite(reference.get("valid_loss")):
        return [f"{dtype}: no fp32 run to compare with"]
    rel = relative_difference(run["valid_loss"], reference["valid_loss"])
    if not rel <= tolerance:
        problems.append(f"{dtype}: validation loss {run['valid_loss']:.3f} is {100 * rel:.1f}% from fp32's "
                        f"{reference['valid_loss']:.3f} (tolerance {100 * tolerance:g}%)")
    return problems


def relative_difference(value, reference):
    return abs(value - reference) / abs(reference)


def judge_arch(runs, tolerances, updates=None):
    """Problems of one arch's runs ``{dtype: run}``; a half dtype is compared with ``runs["fp32"]``."""
    problems = []
    for dtype, run in runs.items():
        if dtype == "fp32":
            problems += judge_run(run, dtype, updates=updates)
        else:
            problems += judge_run(run, dtype, runs.get("fp32", {"error": "not run"}), tolerances[dtype], updates)
    return problems


def judge_ddp(result, updates):
    """Problems of one distributed run (``check.run_ddp``): it ended well, on the asked number of
    devices, made its updates with finite losses, and the loss fell."""
    if result.get("error"):
        return [result["error"]]
    problems = []
    if result.get("devices") != result.get("world_size"):
        problems.append(f"fairseq trained on {result.get('devices')} devices, not {result.get('world_size')}")
    if result.get("updates") != updates:
        problems.append(f"{result.get('updates')} of {updates} updates made")
    first, last = result.get("first_loss"), result.get("last_loss")
    if not (_finite(first) and _finite(last)):
        problems.append(f"loss not finite (first {first}, last {last})")
    elif last >= first:
        problems.append(f"loss did not fall ({first:.3f} at the first update, {last:.3f} at the last)")
    return problems


def git_commit():
    from ..data_paths import REPO_ROOT

    try:
        out = subprocess.run(["git", "-C", REPO_ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine(device):
    """Device and versions for the report."""
    import fairseq
    import torch

    info = {"device": device, "python": platform.python_version(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
            "fairseq": fairseq.__version__, "fairseq_fusion_commit": git_commit(), "platform": platform.platform(),
            "cpus": os.cpu_count()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=torch.cuda.get_device_name(0), gpus=torch.cuda.device_count(),
                    gpu_memory_gb=round(props.total_memory / 2**30, 1), capability=f"{props.major}.{props.minor}",
                    bf16_supported=torch.cuda.is_bf16_supported())
    return info


def _num(x, fmt):
    return "-" if not _finite(x) else format(x, fmt)


def _loss_cell(runs, dtype):
    run = runs.get(dtype)
    if run is None:
        return "-"
    if run.get("error"):
        return "error"
    cell = _num(run.get("valid_loss"), ".3f")
    ref = runs.get("fp32", {})
    if dtype != "fp32" and _finite(run.get("valid_loss")) and _finite(ref.get("valid_loss")):
        cell += f" ({100 * (run['valid_loss'] - ref['valid_loss']) / ref['valid_loss']:+.2f}%)"
    return cell


def tolerance_sentence(tolerances):
    if not tolerances:
        return ""
    return " Tolerance of the validation loss to fp32's: " + ", ".join(f"{d} {100 * t:g}%" for d, t in tolerances.items()) + "."


def markdown(report):
    """The report as markdown: machine, settings, one row per arch, the DDP runs, the benchmark table."""
    m, s = report["machine"], report["settings"]
    dtypes = s["dtypes"]
    where = f"{m.get('gpu')} x{m.get('gpus')}" if m["device"] == "cuda" else "CPU (smoke mode)"
    lines = [f"# fusion-gpu-check: {'PASS' if report['passed'] else 'FAIL'}", "",
             f"{report['date']}, {where}; torch {m['torch']}, CUDA {m['cuda']}, cuDNN {m['cudnn']}, fairseq {m['fairseq']}, "
             f"Python {m['python']}, fairseq-fusion {m['fairseq_fusion_commit']}; {report['elapsed_s']:.0f} s "
             f"(budget {s['budget_s']:.0f} s).", ""]
    lines += [f"- {note}" for note in report["notes"]] + [""]
    lines += [f"## Archs: {report['archs_passed']}/{len(report['archs'])} pass", "",
              f"{s['updates']} updates of each arch at size {s['size']} in {', '.join(dtypes)} (same seed, data order and "
              f"updates), then fairseq's validation loss (bits per token, as `valid_loss`) and sacreBLEU of "
              f"{s['decode_sentences']} test sentences (beam {s['beam']})." + tolerance_sentence(s["tolerances"]), ""]
    head = ["arch", "params"] + [f"{d} valid loss" for d in dtypes] + [f"{d} words/s" for d in dtypes] + \
        [f"BLEU {d}" for d in dtypes] + ["result"]
    lines += ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 2) + "---|"]
    for a in report["archs"]:
        runs = a["runs"]
        cells = [f"`{a['arch']}`", _num(a.get("params", 0) / 1e6, ".2f") + "M" if a.get("params") else "-"]
        cells += [_loss_cell(runs, d) for d in dtypes]
        cells += [_num(runs.get(d, {}).get("words_per_s"), ".0f") for d in dtypes]
        cells += [_num(runs.get(d, {}).get("bleu"), ".2f") for d in dtypes]
        cells.append("pass" if a["passed"] else "FAIL: " + "; ".join(a["problems"]).replace("|", "/"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "## Distributed data parallel", ""]
    ddp = report["ddp"]
    if ddp.get("skipped"):
        lines.append(f"Not run: {ddp['skipped']}.")
    else:
        lines += ["| arch | devices | updates | first loss | last loss | words/s | result |", "|---|---:|---:|---:|---:|---:|---|"]
        for r in ddp["runs"]:
            lines.append(f"| `{r['arch']}` | {r.get('devices', '-')} | {r.get('updates', '-')} | "
                         f"{_num(r.get('first_loss'), '.3f')} | {_num(r.get('last_loss'), '.3f')} | "
                         f"{_num(r.get('words_per_s'), '.0f')} | "
                         f"{'pass' if r['passed'] else 'FAIL: ' + '; '.join(r['problems']).replace('|', '/')} |")
    lines += ["", "## Benchmark (base size, --fp16)", ""]
    bench = report["benchmark"]
    if bench.get("skipped"):
        lines.append(f"Not run: {bench['skipped']}.")
    else:
        lines += [f"`{bench['command']}` ({bench['elapsed_s']:.0f} s{', stopped at the time budget' if bench.get('stopped') else ''}; "
                  f"JSON: `{bench['json']}`).", ""]
        lines.append(bench["table"] if bench.get("table") else "No arch finished its pair of runs.")
        if bench.get("error"):
            lines += ["", f"Error: {bench['error']}"]
    return "\n".join(lines) + "\n"

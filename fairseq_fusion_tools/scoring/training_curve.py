"""fusion-training-curve's logic: validation BLEU, loss and perplexity read from fairseq-train logs, one curve per
log.
"""
import json
import os
import re

from .. import outputs
from fairseq_fusion_tools.user_files import fail
from fairseq_fusion.guards.text_files import open_text


# fairseq's progress_bar: simple format "... | valid on 'valid' subset | loss 4.1 | ... | num_updates 500",
# json format "... | {"epoch": 1, "valid_loss": "4.1", ..., "valid_num_updates": "500"}"
SIMPLE = re.compile(r"\| valid on '([^']+)' subset \| (.*)$")
JSON = re.compile(r"(\{.*\"valid_[^\"]*\".*\})\s*$")
METRICS = ("bleu", "loss", "nll_loss", "ppl")


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def parse_line(line):
    """(subset, {metric: value}) of a validation line, or None for any other line."""
    m = SIMPLE.search(line)
    if m:
        fields = {}
        for part in m.group(2).split(" | "):
            key, _, value = part.strip().partition(" ")
            fields[key] = _number(value)
        return m.group(1), fields
    m = JSON.search(line)
    if m:
        try:
            record = json.loads(m.group(1))
        except json.JSONDecodeError:
            return None
        return "valid", {k[len("valid_"):]: _number(v) for k, v in record.items() if k.startswith("valid_")}
    return None


def read_log(path, subset="valid"):
    """Validation points of one log: [{num_updates, epoch, bleu, loss, nll_loss, ppl}] (None where not logged)."""
    points = []
    with open_text(path, errors="replace") as f:
        for line in f:
            parsed = parse_line(line)
            if parsed is None or parsed[0] != subset:
                continue
            fields = parsed[1]
            if fields.get("num_updates") is None:
                continue
            point = {"num_updates": int(fields["num_updates"])}
            point.update({k: fields.get(k) for k in METRICS})
            points.append(point)
    return points


def plot(curves, title=""):
    """One panel per logged metric (BLEU, loss, perplexity), one curve per log (``curves``: label -> points)."""
    metrics = [m for m in METRICS if m != "nll_loss" and any(p[m] is not None for pts in curves.values() for p in pts)]
    fig, axes = outputs.new_figure(1, len(metrics), figsize=(4.5 * len(metrics), 3.5), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for label, points in curves.items():
            xs = [p["num_updates"] for p in points if p[metric] is not None]
            ax.plot(xs, [p[metric] for p in points if p[metric] is not None], marker=".", label=label)
        ax.set_xlabel("updates")
        ax.set_ylabel(f"validation {metric}")
        ax.legend(fontsize=7)
    if title:
        outputs.figure_title(fig, title, fontsize=10)
    return fig


def log_labels(specs, labels=None):
    """[(path, label)] of the LOG[=LABEL] arguments and --labels; one line (fail) on a count mismatch or a repeated label."""
    pairs = [spec.partition("=")[::2] for spec in specs]
    if labels is not None:
        names = labels.split(",")
        if len(names) != len(pairs):
            fail(f"--labels has {len(names)} names but {len(pairs)} logs are given")
        if any(label for _, label in pairs):
            fail("give the labels either as LOG=LABEL or with --labels, not both")
        pairs = [(path, name) for (path, _), name in zip(pairs, names)]
    pairs = [(path, label or os.path.basename(os.path.dirname(os.path.abspath(path)))) for path, label in pairs]
    seen = [label for _, label in pairs]
    twice = sorted({label for label in seen if seen.count(label) > 1})
    if twice:
        fail(f"two logs would have the same label {twice[0]!r}: name them with --labels (one per log)")
    return pairs


def main(args):
    curves, logs = {}, {}
    for path, label in log_labels(args.logs, args.labels):
        if not os.path.isfile(path):
            fail(f"fusion-training-curve: {path}: no such log file")
        points = read_log(path, args.subset)
        if not points:
            fail(f"fusion-training-curve: {path} has no '{args.subset}' validation lines with num_updates "
                             "(expected fairseq-train's simple or json log)")
        curves[label], logs[label] = points, path
    for label, points in curves.items():
        last = points[-1]
        shown = ", ".join(f"{k} {last[k]:.2f}" for k in METRICS if last[k] is not None)
        print(f"| {label}: {len(points)} validations, last at {last['num_updates']} updates: {shown}")
    result = {"subset": args.subset, "logs": logs, "curves": curves}
    outputs.write_outputs(args.out, result, plot(curves, f"Validation ({args.subset}) of {', '.join(logs.values())}"))
    return result

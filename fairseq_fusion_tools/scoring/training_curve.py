"""fusion-training-curve's logic: validation BLEU, loss and perplexity read from fairseq-train logs, one curve per
log; with ``--internals`` also the ``fusion/`` figures ``--fusion-log-internals`` logs (training intervals and
validations), one PNG per log.
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
        outputs.mark_narrow_range(ax)
        ax.legend(fontsize=7)
    if title:
        outputs.figure_title(fig, title, fontsize=10)
    return fig


PREFIX = "fusion/"
# figures that are a share or a gate, in [0, 1]: their panels keep that range, so two runs' panels compare
UNIT_RANGE = ("_gate", "_on_embed", "_on_H", "_x")
FIELD = re.compile(r"(fusion/[\w/.-]+)[= ]([-+0-9.eE]+|nan|inf)")


def internals_of_line(line):
    """(``train`` or ``valid``, num_updates, {figure: value}) of a log line with fusion/ figures, or None (an
    epoch's summary line, ``train_...``, is left out: the intervals already show it)."""
    if PREFIX not in line:
        return None
    if "{" in line:  # json: train_inner keys as they are, validation keys after "valid_"
        try:
            record = json.loads(line[line.index("{"):])
        except json.JSONDecodeError:
            return None
        valid = any(k.startswith("valid_") for k in record)
        if not valid and "loss" not in record:  # the epoch's summary has train_loss, an interval loss
            return None
        strip = len("valid_") if valid else 0
        fields = {k[strip:]: _number(v) for k, v in record.items()}
    else:  # simple: "| train_inner | ... name=value, ..." or "| valid on 'valid' subset | name value | ..."
        valid = SIMPLE.search(line) is not None
        if not valid and "| train_inner |" not in line:
            return None
        fields = {k: _number(v) for k, v in FIELD.findall(line)}
        found = re.search(r"num_updates[= ](\d+)", line)
        fields["num_updates"] = _number(found.group(1)) if found else None
    if fields.get("num_updates") is None:
        return None
    figures = {k[len(PREFIX):]: v for k, v in fields.items() if k.startswith(PREFIX) and v is not None}
    return ("valid" if valid else "train"), int(fields["num_updates"]), figures


def read_internals(path):
    """{"train": [{"num_updates": n, figure: value, ...}], "valid": [...]} of one log (empty lists without figures)."""
    found = {"train": [], "valid": []}
    with open_text(path, errors="replace") as f:
        for line in f:
            parsed = internals_of_line(line)
            if parsed is not None and parsed[2]:
                found[parsed[0]].append({"num_updates": parsed[1], **parsed[2]})
    return found


def plot_internals(points, title):
    """One panel per technique (the figure's first name part), a line per figure against the updates: training
    intervals as lines, validations as markers. Shares and gates on [0, 1]; the other panels from 0, so a panel's
    scale never turns noise into structure."""
    names = sorted({k for p in points["train"] + points["valid"] for k in p if k != "num_updates"})
    groups = {}
    for name in names:
        groups.setdefault(name.split("/")[0], []).append(name)
    fig, axes = outputs.new_figure(1, len(groups), figsize=(5.5 * len(groups), 4), squeeze=False)
    for ax, (group, members) in zip(axes[0], groups.items()):
        top = 0.0
        for i, name in enumerate(members):
            label = name.split("/", 1)[1]
            train = [(p["num_updates"], p[name]) for p in points["train"] if name in p]
            valid = [(p["num_updates"], p[name]) for p in points["valid"] if name in p]
            line = None
            if train:
                line, = ax.plot(*zip(*train), label=label, linewidth=1,  # colours repeat after 10: a new style
                                linestyle=outputs.LINESTYLES[i // 10 % len(outputs.LINESTYLES)])
            if valid:
                ax.plot(*zip(*valid), linestyle="none", marker=outputs.MARKERS[i % len(outputs.MARKERS)],
                        color=None if line is None else line.get_color(), label=None if line else label)
            top = max([top] + [v for _, v in train + valid])
        unit = all(any(part in m for part in UNIT_RANGE) for m in members)
        ax.set_ylim(0, 1 if unit else max(top * 1.1, 1e-3))
        ax.set_title(f"{group} (range {'[0, 1]' if unit else 'from 0'}; markers: validation)", fontsize=9)
        ax.set_xlabel("updates")
        ax.legend(fontsize=6, ncol=2 if len(members) > 8 else 1)
    outputs.figure_title(fig, title, fontsize=10)
    return fig


def write_internals(out, logs):
    """OUT.internals.LABEL.png per log with figures; returns {label: points}."""
    from .. import atomic_files
    import matplotlib.pyplot as plt

    result = {}
    for label, path in logs.items():
        points = read_internals(path)
        if not (points["train"] or points["valid"]):
            print(f"| {label}: no fusion/ figures in {path} (train with --fusion-log-internals)")
            continue
        result[label] = points
        fig = plot_internals(points, f"Internals (--fusion-log-internals) of {label}: {path}")
        png = f"{out}.internals.{label}.png"
        try:
            atomic_files.save_figure(fig, png, dpi=120, bbox_inches="tight")
        finally:
            plt.close(fig)
        print(f"| wrote {png}")
    return result


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
        if not points and getattr(args, "internals", False):  # a run without validation: its internals only
            logs[label] = path
            continue
        if not points:
            fail(f"fusion-training-curve: {path} has no '{args.subset}' validation lines with num_updates "
                             "(expected fairseq-train's simple or json log)")
        curves[label], logs[label] = points, path
    for label, points in curves.items():
        last = points[-1]
        shown = ", ".join(f"{k} {last[k]:.2f}" for k in METRICS if last[k] is not None)
        print(f"| {label}: {len(points)} validations, last at {last['num_updates']} updates: {shown}")
    result = {"subset": args.subset, "logs": logs, "curves": curves}
    if getattr(args, "internals", False):
        result["internals"] = write_internals(args.out, logs)
    fig = plot(curves, f"Validation ({args.subset}) of {', '.join(logs.values())}") if curves else None
    outputs.write_outputs(args.out, result, fig)
    return result

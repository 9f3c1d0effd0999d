"""fusion-compare's evaluation of a run: the tested checkpoint (last, best or the average of the last N) translated
by fairseq-generate, scored with sacreBLEU and tokenized BLEU, and sacreBLEU's paired bootstrap against its baseline
(each cached in the run's ``eval/``)."""
import json
import os
import shlex
import subprocess

from .. import atomic_files
from .commands import generate_command


def reference_path(args, subset):
    given = dict(r.split("=", 1) for r in args.ref)
    path = given.get(subset, os.path.join(args.data, "tok", f"{subset}.raw.{args.target_lang}"))
    if not os.path.exists(path):
        raise FileNotFoundError(f"raw reference of subset {subset!r} not found at {path} (fusion-prepare-text writes "
                                f"tok/SUBSET.raw.LANG; else give --ref {subset}=FILE)")
    return path


def tested_checkpoint(run_dir, select):
    """The checkpoint a protocol tests: the last, the best on validation loss, or the average of the last N
    interval checkpoints (written once to eval/averageN.pt)."""
    if select in ("last", "best"):
        path = os.path.join(run_dir, f"checkpoint_{select}.pt")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} not found (fairseq-train writes checkpoint_best.pt when it validates)")
        return path
    from ..checkpoints import average_checkpoints

    out = os.path.join(run_dir, "eval", select + ".pt")
    if not os.path.exists(out):
        paths = average_checkpoints.last_n_checkpoints(run_dir, int(select[len("average"):]), kind="update")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        average_checkpoints.write_average(paths, out)
    return out


def evaluate(args, run_dir, subset, select):
    """sacreBLEU (detokenized, signature) and tokenized BLEU of the run's ``select`` checkpoint on ``subset``."""
    from ..scoring import evaluation
    from ..fairseq_runs import console_script

    out = os.path.join(run_dir, "eval", f"{subset}.{select}")
    if os.path.exists(out + ".json"):
        with open(out + ".json") as f:
            return json.load(f)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cmd = [console_script("fairseq-generate"), *generate_command(args, tested_checkpoint(run_dir, select), subset)]
    with open(out + ".generate.txt.part", "w", encoding="utf-8") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"fairseq-generate on {subset} failed ({shlex.join(cmd)}):\n{proc.stderr[-3000:]}")
    os.replace(out + ".generate.txt.part", out + ".generate.txt")
    refs = evaluation.read_lines(reference_path(args, subset))
    hyps = evaluation.detokenize(evaluation.read_generate_output(out + ".generate.txt")["H"], args.target_lang)
    if len(hyps) != len(refs):
        raise ValueError(f"{out}.generate.txt: {len(hyps)} translations for {len(refs)} references of {subset}")
    result = evaluation.score(hyps, refs, args.target_lang)
    atomic_files.write_lines(out + ".detok", hyps)
    atomic_files.write_json(out + ".json", result)
    return result


def bootstrap(args, run_dir, base_dir, subset, base_name, select):
    """sacreBLEU's paired bootstrap of this run against the baseline run of the same seed on ``subset``, both
    tested with the checkpoint ``select`` chooses (cached)."""
    from ..scoring import evaluation

    out = os.path.join(run_dir, "eval", f"{subset}.{select}.vs_{base_name}.json")
    if os.path.exists(out):
        with open(out) as f:
            return json.load(f)
    evaluate(args, base_dir, subset, select)  # the baseline under this protocol's selection (cached)
    refs = evaluation.read_lines(reference_path(args, subset))
    base = evaluation.read_lines(os.path.join(base_dir, "eval", f"{subset}.{select}.detok"))
    hyps = evaluation.read_lines(os.path.join(run_dir, "eval", f"{subset}.{select}.detok"))
    import logging

    logging.getLogger("sacrebleu").setLevel(logging.WARNING)  # its per-test progress notes
    res = evaluation.paired_significance(refs, base, {"system": hyps}, "bs", args.bootstrap_samples, base_name)
    result = {"p_value": res["systems"][1]["p_value"], "same_output": res["systems"][1]["same_output"], "signature": res["signature"],
              "baseline": base_name, "baseline_bleu": res["systems"][0]["bleu"], "bleu": res["systems"][1]["bleu"]}
    atomic_files.write_json(out, result)
    return result

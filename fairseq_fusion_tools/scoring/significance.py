"""fusion-significance's run: each system against the baseline, by paired bootstrap, approximate randomization or
the sign test.
"""

from .. import outputs
from . import evaluation
from .bleu_by_length import parse_systems
from fairseq_fusion_tools.user_files import fail


def main(args):
    (base_name, base_path), = parse_systems([args.baseline]).items()
    systems = parse_systems(args.sys)
    if base_name in systems:
        fail(f"--sys: {base_name!r} is the baseline's name")
    try:
        if args.test == "sign":
            result = evaluation.sign_test(
                evaluation.read_lines(args.ref), evaluation.read_lines(base_path),
                {n: evaluation.read_lines(p) for n, p in systems.items()}, base_name, args.tokenized)
            for s in result["systems"]:
                print(f"{s['name']}\tBLEU {s['bleu']:.2f}  +{s['better']} -{s['worse']} ={s['ties']}  p = {s['p_value']:.4g}"
                      f"{' *' if s['p_value'] < 0.05 else ''}")
            if args.out:
                outputs.write_outputs(args.out, result)
            return result
        result = evaluation.paired_significance(
            evaluation.read_lines(args.ref), evaluation.read_lines(base_path),
            {n: evaluation.read_lines(p) for n, p in systems.items()},
            args.test, args.n_samples, base_name, args.tokenized)
    except ValueError as e:
        fail(f"fusion-significance: {e}")
    print(result["signature"])
    for s in result["systems"]:
        p = "" if s["p_value"] is None else f"  p = {s['p_value']:.4f}{' *' if s['p_value'] < 0.05 else ''}"
        p = "  same output as the baseline (not tested)" if s.get("same_output") else p
        ci = "" if s["ci"] is None else f"  ({s['mean']:.2f} +- {s['ci']:.2f})"
        print(f"{s['name']}\tBLEU {s['bleu']:.2f}{ci}{p}")
    if args.out:
        outputs.write_outputs(args.out, result)
    return result

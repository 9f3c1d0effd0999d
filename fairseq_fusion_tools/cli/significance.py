"""fusion-significance: paired significance of systems against a baseline (sacreBLEU's paired bootstrap, Koehn 2004;
approximate randomization; or the sign test of Collins et al. 2005, which Dou et al. 2018 use).

All files are line-aligned detokenized text (or tokenized with ``--tokenized``). Prints BLEU,
the 95% confidence interval and the p-value of each system against the baseline; writes OUT.json.
"""
import argparse

from ..analysis import common, evaluation
from .bleu_by_length import parse_systems
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-significance", description=description_of(__doc__))
    p.add_argument("--ref", required=True, help="Reference translations.")
    p.add_argument("--baseline", required=True, metavar="NAME=FILE", help="The baseline system.")
    p.add_argument("--sys", required=True, nargs="+", metavar="NAME=FILE", help="Systems to test against the baseline.")
    p.add_argument("--test", choices=["bs", "ar", "sign"], default="bs",
                   help="The test: bs, paired bootstrap resampling (default); ar, approximate randomization; sign, Collins et al. "
                   "(2005)'s sign test over sentences (Dou et al. 2018).")
    p.add_argument("--n-samples", type=int, default=0, help="Resamples (0: sacreBLEU's default, 1000 for bs, 10000 for ar).")
    p.add_argument("--tokenized", action="store_true", help="BLEU on the tokens as they are (no 13a tokenization).")
    p.add_argument("--out", default=None, help="Output prefix: OUT.json.")
    return p


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
                common.write_outputs(args.out, result)
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
        common.write_outputs(args.out, result)
    return result


def cli_main():
    main(common.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

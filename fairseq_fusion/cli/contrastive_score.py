"""fusion-contrastive-score: accuracy of a model on contrastive test suites (LingEval97/DistilLingEval, ContraWSD).

Each SUITE is a line-aligned folder (src.SRC, tgt.correct.TGT, tgt.incorrect.TGT) or a ContraWSD
JSON file. Raw sentences are preprocessed as the model's training data was (Moses tokens,
truecasing and BPE from the data folder's prepare.json / bpe.codes), then scored with the model.
Writes OUT.json (accuracies and every item's scores) and OUT.png (accuracy per category/distance).
"""
import argparse
import ast
import os

from tqdm import tqdm

from ..analysis import common, contrastive


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-contrastive-score", description=__doc__.split("\n")[0])
    p.add_argument("--path", required=True, help="checkpoint file (.pt)")
    p.add_argument("--data", default=None, help="data folder of fusion-prepare-text (dictionaries, bpe.codes); default: the checkpoint's")
    p.add_argument("--suite", required=True, nargs="+", help="line-aligned suite folders and/or ContraWSD .json files")
    p.add_argument("--input-format", choices=["raw", "bpe"], default="raw",
                   help="raw: preprocess like the training data (default); bpe: the text is already tokenized and BPE'd")
    p.add_argument("--normalize", action="store_true", help="compare mean log-probs per token instead of sums")
    p.add_argument("--max-items", type=int, default=None, help="score only the first N items of each suite")
    p.add_argument("--max-tokens", type=int, default=4000, help="tokens per batch")
    p.add_argument("--out", required=True, help="output prefix: OUT.json, OUT.png")
    p.add_argument("--cpu", action="store_true", help="stay on CPU even if CUDA is available")
    p.add_argument("--model-overrides", default="{}", help="python dict of model arg overrides")
    return p


def main(args):
    model, task, cfg = common.load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    src_lang, tgt_lang = task.cfg.source_lang, task.cfg.target_lang
    items = []
    try:
        for suite in args.suite:
            if not os.path.exists(suite):
                raise SystemExit(f"--suite {suite}: no such file or folder")
            items += contrastive.read_suite(suite, src_lang, tgt_lang)[: args.max_items]
    except (contrastive.SuiteFormatError, FileNotFoundError) as e:
        raise SystemExit(f"fusion-contrastive-score: {e}")
    pre_src = pre_tgt = None
    if args.input_format == "raw":
        from .prepare_text import TextPipeline

        data = args.data or task.cfg.data
        pre_src, pre_tgt = TextPipeline(data, src_lang), TextPipeline(data, tgt_lang)
    pairs = sorted({(it.source, t) for it in items for t in [it.reference] + it.contrastive})
    scorer = contrastive.Scorer(model, task, pre_src, pre_tgt, args.max_tokens)
    scores = dict(zip(pairs, scorer.score(pairs, progress=lambda b: tqdm(b, desc="scoring", mininterval=2))))
    result = contrastive.evaluate(items, scores, args.normalize)
    result.update(checkpoint=args.path, suites=args.suite, pairs_scored=len(pairs))
    o = result["overall"]
    print(f"| overall accuracy {100 * o['accuracy']:.2f}% ({o['correct']}/{o['total']})")
    for key in ("by_category", "by_distance"):
        for name, a in result.get(key, {}).items():
            print(f"| {key[3:]} {name}: {100 * a['accuracy']:.2f}% ({a['correct']}/{a['total']})")
    common.write_outputs(args.out, result, contrastive.plot(result))
    return result


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

"""fusion-contrastive-score: accuracy of a model on contrastive test suites (LingEval97/DistilLingEval, ContraWSD, MuCoW).

Each SUITE is a line-aligned folder (src.SRC, tgt.correct.TGT, tgt.incorrect.TGT) or a JSON file
(LingEval97 / ContraWSD / MuCoW scoring format). Raw sentences are preprocessed as the model's
training data was (Moses tokens, truecasing and BPE from the data folder's prepare.json /
bpe.codes), then scored with the model (sum of log-probs, EOS included).

--protocol (see analysis/contrastive_protocols.py):
  lingeval97  each (reference, contrastive) pair counts in its own error type, with accuracy by
              distance (bins 0, 1..15, >15) and by frequency (rsennrich/lingeval97 evaluate.py)
  contrawsd   an item is right when its reference beats every variant; per ambig word:sense
              (ZurichNLP/ContraWSD evaluate.py)
  auto        (default) per suite: folders -> lingeval97; JSON -> contrawsd when its items have an
              "ambig word" (ContraWSD/MuCoW), lingeval97 when none has (LingEval97)
--category keeps only the named error types (lingeval97) / categories or ambiguous words (contrawsd).

Translation suites (ContraWSD WMT18, MuCoW translation) are checked by fusion-contrastive-translate.
Writes OUT.json (accuracies per protocol, every decision's scores) and OUT.png.
"""
import argparse
import ast
import os

from ..analysis import common, contrastive
from ..analysis import contrastive_protocols as protocols
from ..progress import progress as progress_bar
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-contrastive-score", description=description_of(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    common.add_checkpoint_args(p, data_help="Data folder of fusion-prepare-text: dictionaries, bpe.codes (default: the "
                               "checkpoint's).", out_help="Output prefix: writes OUT.json and OUT.png.")
    p.add_argument("--suite", required=True, nargs="+", help="Line-aligned suite folders and/or LingEval97/ContraWSD .json files.")
    p.add_argument("--protocol", default="auto", choices=("auto",) + protocols.PROTOCOLS,
                   help="How scores become accuracies (default: auto, by suite format; see below).")
    p.add_argument("--category", nargs="+", default=None,
                   help="Score only these error types (lingeval97) / categories or ambiguous words (contrawsd).")
    p.add_argument("--input-format", choices=["raw", "bpe"], default="raw",
                   help="How the suites' text is given: raw text is preprocessed like the training data (default); bpe text "
                        "is already tokenized and BPE'd.")
    p.add_argument("--normalize", action="store_true", help="Compare mean log-probs per token instead of sums.")
    p.add_argument("--max-items", type=int, default=None, help="Score only the first N items of each suite.")
    p.add_argument("--max-tokens", type=int, default=4000, help="Tokens per batch.")
    p.add_argument("--phrase-trees", default=None, help="Parse-tree phrase models: parse trees of the suite's sources "
                   "(one bracketed tree per sentence, looked up by its words).")
    p.add_argument("--phrase-parser", choices=["none", "stanza"], default=None,
                   help="Parse-tree phrase models: parse the sources with this parser where --phrase-trees has no tree.")
    p.add_argument("--phrase-fallback", choices=["ngram", "error"], default=None,
                   help="Parse-tree phrase models: a source without a usable tree gets n-gram spans (default, counted "
                        "and reported) or is an error.")
    return p


def main(args):
    try:
        model, task, cfg = common.load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
    except FileNotFoundError as e:
        fail(f"fusion-contrastive-score: {e}")
    from fairseq_fusion.tasks.translation_with_phrases import configure_inference_spans

    try:
        configure_inference_spans(task, phrase_trees=args.phrase_trees, phrase_parser=args.phrase_parser,
                                  phrase_fallback=args.phrase_fallback)
    except ValueError as e:
        fail(f"fusion-contrastive-score: {e}")
    src_lang, tgt_lang = task.cfg.source_lang, task.cfg.target_lang
    groups, suites = {}, []  # protocol -> items; what each suite was read as
    try:
        for suite in args.suite:
            if not os.path.exists(suite):
                fail(f"--suite {suite}: no such file or folder")
            items = contrastive.read_suite(suite, src_lang, tgt_lang)[: args.max_items]
            protocol = protocols.choose_protocol(items, args.protocol, suite)
            groups.setdefault(protocol, []).extend(items)
            suites.append({"suite": suite, "protocol": protocol, "items": len(items)})
            print(f"| {suite}: {len(items)} items, protocol {protocol}")
    except (contrastive.SuiteFormatError, FileNotFoundError, ValueError) as e:
        fail(f"fusion-contrastive-score: {e}")
    if args.category is not None:
        known = {n for its in groups.values() for it in its for n in it.types + [it.category, it.word] if n}
        missing = sorted(set(args.category) - known)
        if missing:
            fail(f"fusion-contrastive-score: --category {' '.join(missing)}: not in the suites "
                             f"(they have: {' '.join(sorted(known)[:40])}{' ...' if len(known) > 40 else ''})")
    pre_src = pre_tgt = None
    if args.input_format == "raw":
        from .prepare_text import TextPipeline

        data = args.data or task.cfg.data
        pre_src, pre_tgt = TextPipeline(data, src_lang), TextPipeline(data, tgt_lang)
    items = [it for its in groups.values() for it in its]
    pairs = sorted({(it.source, t) for it in items for t in [it.reference] + it.contrastive})
    scorer = contrastive.Scorer(model, task, pre_src, pre_tgt, args.max_tokens)
    scores = dict(zip(pairs, scorer.score(pairs, progress=lambda b: progress_bar(b, desc="scoring"))))
    categories = set(args.category) if args.category else None
    results = {p: protocols.evaluate(its, scores, p, args.normalize, categories) for p, its in groups.items()}
    for p, r in results.items():
        o = r["overall"]
        print(f"| {p} ({r['unit']}s): {100 * o['accuracy']:.2f}% ({o['correct']}/{o['total']})")
        for key in ("by_category", "by_distance", "by_frequency"):
            for name, a in r.get(key, {}).items():
                print(f"| {p} {key[3:]} {name}: {100 * a['accuracy']:.2f}% ({a['correct']}/{a['total']})")
    out = {"checkpoint": args.path, "suites": suites, "categories": args.category, "pairs_scored": len(pairs),
           "protocols": results}
    common.write_outputs(args.out, out, protocols.plot(results, f"of {args.path}"))
    return out


def cli_main():
    main(common.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

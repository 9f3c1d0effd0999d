"""fusion-contrastive-score's run: the suites read, each pair scored by the model, accuracies per protocol, the
figure.
"""
import ast
import os

from .. import outputs
from . import common, contrastive
from . import contrastive_protocols as protocols
from ..progress import progress as progress_bar
from fairseq_fusion_tools.user_files import fail


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
        from fairseq_fusion.encoders.text_pipeline import TextPipeline

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
    outputs.write_outputs(args.out, out, protocols.plot(results, f"of {args.path}"))
    return out

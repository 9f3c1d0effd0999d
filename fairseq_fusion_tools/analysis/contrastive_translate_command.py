"""fusion-contrastive-translate's run: a suite translated (or --hyp read) and checked for the right sense, the
figure.
"""
import ast
import dataclasses
import json
import os

from fairseq.dataclass.configs import GenerationConfig

from .. import atomic_files
from .. import outputs
from . import common, contrastive_check, contrastive_translate
from .suite_files import SuiteFormatError, open_text as _open
from .layer_fusion import generation_args
from ..progress import progress as progress_bar
from fairseq_fusion_tools.user_files import fail


PROG = "fusion-contrastive-translate"


def _fail(msg):
    fail(f"{PROG}: {msg}")


def _read_lines(flag, path, n):
    if not os.path.exists(path):
        _fail(f"{flag} {path}: no such file")
    with _open(path) as f:
        lines = [line.rstrip("\n") for line in f][:n]
    if len(lines) < n:
        _fail(f"{flag} {path}: {len(lines)} lines, the suite has {n}")
    return lines


def _read_patterns(path):
    """--sense-patterns: a JSON object {sense: regex}; each regex must compile."""
    import re

    if not os.path.exists(path):
        _fail(f"--sense-patterns {path}: no such file")
    try:
        with open(path, encoding="utf-8") as f:
            patterns = json.load(f)
    except json.JSONDecodeError as e:
        _fail(f"--sense-patterns {path}: line {e.lineno}: invalid JSON ({e.msg})")
    if not isinstance(patterns, dict) or not all(isinstance(v, str) for v in patterns.values()):
        _fail(f"--sense-patterns {path}: expected a JSON object {{sense: regex}}")
    for sense, regex in patterns.items():
        try:
            re.compile(regex)
        except re.error as e:
            _fail(f"--sense-patterns {path}: the pattern of {sense!r} is not a regular expression ({e})")
    return patterns


def main(args):
    if (args.path is None) == (args.hyp is None):
        _fail("give exactly one of --path (translate with the model) and --hyp (check existing translations)")
    if not os.path.isdir(args.suite):
        _fail(f"--suite {args.suite}: no such folder")
    model = task = None
    pair = args.pair
    if args.path is not None:
        try:
            model, task, _ = common.load_model(args.path, args.data, ast.literal_eval(args.model_overrides), args.cpu)
        except FileNotFoundError as e:
            _fail(str(e))
        pair = pair or f"{task.cfg.source_lang}-{task.cfg.target_lang}"
    try:
        suite = contrastive_translate.read_translation_suite(args.suite, pair, args.key)
        entries = patterns = None
        if suite.format == "ContraWSD WMT18":
            if suite.key_path is None:
                _fail(f"--suite {args.suite}: ContraWSD WMT18 is checked with its sense key {contrastive_translate.CONTRAWSD_KEY} "
                      f"(ZurichNLP/ContraWSD testsuite_wmt18/; which ambiguous word, which sense, how often in the source), "
                      f"which is not in this folder (the shared copy lacks it: over 4 MiB): give it with --key")
            if not os.path.exists(suite.key_path):
                _fail(f"--key {suite.key_path}: no such file")
            entries = contrastive_check.read_contrawsd_key(suite.key_path)
            if len(entries) != len(suite.sources):
                _fail(f"--key {suite.key_path}: {len(entries)} entries, but the suite has {len(suite.sources)} lines")
            if args.sense_patterns:
                patterns = _read_patterns(args.sense_patterns)
    except (SuiteFormatError, FileNotFoundError) as e:
        _fail(str(e))
    if model is not None and pair != f"{task.cfg.source_lang}-{task.cfg.target_lang}":
        _fail(f"--pair {pair}: the model translates {task.cfg.source_lang}-{task.cfg.target_lang}")
    n = len(suite.sources) if args.max_items is None else min(args.max_items, len(suite.sources))
    print(f"| {suite.format} {suite.pair}: {n} of {len(suite.sources)} lines from {args.suite}")
    if args.hyp is not None:
        hyps = _read_lines("--hyp", args.hyp, n)
    else:
        pre_src = lambda s: s  # noqa: E731
        if args.input_format == "raw":
            from fairseq_fusion.encoders.text_pipeline import TextPipeline

            pre_src = TextPipeline(args.data or task.cfg.data, task.cfg.source_lang)
        gen_args = generation_args(**{f.name: getattr(args, f.name) for f in dataclasses.fields(GenerationConfig)
                                      if hasattr(args, f.name)})
        hyps = contrastive_translate.translate(
            model, task, suite.sources[:n], pre_src, gen_args, task.cfg.target_lang, args.max_tokens,
            progress=lambda b: progress_bar(b, desc="translating"))
    lemmas = _read_lines("--lemmas", args.lemmas, n) if args.lemmas else None
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if suite.format == "MuCoW":
        suite.keys = suite.keys[:n]
        result = contrastive_check.check_mucow(suite, hyps, lemmas)
        for name, r in [("all", result["overall"])] + list(result["by_domain"].items()):
            print(f"| {name}: pos {r['pos']} neg {r['neg']} unk {r['unk']} coverage {100 * r['coverage']:.2f}% "
                  f"precision {100 * r['precision']:.2f}% recallA {100 * r['recallA']:.2f}% F1A {100 * r['f1A']:.2f}%")
    else:
        result = contrastive_check.check_contrawsd(entries[:n], hyps, patterns, args.ignore_wmt)
        o = result["overall"]
        print(f"| accuracy {100 * o['accuracy']:.2f}% ({o['only_correct']}/{o['total']}), other sense {o['only_other']}, "
              f"both {o['found_both']}, none {o['unfound']}")
        atomic_files.write_json(args.out + ".manual.json", result.pop("manual_evaluation"), ensure_ascii=False)
    result.update(checkpoint=args.path, hyp=args.hyp, suite_folder=args.suite, lines_checked=n)
    if args.hyp is None:
        atomic_files.write_lines(args.out + ".hyp", hyps)
    outputs.write_outputs(args.out, result, contrastive_check.plot(
        result, f"translations of {args.path}" if args.hyp is None else f"translations in {args.hyp}"))
    return result

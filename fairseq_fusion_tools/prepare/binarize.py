"""fairseq-preprocess run in this process on the BPE'd text (or on a release already tokenized and BPE'd,
--preprocessed), and DESTDIR/prepare.json, the record of how the text was preprocessed (read by ``TextPipeline``)."""
import json
import os
import shlex
import shutil

from .text_steps import read_lines, write_lines
from fairseq_fusion_tools.user_files import fail


def run_preprocess(argv):
    """fairseq-preprocess ``argv``, in this process (fairseq is imported already: a new interpreter would spend
    seconds importing it again); the command is printed as a user would type it."""
    from fairseq import options
    from fairseq_cli import preprocess

    print("| fairseq-preprocess " + shlex.join(argv), flush=True)
    handlers = preprocess.logger.handlers[:]
    try:
        preprocess.main(options.get_preprocessing_parser().parse_args(argv))
    finally:  # fairseq adds a handler writing DESTDIR/preprocess.log for every call, and never removes it
        for handler in preprocess.logger.handlers[len(handlers):]:
            handler.close()
        preprocess.logger.handlers = handlers


def binarize(args, train, valid, tests, extra=()):
    argv = [
        "--source-lang", args.source_lang, "--target-lang", args.target_lang,
        "--trainpref", train, "--validpref", valid, "--destdir", args.destdir, "--workers", str(args.workers),
    ] + ([] if args.separate_dictionaries else ["--joined-dictionary"]) + list(extra)
    if tests:
        argv += ["--testpref", ",".join(tests)]
    run_preprocess(argv)


def binarize_preprocessed(args):
    """--preprocessed: check the release's files, keep its codes and the raw test text, binarize."""
    src, tgt = args.source_lang, args.target_lang
    tests = args.testpref.split(",") if args.testpref else []
    raw_tests = args.raw_testpref.split(",") if args.raw_testpref else []
    if raw_tests and len(raw_tests) != len(tests):
        fail(f"--raw-testpref names {len(raw_tests)} sets but --testpref {len(tests)}")
    if args.bpe_codes and not os.path.isfile(args.bpe_codes):
        fail(f"--bpe-codes {args.bpe_codes}: no such file")
    for prefix in [args.trainpref, args.validpref] + tests:
        for lang in (src, tgt):
            if not os.path.isfile(f"{prefix}.{lang}"):
                fail(f"--preprocessed expects plain-text {prefix}.{lang} (tokenized and BPE'd); not found")
    os.makedirs(os.path.join(args.destdir, "tok"), exist_ok=True)
    for i, prefix in enumerate(tests):
        name = "test" if i == 0 else f"test{i}"
        bpe = {lang: read_lines(prefix, lang) for lang in (src, tgt)}
        for lang in (src, tgt):
            write_lines(os.path.join(args.destdir, "tok", f"{name}.bpe.{lang}"), bpe[lang])
            if raw_tests:
                raw = read_lines(raw_tests[i], lang)
                if len(raw) != len(bpe[lang]):
                    fail(f"--raw-testpref {raw_tests[i]}.{lang} has {len(raw)} lines but "
                             f"{prefix}.{lang} has {len(bpe[lang])}")
                write_lines(os.path.join(args.destdir, "tok", f"{name}.raw.{lang}"), raw)
    if args.bpe_codes:
        shutil.copyfile(args.bpe_codes, os.path.join(args.destdir, "bpe.codes"))
    write_manifest(args)
    extra = ["--nwordssrc", str(args.nwords), "--nwordstgt", str(args.nwords)] if args.nwords else []
    binarize(args, args.trainpref, args.validpref, tests, extra)


def write_manifest(args):
    """DESTDIR/prepare.json: how the text was preprocessed (read by ``TextPipeline``)."""
    manifest = {
        "source_lang": args.source_lang, "target_lang": args.target_lang,
        "tokenizer": ({"name": "none"} if getattr(args, "tokenizer", "moses") == "none" else
                      {"name": "sacremoses", "escape": False, "aggressive_dash_splits": True}),
        "truecase": bool(args.truecase), "bpe_merges": args.bpe_merges, "bpe_tool": args.bpe_tool,
        "bpe_vocab_threshold": args.bpe_vocab_threshold,
        "joined_dictionary": not args.separate_dictionaries,
        "normalize_punctuation": bool(args.normalize_punctuation),
        "zh_segmenter": args.zh_segmenter,
        "separate_bpe": bool(args.separate_bpe),
    }
    if args.preprocessed:  # the release's own pipeline: Moses tokens and its codes, if it gave them
        manifest.update(preprocessed=True, bpe_codes=bool(args.bpe_codes), bpe_merges=None, truecase=False,
                        normalize_punctuation=False, zh_segmenter="none", nwords=args.nwords)
    with open(os.path.join(args.destdir, "prepare.json"), "w") as f:
        json.dump(manifest, f, indent=2)

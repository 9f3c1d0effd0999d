"""fusion-prepare-text's run: checks of the command line, the raw-text pipeline (``text_steps``) into a folder built
beside --destdir (``destination``), binarized (``binarize``); --add-test: new test sets through the folder's own
pipeline and dictionaries."""
import json
import os
import shutil
import tempfile

from .binarize import binarize, binarize_preprocessed, run_preprocess, write_manifest
from .destination import build_in_place, move_into
from .text_steps import apply_bpe, clean_pairs, count_vocab, learn_bpe, read_lines, tokenize, train_truecaser, truecase, write_lines, write_vocab
from fairseq_fusion_tools.user_files import fail
from fairseq_fusion.encoders.bpe_tools import require_fastbpe
from fairseq_fusion.encoders.text_pipeline import codes_path


def add_test_sets(args):
    """--add-test: new test sets through the folder's own pipeline and dictionaries, staged in a hidden
    folder inside it and moved into place at the end (``move_into``), so an interruption adds nothing."""
    if args.overwrite:
        fail("--overwrite replaces a whole --destdir; --add-test only adds test sets to it: give one of them")
    src, tgt = args.source_lang, args.target_lang
    manifest_path = os.path.join(args.destdir, "prepare.json")
    needed = [manifest_path] + [os.path.join(args.destdir, f"dict.{l}.txt") for l in (src, tgt)]
    if not args.preprocessed:
        needed += [codes_path(args.destdir, l) for l in (src, tgt)]
    missing = [p for p in needed if not os.path.exists(p)]
    if missing:
        fail(f"--add-test needs a --destdir written by fusion-prepare-text: {', '.join(missing)} not found")
    with open(manifest_path) as f:
        manifest = json.load(f)
    if (manifest["source_lang"], manifest["target_lang"]) != (src, tgt):
        fail(f"{manifest_path} is {manifest['source_lang']}-{manifest['target_lang']}, not {src}-{tgt}")
    staging = tempfile.mkdtemp(prefix=".add-test-", dir=args.destdir)
    try:
        added = _add_test_sets(args, manifest, staging)
        move_into(staging, args.destdir)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for prefix, name in added:
        print(f"| added {prefix} as the {name} split of {args.destdir}", flush=True)


def _add_test_sets(args, manifest, staging):
    """Write the new splits' files into ``staging`` (laid out as the folder); returns [(prefix, split)]."""
    src, tgt = args.source_lang, args.target_lang
    tok_dir = os.path.join(staging, "tok")
    os.makedirs(tok_dir)
    threshold = manifest.get("bpe_vocab_threshold")
    raw_tests = args.raw_testpref.split(",") if args.raw_testpref else []
    added = []
    for i, prefix in enumerate(args.add_test.split(",")):
        k = 0
        while any(os.path.exists(os.path.join(folder, "tok", f"{'test' if k == 0 else f'test{k}'}.bpe.{src}"))
                  for folder in (args.destdir, staging)):
            k += 1
        name = "test" if k == 0 else f"test{k}"
        raw = {lang: read_lines(prefix, lang, args.max_lines) for lang in (src, tgt)}
        if len(raw[src]) != len(raw[tgt]):
            fail(f"{prefix}.{src} has {len(raw[src])} lines but {prefix}.{tgt} has {len(raw[tgt])}")
        for lang in (src, tgt):
            if args.preprocessed:  # already BPE'd: binarized as it is; --raw-testpref: its untokenized text
                write_lines(os.path.join(tok_dir, f"{name}.bpe.{lang}"), raw[lang])
                if i < len(raw_tests):
                    write_lines(os.path.join(tok_dir, f"{name}.raw.{lang}"), read_lines(raw_tests[i], lang, args.max_lines))
                continue
            tok = tokenize(raw[lang], lang, args.workers, f"tokenize {name}.{lang}", manifest.get("normalize_punctuation", False),
                           manifest.get("zh_segmenter", "none"), manifest.get("tokenizer", {}).get("name", "moses"))
            if manifest.get("truecase"):
                from sacremoses import MosesTruecaser

                tok = truecase(MosesTruecaser(load_from=os.path.join(args.destdir, f"truecase-model.{lang}")), tok)
            write_lines(os.path.join(tok_dir, f"{name}.{lang}"), tok)
            write_lines(os.path.join(tok_dir, f"{name}.raw.{lang}"), raw[lang])
            vocab = os.path.join(args.destdir, f"bpe.vocab.{lang}") if threshold else None
            apply_bpe(codes_path(args.destdir, lang), os.path.join(tok_dir, f"{name}.{lang}"),
                      os.path.join(tok_dir, f"{name}.bpe.{lang}"), manifest.get("bpe_tool", "subword-nmt"), vocab, threshold)
        with tempfile.TemporaryDirectory(dir=staging) as tmp:
            run_preprocess(["--source-lang", src, "--target-lang", tgt,
                            "--testpref", os.path.join(tok_dir, f"{name}.bpe"), "--destdir", tmp, "--workers", str(args.workers),
                            "--srcdict", os.path.join(args.destdir, f"dict.{src}.txt"),
                            "--tgtdict", os.path.join(args.destdir, f"dict.{tgt}.txt")])
            for f in os.listdir(tmp):
                if f.startswith("test."):
                    os.replace(os.path.join(tmp, f), os.path.join(staging, name + f[len("test"):]))
        added.append((prefix, name))
    return added


def main(args):
    import fairseq  # noqa: F401  (binarizing needs it: without it one line now, before any work; cli/__init__.py)

    if args.bpe_tool == "fastbpe" and not args.preprocessed:
        require_fastbpe("--bpe-tool fastbpe")  # before the tokenizing: one line without it

    if args.add_test:
        return add_test_sets(args)
    if not args.trainpref or not args.validpref:
        fail("--trainpref and --validpref are required (or --add-test to extend an existing --destdir)")
    for flag in ("bpe_codes", "raw_testpref", "nwords"):
        if getattr(args, flag) is not None and not args.preprocessed:
            fail(f"--{flag.replace('_', '-')} only goes with --preprocessed")
    if args.bpe_vocab_threshold is not None and args.bpe_vocab_threshold < 1:
        fail(f"--bpe-vocab-threshold must be >= 1, got {args.bpe_vocab_threshold}")
    build_in_place(args, binarize_preprocessed if args.preprocessed else prepare)


def prepare(args):
    """The raw-text pipeline, into ``args.destdir`` (a new folder)."""
    src, tgt = args.source_lang, args.target_lang
    tok_dir = os.path.join(args.destdir, "tok")
    os.makedirs(tok_dir, exist_ok=True)
    splits = [("train", args.trainpref), ("valid", args.validpref)]
    if args.testpref:
        splits += [("test" if i == 0 else f"test{i}", p) for i, p in enumerate(args.testpref.split(","))]
    truecasers = {}
    for split, prefix in splits:
        raw = {lang: read_lines(prefix, lang, args.max_lines) for lang in (src, tgt)}
        if len(raw[src]) != len(raw[tgt]):
            fail(f"{prefix}.{src} has {len(raw[src])} lines but {prefix}.{tgt} has {len(raw[tgt])}")
        tok = {lang: tokenize(raw[lang], lang, args.workers, f"tokenize {split}.{lang}", args.normalize_punctuation,
                              args.zh_segmenter, args.tokenizer)
               for lang in (src, tgt)}
        if split == "train":
            tok[src], tok[tgt] = clean_pairs(tok[src], tok[tgt], args.max_len, args.max_ratio,
                                              f"{prefix}.{src}-{tgt} (train)")
            if args.truecase:
                for lang in (src, tgt):
                    print(f"| training the truecaser of {lang}", flush=True)
                    truecasers[lang] = train_truecaser(tok[lang], os.path.join(args.destdir, f"truecase-model.{lang}"))
        if args.truecase:
            tok = {lang: truecase(truecasers[lang], tok[lang]) for lang in (src, tgt)}
        for lang in (src, tgt):
            write_lines(os.path.join(tok_dir, f"{split}.{lang}"), tok[lang])
            write_lines(os.path.join(tok_dir, f"{split}.raw.{lang}"), raw[lang])

    codes = {lang: os.path.join(args.destdir, f"bpe.codes.{lang}" if args.separate_bpe else "bpe.codes") for lang in (src, tgt)}
    if args.separate_bpe:
        for lang in (src, tgt):
            print(f"| learning {args.bpe_merges} BPE merges for {lang}", flush=True)
            learn_bpe([os.path.join(tok_dir, f"train.{lang}")], codes[lang], args.bpe_merges)
    else:
        print(f"| learning {args.bpe_merges} joint BPE merges", flush=True)
        learn_bpe([os.path.join(tok_dir, f"train.{lang}") for lang in (src, tgt)], codes[src], args.bpe_merges)
    vocabs = {lang: None for lang in (src, tgt)}
    if args.bpe_vocab_threshold is not None:  # subword-nmt README: BPE the training data, count, re-apply with the filter
        for lang in (src, tgt):
            bpe_train = os.path.join(tok_dir, f"train.bpe.{lang}")
            apply_bpe(codes[lang], os.path.join(tok_dir, f"train.{lang}"), bpe_train, args.bpe_tool)
            vocabs[lang] = os.path.join(args.destdir, f"bpe.vocab.{lang}")
            write_vocab(vocabs[lang], count_vocab(bpe_train))
    for split, _ in splits:
        for lang in (src, tgt):
            apply_bpe(codes[lang], os.path.join(tok_dir, f"{split}.{lang}"), os.path.join(tok_dir, f"{split}.bpe.{lang}"),
                      args.bpe_tool, vocabs[lang], args.bpe_vocab_threshold)
    write_manifest(args)
    binarize(args, os.path.join(tok_dir, "train.bpe"), os.path.join(tok_dir, "valid.bpe"),
             [os.path.join(tok_dir, f"{s}.bpe") for s, _ in splits if s.startswith("test")])

"""fusion-prepare-text: raw parallel text -> Moses tokens -> joint BPE -> fairseq-preprocess.

Reads ``PREFIX.LANG`` or ``PREFIX.LANG.gz`` for each split, tokenizes with sacremoses (or keeps the tokens: ``--tokenizer none``),
learns joint BPE on the training data of both languages (subword-nmt, or fastBPE for
applying the codes), and binarizes with ``fairseq-preprocess --joined-dictionary`` (or one dictionary
per language with ``--separate-dictionaries``, e.g. for Zh-En without shared embeddings).
Training pairs are cleaned (empty sides, over ``--max-len`` tokens, length ratio over
``--max-ratio``) as Moses' ``clean-corpus-n.perl`` does; valid and test sets are kept whole.
Optional, off by default: Moses truecasing (``--truecase``, a model per language trained on
the tokenized training data) and subword-nmt's vocabulary filter (``--bpe-vocab-threshold``:
only subwords seen that often in the language's BPE'd training text are produced, the rest
is split further), codes per language (``--separate-bpe``). ``DESTDIR/prepare.json`` records the
settings, so that new text can be preprocessed the same way (``TextPipeline``).
``--preprocessed`` binarizes data that its authors released already tokenized and BPE'd (Google's
WMT16 En-De, Lee et al.'s WMT16 En-Ro), keeping their codes (``--bpe-codes``) and the raw test
references (``--raw-testpref``).
The folder is built beside DESTDIR (``.DESTDIR.building-*``) and renamed into place when complete, so a
failure or Ctrl-C leaves no half-written folder; a DESTDIR that is not empty is refused unless
``--overwrite`` (the old folder is replaced only once the new one is complete). ``--add-test`` stages its
files inside the folder and moves them into place at the end (none of the folder's files is rewritten).
"""
import json
import argparse
import os
import shlex
import shutil
import sys
import tempfile
from contextlib import contextmanager
from multiprocessing import Pool

from .. import data_paths
from ..progress import progress
from fairseq_fusion.guards import text_files
from fairseq_fusion_tools.user_files import fail
from ._tools import description_of
from fairseq_fusion.encoders.bpe_tools import bpe_applier, require_fastbpe
from fairseq_fusion.encoders.text_pipeline import (  # noqa: F401  (TextPipeline: the same processing for new text)
    CJK_LANGS, TextPipeline, chinese_segmenter, codes_path, punctuation_normalizer,
)


def read_lines(prefix, lang, max_lines=None):
    path = data_paths.find_text(prefix, lang)
    lines = text_files.read_lines(path)  # a byte-order mark removed, with a warning naming the file
    return lines[:max_lines] if max_lines else lines


_TOKENIZER = None


_NORMALIZER = None
_SEGMENT = None
def check_segmented(lines, path_hint):
    """Refuse Chinese that looks unsegmented (whitespace tokens averaging over 4 CJK characters)."""
    import re

    cjk = re.compile(r"[\u4e00-\u9fff]")
    tokens = [t for line in lines[:2000] for t in line.split()]
    chars = sum(len(cjk.findall(t)) for t in tokens)
    if tokens and chars / len(tokens) > 4:
        fail(f"{path_hint} looks unsegmented ({chars / len(tokens):.1f} Chinese characters per "
                 "whitespace token): use --zh-segmenter jieba (the default) or segment it first")


def _init_tokenizer(lang, normalize=False, segmenter="none"):
    global _TOKENIZER, _NORMALIZER, _SEGMENT
    from sacremoses import MosesTokenizer

    _TOKENIZER = MosesTokenizer(lang=lang)
    _NORMALIZER = punctuation_normalizer(lang) if normalize else None
    _SEGMENT = chinese_segmenter(segmenter) if lang in CJK_LANGS else None


def _tokenize(line):
    if _NORMALIZER is not None:
        line = _NORMALIZER.normalize(line)
    if _SEGMENT is not None:
        line = _SEGMENT(line)
    return _TOKENIZER.tokenize(line, escape=False, return_str=True, aggressive_dash_splits=True)


def tokenize(lines, lang, workers, desc, normalize=False, segmenter="none", tokenizer="moses"):
    if tokenizer == "none":  # already tokenized: the tokens stay as they are (only spacing is normalized)
        return [" ".join(line.split()) for line in lines]
    if lang in CJK_LANGS and segmenter == "none":
        check_segmented(lines, f"the {lang} text ({desc})")
    elif lang in CJK_LANGS:
        chinese_segmenter(segmenter)  # a missing segmenter stops here, not in the worker processes
    with Pool(workers, initializer=_init_tokenizer, initargs=(lang, normalize, segmenter)) as pool:
        return list(progress(pool.imap(_tokenize, lines, chunksize=256), total=len(lines), desc=desc))


def clean_pairs(src, tgt, max_len, max_ratio):
    kept_src, kept_tgt = [], []
    for s, t in zip(src, tgt):
        ns, nt = len(s.split()), len(t.split())
        if ns == 0 or nt == 0 or ns > max_len or nt > max_len:
            continue
        if ns / nt > max_ratio or nt / ns > max_ratio:
            continue
        kept_src.append(s)
        kept_tgt.append(t)
    return kept_src, kept_tgt


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")


def learn_bpe(train_files, codes_path, merges, min_frequency=2):
    from subword_nmt.learn_bpe import learn_bpe as _learn

    joined = codes_path + ".train"
    with open(joined, "w", encoding="utf-8") as out:
        for path in train_files:
            with open(path, encoding="utf-8") as f:
                out.writelines(f)
    with open(joined, encoding="utf-8") as fin, open(codes_path, "w", encoding="utf-8") as fout:
        _learn(fin, fout, merges, min_frequency=min_frequency)
    os.remove(joined)


def train_truecaser(tok_lines, model_path):
    """Moses truecaser (``train-truecaser.perl``) trained on tokenized sentences, saved to ``model_path``."""
    from sacremoses import MosesTruecaser

    truecaser = MosesTruecaser()
    truecaser.train([line.split() for line in tok_lines], save_to=model_path)
    return truecaser


def truecase(truecaser, lines):
    return [truecaser.truecase(line, return_str=True) for line in lines]


def count_vocab(bpe_path):
    """subword-nmt ``get-vocab``: subword -> count in a BPE'd file."""
    counts = {}
    with open(bpe_path, encoding="utf-8") as f:
        for line in f:
            for tok in line.split():
                counts[tok] = counts.get(tok, 0) + 1
    return counts


def write_vocab(path, counts):
    with open(path, "w", encoding="utf-8") as f:
        for tok, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            f.write(f"{tok} {n}\n")


BPE_CHUNK = 10000  # lines per call of the BPE tool (fastBPE is fastest on many lines at once), one progress step


def apply_bpe(codes_path, in_path, out_path, tool, vocab_path=None, vocab_threshold=None):
    """Apply BPE codes with ``tool`` (subword-nmt or fastbpe, ``bpe_tools``); with ``vocab_path``, only produce
    subwords counted >= ``vocab_threshold`` there."""
    apply = bpe_applier(tool, codes_path, vocab_path, vocab_threshold)
    with open(in_path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    chunks = range(0, len(lines), BPE_CHUNK)
    write_lines(out_path, [out for i in progress(chunks, desc="bpe " + os.path.basename(in_path))
                           for out in apply(lines[i:i + BPE_CHUNK])])


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-prepare-text", description=description_of(__doc__))
    p.add_argument("--source-lang", "-s", required=True, help="Source language code, the suffix of the files (e.g. en).")
    p.add_argument("--target-lang", "-t", required=True, help="Target language code, the suffix of the files (e.g. de).")
    p.add_argument("--trainpref", default=None,
                   help="Prefix of the raw training files, PREFIX.SRC and PREFIX.TGT (.gz ok; required unless --add-test).")
    p.add_argument("--validpref", default=None,
                   help="Prefix of the raw validation files (required unless --add-test).")
    p.add_argument("--add-test", default=None, metavar="PREFIX[,PREFIX]",
                   help="Add test sets to an existing --destdir: they are processed with its tokenizer, truecaser, BPE "
                   "codes and dictionaries (nothing is re-learned) and binarized as the next free test, test1, test2, ....")
    p.add_argument("--testpref", default=None, help="Comma-separated prefixes of the raw test sets.")
    p.add_argument("--destdir", required=True, help="Output folder for the tokenized, BPE'd and binarized data (a new or "
                   "empty folder, unless --overwrite).")
    p.add_argument("--overwrite", action="store_true",
                   help="Replace a --destdir that is not empty (e.g. prepared before with other settings); the old "
                   "folder stays as it is until the new one is complete.")
    p.add_argument("--bpe-merges", type=int, default=4000, help="Number of BPE merge operations (default: 4000).")
    p.add_argument("--bpe-tool", choices=["subword-nmt", "fastbpe"], default="subword-nmt",
                   help="The tool that applies the codes (they are always learned with subword-nmt); prepare.json "
                   "records it, and new text gets the same one (--bpe prepared, the hub). fastbpe needs the fastbpe "
                   "extra: pip install 'fairseq_fusion[fastbpe]', or make install FASTBPE=1.")
    p.add_argument("--max-lines", type=int, default=None, help="Use only the first N lines of each split.")
    p.add_argument("--max-len", type=int, default=250, help="Drop training pairs with a side longer than this many tokens.")
    p.add_argument("--max-ratio", type=float, default=9.0, help="Drop training pairs with a larger length ratio.")
    p.add_argument("--truecase", action="store_true",
                   help="Train a Moses truecaser per language on the tokenized training data and truecase every split.")
    p.add_argument("--bpe-vocab-threshold", type=int, default=None, metavar="N",
                   help="subword-nmt --vocabulary-threshold: produce only subwords seen >= N times in that "
                        "language's BPE'd training data (default: no filter).")
    p.add_argument("--normalize-punctuation", action="store_true",
                   help="Moses punctuation normalization and non-printing-character removal before tokenizing "
                   "(fairseq's WMT prepare scripts; the recipes turn it on for WMT data).")
    p.add_argument("--zh-segmenter", choices=["jieba", "none"], default="jieba",
                   help="Word segmentation of Chinese (zh) before tokenizing: jieba (default) or none for text that is "
                   "already segmented (unsegmented text is refused).")
    p.add_argument("--tokenizer", choices=["moses", "none"], default="moses",
                   help="The tokenizer: moses (default, sacremoses) or none, for text that is already tokenized and stays "
                   "so, e.g. the GEC corpora, whose M2 edit offsets count their tokens.")
    p.add_argument("--separate-dictionaries", action="store_true",
                   help="One dictionary per language (default: a joined dictionary, which --share-all-embeddings needs).")
    p.add_argument("--separate-bpe", action="store_true",
                   help="Learn BPE codes per language (bpe.codes.SRC, bpe.codes.TGT; default: joint codes, as the papers).")
    g = p.add_argument_group("already preprocessed data (e.g. Google's WMT16 En-De, Lee et al.'s WMT16 En-Ro)")
    g.add_argument("--preprocessed", action="store_true",
                   help="The --trainpref/--validpref/--testpref files are already tokenized and BPE'd: only binarize them.")
    g.add_argument("--bpe-codes", default=None, metavar="FILE",
                   help="With --preprocessed: the release's BPE codes (subword-nmt format), kept so that new text "
                   "(analyses, --add-test) is processed the same way (Moses tokens, these codes).")
    g.add_argument("--raw-testpref", default=None, metavar="PREFIX[,PREFIX]",
                   help="With --preprocessed: the untokenized text of the test sets (same order and lines), "
                   "the references sacreBLEU scores against.")
    g.add_argument("--nwords", type=int, default=None,
                   help="With --preprocessed: keep this many dictionary entries (fairseq-preprocess --nwordssrc/--nwordstgt).")
    p.add_argument("--workers", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                   help="Processes for tokenizing and binarizing (default: up to 4, the CPU count).")
    return p





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


def move_into(staging, destdir):
    """Move every file of ``staging`` to the same place in ``destdir``, where none may exist yet; on an
    error or Ctrl-C midway the files moved so far are removed again, so ``destdir`` is as it was."""
    moves = [(os.path.join(root, f), os.path.join(destdir, os.path.relpath(os.path.join(root, f), staging)))
             for root, _, files in os.walk(staging) for f in files]
    taken = [dst for _, dst in moves if os.path.lexists(dst)]
    if taken:
        fail(f"--add-test would replace {', '.join(taken)}: files of --destdir {destdir} that its own splits do not account for")
    done = []
    try:
        for src, dst in moves:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.rename(src, dst)
            done.append(dst)
    except BaseException:
        for dst in done:
            os.remove(dst)
        raise


def is_prepared(folder):
    """A folder fusion-prepare-text or fusion-prepare-gpt2 wrote (or an older version, without prepare.json)."""
    return os.path.exists(os.path.join(folder, "prepare.json")) or any(
        f.startswith("dict.") and f.endswith(".txt") for f in os.listdir(folder))


def check_destination(destdir, overwrite):
    """Refuse a --destdir that holds anything (a prepared folder or other files) unless --overwrite."""
    if os.path.lexists(destdir) and not os.path.isdir(destdir):
        fail(f"--destdir {destdir} is a file, not a folder")
    if overwrite or not os.path.isdir(destdir) or not os.listdir(destdir):
        return
    if is_prepared(destdir):
        fail(f"--destdir {destdir} already holds a prepared folder: pass --overwrite to replace it (it stays as it is "
             "until the new one is complete), or give another --destdir")
    fail(f"--destdir {destdir} is not empty and not a prepared folder (fusion-prepare-text's or fusion-prepare-gpt2's): "
         "give a new or empty --destdir, or --overwrite to replace it with everything in it")


@contextmanager
def staged_folder(destdir):
    """Yield a new folder beside ``destdir`` (same parent, so the rename is atomic); when the block
    completes it takes ``destdir``'s place (an old ``destdir`` is moved aside, then removed); on an error
    or Ctrl-C it is removed and ``destdir`` is untouched."""
    destdir = os.path.realpath(destdir)
    parent, name = os.path.split(destdir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.building-", dir=parent)
    try:
        yield tmp
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private
        if os.path.isdir(destdir) and os.listdir(destdir):
            old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
            os.replace(destdir, old)
            try:
                os.replace(tmp, destdir)
            except BaseException:
                os.replace(old, destdir)
                raise
            shutil.rmtree(old)
        else:
            os.replace(tmp, destdir)  # a new name, or an empty folder's
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def name_the_destination(log, tmp, destdir):
    """fairseq-preprocess logged the staged folder as its --destdir: name the real one."""
    if os.path.exists(log):
        with open(log, encoding="utf-8") as f:
            text = f.read()
        with open(log, "w", encoding="utf-8") as f:
            f.write(text.replace(tmp, destdir))


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


def build_in_place(args, build):
    """``build(staged_args)`` into a folder beside ``args.destdir``, renamed into place when complete (a non-empty
    --destdir refused unless --overwrite); fusion-prepare-text's and fusion-prepare-gpt2's way of writing."""
    check_destination(args.destdir, args.overwrite)
    with staged_folder(args.destdir) as tmp:
        build(argparse.Namespace(**{**vars(args), "destdir": tmp}))
        name_the_destination(os.path.join(tmp, "preprocess.log"), tmp, os.path.realpath(args.destdir))
    print(f"| prepared {args.destdir} (built as {os.path.basename(tmp)} beside it, then renamed)", flush=True)


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
            tok[src], tok[tgt] = clean_pairs(tok[src], tok[tgt], args.max_len, args.max_ratio)
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


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

"""The steps of fusion-prepare-text's pipeline, one function each: read a split, tokenize (sacremoses; a long file in a
pool of workers; Chinese segmented first), clean the training pairs, truecase, learn and apply BPE, count the BPE vocabulary.
"""
import multiprocessing
import os

from .. import data_paths
from ..progress import progress
from fairseq_fusion.guards import text_files
from fairseq_fusion.guards.command_output import interrupts_held
from fairseq_fusion.errors import warn
from fairseq_fusion_tools.user_files import fail
from fairseq_fusion.encoders.bpe_tools import bpe_applier
from fairseq_fusion.encoders.text_pipeline import CJK_LANGS, chinese_segmenter, punctuation_normalizer


def read_lines(prefix, lang, max_lines=None):
    path = data_paths.find_text(prefix, lang)
    lines = text_files.read_lines(path)  # a byte-order mark removed, with a warning naming the file
    return lines[:max_lines] if max_lines else lines


_TOKENIZER = None  # the worker's tokenizer, normalizer and segmenter (``_init_tokenizer``)
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


def _worker_pool():
    """The tokenizers' processes start from a fork server, a process of one thread that has imported this module once:
    a plain fork of a process with threads (torch's, a test runner's) can copy a held lock into the child, which then
    waits forever (seen: fusion-prepare-text run inside a pytest-xdist worker)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    _start_fork_server_without_ctrl_c()
    return context


def _start_fork_server_without_ctrl_c():
    """The fork server and the workers it forks ignore Ctrl-C (SIGINT, sent to the terminal's whole process group):
    this process, the command, reports it in one line and ends the pool (``with Pool``), where each of them would
    print its own traceback (the server's while it imports this module, 4 s). The server keeps the Ctrl-C setting it
    started with, and gives it to its workers; this process's own is back right after the start (a main thread's
    only: elsewhere the server starts as it would)."""
    import signal
    import threading
    from multiprocessing import forkserver

    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)


# A file of fewer lines is tokenized in this process: one process tokenizes about 20,000 Multi30k lines a second
# (sacremoses, 2026-11-28, this repository's 2-core test machine), and a pool costs about 4 s the first time (its fork
# server imports fairseq) and 0.5 s for each later file. Multi30k (29k training lines) is quicker in one process;
# WMT-size training data goes to the pool.
POOL_MIN_LINES = 50000


def tokenize(lines, lang, workers, desc, normalize=False, segmenter="none", tokenizer="moses"):
    if tokenizer == "none":  # already tokenized: the tokens stay as they are (only spacing is normalized)
        return [" ".join(line.split()) for line in lines]
    if lang in CJK_LANGS and segmenter == "none":
        check_segmented(lines, f"the {lang} text ({desc})")
    elif lang in CJK_LANGS:
        chinese_segmenter(segmenter)  # a missing segmenter stops here, not in the worker processes
    if workers <= 1 or len(lines) < POOL_MIN_LINES:
        _init_tokenizer(lang, normalize, segmenter)
        return [_tokenize(line) for line in progress(lines, total=len(lines), desc=desc)]
    # Ctrl-C waits until every worker has started: a worker the fork server is still starting would be left out of
    # the pool's end (and fail on its gone semaphores, with a traceback)
    started = []
    try:
        with interrupts_held("starting the tokenizer workers"):
            started.append(_worker_pool().Pool(workers, initializer=_init_tokenizer,
                                               initargs=(lang, normalize, segmenter)))
    except KeyboardInterrupt:
        for pool in started:
            pool.terminate()
        raise
    with started[0] as pool:
        return list(progress(pool.imap(_tokenize, lines, chunksize=256), total=len(lines), desc=desc))


def clean_pairs(src, tgt, max_len, max_ratio, name="the training pairs"):
    """The pairs of ``src`` and ``tgt`` (tokenized) with both sides non-empty, at most ``max_len`` tokens and a length
    ratio of at most ``max_ratio`` (Moses' clean-corpus-n); how many were dropped, and why, in one warning."""
    kept_src, kept_tgt = [], []
    dropped = {"empty": 0, "long": 0, "ratio": 0}
    for s, t in zip(src, tgt):
        ns, nt = len(s.split()), len(t.split())
        if ns == 0 or nt == 0:
            dropped["empty"] += 1
        elif ns > max_len or nt > max_len:
            dropped["long"] += 1
        elif ns / nt > max_ratio or nt / ns > max_ratio:
            dropped["ratio"] += 1
        else:
            kept_src.append(s)
            kept_tgt.append(t)
    if any(dropped.values()):
        why = [f"{n} {what}" for n, what in [(dropped["empty"], "with an empty side"),
                                             (dropped["long"], f"over --max-len {max_len} tokens"),
                                             (dropped["ratio"], f"with a length ratio over --max-ratio {max_ratio}")] if n]
        warn(f"{name}: {sum(dropped.values())} of {len(src)} pairs dropped ({', '.join(why)}); "
             f"{len(kept_src)} kept")
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

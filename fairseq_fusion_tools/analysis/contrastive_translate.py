"""Translation test suites (translate-then-check): readers and the model's translations.

- MuCoW translation suite (Helsinki-NLP/MuCoW ``WMT2019/translation test suite/txt``): a folder
  with ``<PAIR>.{text,ref,key,domain}.txt`` (``.gz`` allowed), line-aligned text/ref/key;
  key = ``id \\t corpus \\t ambiguous word \\t correct-sense words \\t other-sense words`` (words
  space-separated); domain = ``ambiguous word \\t correct-sense words \\t in|out \\t ...``.
- ContraWSD WMT18 (ZurichNLP/ContraWSD ``testsuite_wmt18``): a folder with
  ``de-en.wsd.task.{de,en.detok,doc_ids.de}``; the sense key (which ambiguous word, which sense,
  how often in the source) is ``de-en.wsd.task.json``, which the authors' ``evaluate.py`` reads.
  It is not part of the shared copy (over 4 MiB); give it with ``--key`` (see ``contrastive_check``).
"""
import os
from dataclasses import dataclass, field
from typing import List, Optional

from .suite_files import SuiteFormatError, open_text as _open

CONTRAWSD_PREFIX = "de-en.wsd.task"
CONTRAWSD_KEY = CONTRAWSD_PREFIX + ".json"


def _maybe(folder, name):
    for p in (os.path.join(folder, name), os.path.join(folder, name + ".gz")):
        if os.path.exists(p):
            return p
    return None


def _lines(path):
    with _open(path) as f:
        return [line.rstrip("\n") for line in f]


def mucow_pairs(folder) -> List[str]:
    return sorted({n.split(".")[0] for n in os.listdir(folder) if ".key.txt" in n})


def translation_suite_format(folder) -> Optional[str]:
    """"MuCoW" or "ContraWSD WMT18" when ``folder`` holds such a suite's files, else None."""
    if not os.path.isdir(folder):
        return None
    if mucow_pairs(folder):
        return "MuCoW"
    if _maybe(folder, CONTRAWSD_PREFIX + ".de"):
        return "ContraWSD WMT18"
    return None


@dataclass
class TranslationSuite:
    format: str
    pair: str
    sources: List[str]
    references: List[str]
    where: str  # the sources' file
    keys: list = field(default_factory=list)  # MuCoW: (id, corpus, word, correct words, other words) per line
    domains: dict = field(default_factory=dict)  # MuCoW: (word, "correct words") -> "in" | "out"
    doc_ids: List[str] = field(default_factory=list)  # ContraWSD WMT18
    key_path: Optional[str] = None  # ContraWSD WMT18: the sense key, when found


def _aligned(paths, columns):
    n = len(columns[0])
    for p, c in zip(paths[1:], columns[1:]):
        if len(c) != n:
            raise SuiteFormatError(f"{p}: {len(c)} lines, but {paths[0]} has {n} (the files must be line-aligned)")


def read_mucow(folder: str, pair: str) -> TranslationSuite:
    """A MuCoW translation suite for ``pair`` (e.g. de-en); errors name the file and line."""
    paths = []
    for part in ("text", "ref", "key", "domain"):
        p = _maybe(folder, f"{pair}.{part}.txt")
        if p is None:
            raise FileNotFoundError(f"{folder}: no {pair}.{part}.txt[.gz] (MuCoW suite pairs here: "
                                    f"{', '.join(mucow_pairs(folder)) or 'none'})")
        paths.append(p)
    text, ref, key_lines, domain_lines = (_lines(p) for p in paths)
    _aligned(paths[:3], [text, ref, key_lines])
    domains = {}
    for i, line in enumerate(domain_lines, 1):
        f = line.split("\t")
        if len(f) < 3 or f[2] not in ("in", "out") or not f[0] or not f[1]:
            raise SuiteFormatError(f"{paths[3]}: line {i}: expected 'ambiguous word<TAB>correct-sense words<TAB>in|out...'")
        domains[(f[0], f[1])] = f[2]
    keys = []
    for i, line in enumerate(key_lines, 1):
        f = line.split("\t")
        if len(f) != 5 or not f[2] or not f[3].strip():
            raise SuiteFormatError(f"{paths[2]}: line {i}: expected 5 tab-separated fields 'id, corpus, ambiguous word, "
                                   f"correct-sense words, other-sense words' with a word and correct words, got {len(f)} fields")
        if (f[2], f[3]) not in domains:
            raise SuiteFormatError(f"{paths[2]}: line {i}: ({f[2]!r}, {f[3]!r}) has no line in {paths[3]}")
        keys.append((f[0], f[1], f[2], tuple(f[3].split(" ")), tuple(w for w in f[4].split(" ") if w)))
    for i, s in enumerate(text, 1):
        if not s.strip():
            raise SuiteFormatError(f"{paths[0]}: line {i}: empty source sentence")
    return TranslationSuite("MuCoW", pair, text, ref, paths[0], keys=keys, domains=domains)


def read_contrawsd_wmt18(folder: str, key: Optional[str] = None) -> TranslationSuite:
    """The ContraWSD WMT18 suite (German sources, detokenized English references, document ids)."""
    names = [CONTRAWSD_PREFIX + ext for ext in (".de", ".en.detok", ".doc_ids.de")]
    paths = [_maybe(folder, n) for n in names]
    for n, p in zip(names, paths):
        if p is None:
            raise FileNotFoundError(f"{folder}: no {n}[.gz] (the ContraWSD WMT18 suite has {', '.join(names)})")
    de, en, docs = (_lines(p) for p in paths)
    _aligned(paths, [de, en, docs])
    doc_ids = []
    for i, (line, s) in enumerate(zip(docs, de), 1):
        doc, _, sent = line.partition("\t")
        if sent != s:
            raise SuiteFormatError(f"{paths[2]}: line {i}: expected '<doc id><TAB><the German sentence of line {i} of {paths[0]}>'")
        doc_ids.append(doc)
    key = key or _maybe(folder, CONTRAWSD_KEY)
    return TranslationSuite("ContraWSD WMT18", "de-en", de, en, paths[0], doc_ids=doc_ids, key_path=key)


def read_translation_suite(path: str, pair: Optional[str] = None, key: Optional[str] = None) -> TranslationSuite:
    kind = translation_suite_format(path)
    if kind == "MuCoW":
        pairs = mucow_pairs(path)
        if pair is None and len(pairs) > 1:
            raise SuiteFormatError(f"{path}: MuCoW suites for {', '.join(pairs)}: choose one with --pair")
        return read_mucow(path, pair or pairs[0])
    if kind == "ContraWSD WMT18":
        if pair not in (None, "de-en"):
            raise SuiteFormatError(f"{path}: the ContraWSD WMT18 suite is de-en, not --pair {pair}")
        return read_contrawsd_wmt18(path, key)
    raise SuiteFormatError(f"{path}: expected a translation test suite folder: MuCoW (<PAIR>.{{text,ref,key,domain}}.txt) "
                           f"or ContraWSD WMT18 ({CONTRAWSD_PREFIX}.{{de,en.detok,doc_ids.de}})")


def translate(model, task, sources, pre_src, gen_args, tgt_lang, max_tokens=4000, detokenize=True, progress=None):
    """Translations of raw ``sources`` with fairseq's generator (``task.build_generator``, ``gen_args`` as
    fairseq-generate's options): BPE removed (subword_nmt), Moses-detokenized unless ``detokenize`` is False."""
    import torch
    from fairseq import utils
    from sacremoses import MosesDetokenizer

    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    tokens = [src_dict.encode_line(pre_src(s), add_if_not_exist=False, append_eos=True).long() for s in sources]
    dataset = task.build_dataset_for_inference(tokens, [len(t) for t in tokens])
    batches = dataset.batch_by_size(dataset.ordered_indices(), max_tokens=max_tokens)
    generator = task.build_generator([model], gen_args)
    detok = MosesDetokenizer(lang=tgt_lang) if detokenize else None
    device = next(model.parameters()).device
    out = [None] * len(sources)
    with torch.no_grad():
        for batch in (progress(batches) if progress else batches):
            sample = dataset.collater([dataset[i] for i in batch])
            if device.type == "cuda":
                sample = utils.move_to_cuda(sample)
            hyps = task.inference_step(generator, [model], sample)
            for i, sid in enumerate(sample["id"].tolist()):
                text = tgt_dict.string(hyps[i][0]["tokens"].int().cpu(), "subword_nmt")
                out[sid] = detok.detokenize(text.split()) if detok else text
    return out

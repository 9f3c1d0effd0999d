"""BLEU as the papers report it, BLEU by source length, and paired significance.

- Detokenized BLEU: sacreBLEU (Post, 2018) on detokenized output against the raw reference,
  with its signature (Emelin et al. 2019, Sec. 3.3).
- Tokenized BLEU: multi-bleu.perl / tensor2tensor ``get_ende_bleu.sh``: hypothesis and
  reference are Moses-tokenized, hyphenated compounds are split (``a-b`` -> ``a ##AT##-##AT## b``)
  for En-De and En-Fr (Vaswani et al. 2017; Emelin et al. Table 1 col. 1; Yang et al. 2020 A.1,
  Liu et al. 2021), Chinese is split into characters (Yang et al. A.1); BLEU is computed on the
  tokens as they are (sacreBLEU with ``tokenize="none"``, which is multi-bleu's formula).
- BLEU by source-length bucket: Dou et al. 2018 Fig. 4 and Xu et al. 2020 Fig. 3 group test
  sentences by source length ((0,15], (15,30], (30,45], >45 words) and compute corpus BLEU per group.
- Paired significance: sacreBLEU's paired bootstrap resampling (Koehn 2004, as used by Xu et al.)
  or approximate randomization.
"""
import functools
import math
import re
from typing import Dict, List, Optional, Sequence

from fairseq_fusion.encoders.text_pipeline import detokenize  # noqa: F401  (scorers detokenize as --bpe prepared does)
from fairseq_fusion.guards import text_files
from fairseq_fusion.errors import FusionError

CJK = re.compile(r"([\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef])")
COMPOUND = re.compile(r"(\S)-(\S)")


def read_lines(path: str) -> List[str]:
    """Lines of a text file (``.gz`` is read as gzip; a byte-order mark removed, with a warning), without newlines."""
    return text_files.read_lines(path)


def read_generate_output(path: str, bpe_symbol: str = "@@ ") -> Dict[str, List[str]]:
    """Hypotheses (``H-``), targets (``T-``), sources (``S-``) and detokenized hypotheses (``D-``, written when
    generation decodes a ``--bpe``/``--tokenizer``, e.g. GPT-2 BPE) of a ``fairseq-generate`` log, by sentence id.

    With several hypotheses per sentence (``--nbest``) the first (best) is kept. BPE left in the
    output (generation without ``--remove-bpe``) is removed.
    """
    found = {"H": {}, "T": {}, "S": {}, "D": {}}
    with text_files.open_text(path) as f:
        for lineno, line in enumerate(f, 1):
            m = re.match(r"^([HTSD])-(\d+)\t", line)
            if not m:
                continue
            fields = line.rstrip("\n").split("\t")
            text = fields[-1] if len(fields) > 1 else ""
            text = (text + " ").replace(bpe_symbol, "").rstrip()
            found[m.group(1)].setdefault(int(m.group(2)), text)
    if not found["H"]:
        raise FusionError(f"{path}: no hypothesis lines (H-<id>\\t...): not a fairseq-generate output (plain text: "
                          "--hyp-format tok or detok)")
    ids = sorted(found["H"])
    if ids != list(range(len(ids))):
        missing = sorted(set(range(ids[-1] + 1)) - set(ids))[:5]
        raise FusionError(f"{path}: hypotheses of sentences {missing} are missing (incomplete generation?)")
    return {k: [v.get(i, "") for i in ids] if v else [] for k, v in found.items()}


def read_hypotheses(path: str, hyp_format: str) -> List[str]:
    """A system's output as the scorers' ``--hyp-format`` names it: a ``fairseq-generate`` log (its detokenized ``D-``
    lines where it wrote them, else its ``H-`` lines, BPE removed, in sentence-id order) or one sentence a line."""
    if hyp_format == "generate":
        found = read_generate_output(path)
        return found["D"] or found["H"]
    return read_lines(path)


def generate_own_score(path: str, bpe_symbol: str = "@@ "):
    """(fairseq-generate's own score, what it was computed on) of a generate log, or None: the last
    ``Generate SPLIT with beam=N: BLEU4 = ...`` line, a score of what fairseq's scorer saw (subword units unless
    ``--remove-bpe``), never of the raw reference."""
    score, subwords = None, False
    with text_files.open_text(path, errors="replace") as f:
        for line in f:
            if line.startswith("Generate ") and ": " in line and "BLEU" in line:
                score = line.split(": ", 1)[1].strip()
            elif line.startswith("H-") and bpe_symbol in line.rstrip("\n") + " ":
                subwords = True
    if score is None:
        return None
    return score, "subword units (BPE left in: no --remove-bpe)" if subwords else "fairseq's tokenized text"


@functools.lru_cache(maxsize=None)
def moses_tokenizer(lang: str):
    """sacremoses' tokenizer of ``lang``, built once (its regular expressions take about a second)."""
    from sacremoses import MosesTokenizer

    return MosesTokenizer(lang=lang)


def tokenize_for_bleu(lines: Sequence[str], lang: str, split: str = "auto") -> List[str]:
    """Moses-tokenize detokenized text for tokenized BLEU; ``split``: compound, chars, none or auto by language."""
    split = bleu_split(lang) if split == "auto" else split
    tok = moses_tokenizer(lang)
    out = []
    for line in lines:
        line = tok.tokenize(line, escape=False, return_str=True)
        if split == "compound":
            line = compound_split(line)
        elif split == "chars":
            line = char_split(line)
        out.append(line)
    return out


def bleu_split(lang: str) -> str:
    """The papers' post-processing for tokenized BLEU: compound splitting (de, fr), characters (zh)."""
    return {"de": "compound", "fr": "compound", "zh": "chars"}.get(lang, "none")


def compound_split(line: str) -> str:
    """tensor2tensor ``get_ende_bleu.sh``: ``perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'``."""
    return COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def char_split(line: str) -> str:
    """Every CJK character becomes a token (Yang et al. 2020, A.1: Chinese split into characters)."""
    return " ".join(CJK.sub(r" \1 ", line).split())


# sacreBLEU's tokenizer for detokenized BLEU by target language (what ``sacrebleu -l SRC-TGT`` picks)
SACREBLEU_TOKENIZERS = {"zh": "zh", "ja": "ja-mecab", "ko": "ko-mecab"}


def sacrebleu_tokenizer(lang: str = None, requested: str = "auto") -> str:
    """``requested`` unless "auto": zh for Chinese, ja-mecab / ko-mecab for Japanese / Korean (their
    MeCab packages must be installed: ``pip install sacrebleu[ja]`` / ``sacrebleu[ko]``), else 13a."""
    import sacrebleu

    name = SACREBLEU_TOKENIZERS.get(lang, "13a") if requested == "auto" else requested
    try:
        sacrebleu.metrics.BLEU(tokenize=name)
    except Exception as e:  # an unknown name, or the MeCab package missing
        raise ValueError(f"sacreBLEU tokenizer {name!r} for target language {lang!r} cannot be used: {e} "
                         "(install it, e.g. pip install 'sacrebleu[ja]', or pass --sacrebleu-tokenize)") from None
    return name


def corpus_bleu(hyps: Sequence[str], refs: Sequence[str], tokenized: bool = False, tokenize: str = "13a"):
    """sacreBLEU's corpus BLEU; ``tokenized``: the text is already tokenized (multi-bleu.perl's counts);
    else sacreBLEU tokenizes it with ``tokenize`` (see ``sacrebleu_tokenizer``)."""
    import sacrebleu

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references: the files must be line-aligned")
    bleu = sacrebleu.metrics.BLEU(tokenize="none" if tokenized else tokenize, force=tokenized)
    return bleu.corpus_score(list(hyps), [list(refs)]), bleu.get_signature()


def score(hyps_detok, refs_raw, lang, detok_only=False, split="auto", tokenize="auto"):
    """Both BLEUs of line-aligned detokenized hypotheses and raw references, as a dict; detokenized
    BLEU with sacreBLEU's tokenizer for ``lang`` (zh, ja-mecab, ko-mecab, else 13a) unless ``tokenize``."""
    res, sig = corpus_bleu(hyps_detok, refs_raw, tokenize=sacrebleu_tokenizer(lang, tokenize))
    result = {"sacrebleu": {"score": res.score, "signature": str(sig), "text": str(res)}}
    if not detok_only:
        split = bleu_split(lang) if split == "auto" else split
        tok_res, _ = corpus_bleu(tokenize_for_bleu(hyps_detok, lang, split), tokenize_for_bleu(refs_raw, lang, split), tokenized=True)
        result["tokenized_bleu"] = {"score": tok_res.score, "split": split, "text": str(tok_res)}
    return result


DEFAULT_BUCKETS = (15, 30, 45)  # Dou et al. Fig. 4 (right), Xu et al. Fig. 3


def bucket_names(bounds: Sequence[int]) -> List[str]:
    names, low = [], 0
    for b in bounds:
        names.append(f"({low},{b}]")
        low = b
    return names + [f">{low}"]


def bucket_of(length: int, bounds: Sequence[int]) -> int:
    for i, b in enumerate(bounds):
        if length <= b:
            return i
    return len(bounds)


def bleu_by_length(sources: Sequence[str], refs: Sequence[str], systems: Dict[str, Sequence[str]],
                   bounds: Sequence[int] = DEFAULT_BUCKETS, tokenized: bool = False) -> dict:
    """Corpus BLEU of each system on the sentences of each source-length bucket (length = whitespace words)."""
    bounds = sorted(bounds)
    if any(b <= 0 for b in bounds) or len(set(bounds)) != len(bounds):
        raise ValueError(f"bucket bounds must be distinct positive lengths, got {list(bounds)}")
    for name, hyps in systems.items():
        if len(hyps) != len(sources) or len(refs) != len(sources):
            raise ValueError(f"system {name!r} has {len(hyps)} lines, sources {len(sources)}, references {len(refs)}: not line-aligned")
    groups = [[] for _ in range(len(bounds) + 1)]
    for i, s in enumerate(sources):
        groups[bucket_of(len(s.split()), bounds)].append(i)
    names = bucket_names(bounds)
    out = {"buckets": names, "sentences": [len(g) for g in groups], "bleu": {}, "overall": {}}
    for name, hyps in systems.items():
        out["bleu"][name] = [
            corpus_bleu([hyps[i] for i in g], [refs[i] for i in g], tokenized)[0].score if g else None for g in groups
        ]
        out["overall"][name] = corpus_bleu(hyps, refs, tokenized)[0].score
    return out


def plot_bleu_by_length(result: dict, title: Optional[str] = None):
    from ..outputs import figure_title, mark_narrow_range, new_figure

    fig, ax = new_figure(figsize=(5, 3.5))
    x = list(range(len(result["buckets"])))
    for name, scores in result["bleu"].items():
        ax.plot([i for i, s in zip(x, scores) if s is not None], [s for s in scores if s is not None], marker="o", label=name)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{b}\n(n={n})" for b, n in zip(result["buckets"], result["sentences"])])
    ax.set_xlabel("Length of source sentence")
    ax.set_ylabel("BLEU")
    mark_narrow_range(ax)
    if title:
        figure_title(fig, title)
    ax.legend()
    return fig


def paired_significance(refs: Sequence[str], baseline: Sequence[str], systems: Dict[str, Sequence[str]],
                        test: str = "bs", n_samples: int = 0, baseline_name: str = "baseline",
                        tokenized: bool = False) -> dict:
    """sacreBLEU's paired test (``bs``: bootstrap resampling, Koehn 2004; ``ar``: approximate randomization).

    The seed is sacreBLEU's (env ``SACREBLEU_SEED``, default 12345), so results equal ``sacrebleu --paired-bs``.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    for name, hyps in [(baseline_name, baseline)] + list(systems.items()):
        if len(hyps) != len(refs):
            raise ValueError(f"system {name!r} has {len(hyps)} lines but the reference {len(refs)}")
    named = [(baseline_name, list(baseline))] + [(n, list(h)) for n, h in systems.items()]
    metric = BLEU(tokenize="none" if tokenized else "13a", force=tokenized, references=[list(refs)])
    sigs, scores = PairedTest(named, {"BLEU": metric}, references=None, test_type=test, n_samples=n_samples)()
    out = {"test": test, "signature": str(sigs["BLEU"]), "systems": []}
    for name, (_, hyps), res in zip(scores["System"], named, scores["BLEU"]):
        # sacreBLEU counts resampled differences strictly above the observed one, so a system whose output equals
        # the baseline's gets its smallest p, 1/(n+1): "significant". Such a pair is reported as the same output.
        same = hyps is not named[0][1] and hyps == named[0][1]
        out["systems"].append({
            "name": name, "bleu": res.score, "p_value": None if same else res.p_value, "same_output": same,
            "mean": res.mean, "ci": res.ci,
        })
    return out


def sign_test(refs: Sequence[str], baseline: Sequence[str], systems: Dict[str, Sequence[str]],
              baseline_name: str = "baseline", tokenized: bool = False) -> dict:
    """Collins et al. (2005)'s sign test, as Dou et al. (2018) use it: for each sentence, corpus BLEU of
    the baseline with that one sentence's translation replaced by the system's goes up (+), down (-)
    or stays (tie); p = the two-sided binomial probability of at least as many +/- out of the
    untied sentences under p = 1/2."""
    import numpy as np
    from sacrebleu.metrics import BLEU

    for name, hyps in [(baseline_name, baseline)] + list(systems.items()):
        if len(hyps) != len(refs):
            raise ValueError(f"system {name!r} has {len(hyps)} lines but the reference {len(refs)}")
    bleu = BLEU(tokenize="none" if tokenized else "13a", force=tokenized)
    base_stats = np.array(bleu._extract_corpus_statistics(list(baseline), [list(refs)]), dtype=np.int64)
    total = base_stats.sum(axis=0)
    base_score = bleu._compute_score_from_stats(total.tolist()).score
    out = {"test": "sign", "baseline": baseline_name, "baseline_bleu": base_score, "systems": []}
    for name, hyps in systems.items():
        stats = np.array(bleu._extract_corpus_statistics(list(hyps), [list(refs)]), dtype=np.int64)
        plus = minus = 0
        for i in range(len(refs)):
            swapped = bleu._compute_score_from_stats((total - base_stats[i] + stats[i]).tolist()).score
            plus += swapped > base_score
            minus += swapped < base_score
        n, k = plus + minus, max(plus, minus)
        p = min(1.0, 2 * sum(math.comb(n, j) for j in range(k, n + 1)) / 2 ** n) if n else 1.0
        out["systems"].append({"name": name, "bleu": bleu.corpus_score(list(hyps), [list(refs)]).score,
                               "better": int(plus), "worse": int(minus), "ties": len(refs) - n, "p_value": p})
    return out

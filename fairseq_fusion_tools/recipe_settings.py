"""The papers' settings per WMT task: data, BPE, training and decoding.

Used by every ``recipes/<task>/{prepare,train,evaluate}.sh`` through its command line,
``python recipes/common/settings.py prepare|train|evaluate ...`` (prints shell variable assignments), by the
benchmark (the papers' beams) and by ``tests/test_recipes.py``. Sources, by paper:

- emelin: Emelin, Titov, Sennrich 2019, App. A.1-A.2 and Tables 1-3, 5.
- dou: Dou et al. 2018, Sec. 4.1 and Tables 1-2 (other settings: Vaswani et al. 2017).
- xu: Xu et al. 2020, Sec. "Settings" (other settings: Vaswani et al. 2017).
- yang: Yang et al. 2020, Sec. 3 "Models" and App. A.1-A.2.
- liu: Liu et al. 2021, App. A.1 Table 4 and Sec. 4.1 (En-De/En-Fr follow Ott et al. 2018).
- vaswani: Vaswani et al. 2017 (the baseline every paper starts from); multi30k: this project's small setting.
"""
import argparse
import math
import shlex
import sys

# ---------------------------------------------------------------------------------------------
# tasks: official data (URLs; sacreBLEU test-set names for dev/test) and the papers that use them
# ---------------------------------------------------------------------------------------------
STATMT = "http://statmt.org"
OPUS_UNPC = "https://object.pouta.csc.fi/OPUS-UNPC/v1.0/moses/{pair}.txt.zip"
PARACRAWL_V1 = "https://s3.amazonaws.com/web-language-models/paracrawl/release1/paracrawl-release1.{pair}.zipporah0-dedup-clean.tgz"
TASKS = {
    "wmt14_en_de": dict(
        src="en", tgt="de", papers=["emelin", "dou", "xu", "yang", "liu"],
        train=[  # fairseq examples/translation/prepare-wmt14en2de.sh --icml17 (the WMT14 data)
            (f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz", "training/europarl-v7.de-en"),
            (f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz", "commoncrawl.de-en"),
            (f"{STATMT}/wmt14/training-parallel-nc-v9.tgz", "training/news-commentary-v9.de-en"),
        ],
        # newstest2014 for every paper (subset test); Emelin et al. Table 1 also newstest2015-2018 (test1-test4; De->En
        # Table 2: newstest2014 and newstest2017)
        valid=[("wmt13", "newstest2013")],
        test=[("wmt14/full", "newstest2014"), ("wmt15", "newstest2015"), ("wmt16", "newstest2016"), ("wmt17", "newstest2017"),
              ("wmt18", "newstest2018")],
    ),
    "wmt14_en_fr": dict(
        src="en", tgt="fr", papers=["xu", "yang", "liu"],
        train=[  # fairseq examples/translation/prepare-wmt14en2fr.sh
            (f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz", "training/europarl-v7.fr-en"),
            (f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz", "commoncrawl.fr-en"),
            (f"{STATMT}/wmt13/training-parallel-un.tgz", "un/undoc.2000.fr-en"),
            (f"{STATMT}/wmt14/training-parallel-nc-v9.tgz", "training/news-commentary-v9.fr-en"),
            (f"{STATMT}/wmt10/training-giga-fren.tar", "giga-fren.release2.fixed"),
        ],
        valid=[("wmt13", "newstest2013")], test=[("wmt14/full", "newstest2014")],
    ),
    "wmt16_ro_en": dict(
        src="ro", tgt="en", papers=["liu"],
        train=[
            ("http://data.statmt.org/wmt16/translation-task/training-parallel-ep-v8.tgz", "training-parallel-ep-v8/europarl-v8.ro-en"),
            ("http://opus.nlpl.eu/download.php?f=SETIMES/v2/moses/en-ro.txt.zip", "SETIMES.en-ro"),
        ],
        valid=[("wmt16/dev", "newsdev2016")], test=[("wmt16", "newstest2016")],
    ),
    "wmt17_zh_en": dict(
        src="zh", tgt="en", papers=["dou", "yang"],
        train=[("http://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz", "training/news-commentary-v12.zh-en"),
               (OPUS_UNPC.format(pair="en-zh"), "UNPC.en-zh")],  # UN Parallel Corpus v1.0 (15.9M pairs), OPUS's copy
        registration=[("CWMT corpora (casia2015, casict2011/2015, datum2015/2017, neu2017; about 9M pairs)",
                       "http://nlp.nju.edu.cn/cwmt-wmt/")],
        valid=[("wmt17/dev", "newsdev2017")], test=[("wmt17", "newstest2017")],
    ),
    "wmt17_en_ru": dict(
        src="en", tgt="ru", papers=["emelin"],
        train=[
            (f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz", "commoncrawl.ru-en"),
            ("http://data.statmt.org/wmt17/translation-task/training-parallel-nc-v12.tgz", "training/news-commentary-v12.ru-en"),
            ("http://data.statmt.org/wikititles/v1/wikititles-v1.ru-en.tsv.gz", "wikititles-v1.ru-en.tsv"),
            (OPUS_UNPC.format(pair="en-ru"), "UNPC.en-ru"),  # UN Parallel Corpus v1.0 (11.7M pairs), OPUS's copy
        ],
        registration=[("Yandex 1M-sentence English-Russian corpus", "https://translate.yandex.ru/corpus")],
        valid=[("wmt16", "newstest2016")], test=[("wmt17", "newstest2017"), ("wmt18", "newstest2018")],
    ),
    "wmt18_en_cs": dict(
        src="en", tgt="cs", papers=["emelin"],
        train=[
            (f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz", "training/europarl-v7.cs-en"),
            (f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz", "commoncrawl.cs-en"),
            ("http://data.statmt.org/wmt18/translation-task/training-parallel-nc-v13.tgz", "training-parallel-nc-v13/news-commentary-v13.cs-en"),
            (PARACRAWL_V1.format(pair="en-cs"), "paracrawl-release1.en-cs.zipporah0-dedup-clean"),  # WMT18's ParaCrawl
        ],
        registration=[("CzEng 1.7 (57M pairs; most of the paper's 50.4M)", "https://ufal.mff.cuni.cz/czeng/czeng17")],
        # Emelin et al. Table 2 reports newstest2015 and newstest2018; the headline (WMT18) set is the default subset
        valid=[("wmt17", "newstest2017")], test=[("wmt18", "newstest2018"), ("wmt15", "newstest2015")],
    ),
    "wmt18_en_fi": dict(
        src="en", tgt="fi", papers=["emelin"],
        train=[
            ("http://data.statmt.org/wmt18/translation-task/training-parallel-ep-v8.tgz", "training/europarl-v8.fi-en"),
            ("http://data.statmt.org/wmt18/translation-task/rapid2016.tgz", "rapid2016.en-fi"),
            ("http://data.statmt.org/wikititles/v1/wikititles-v1.fi-en.tsv.gz", "wikititles-v1.fi-en.tsv"),
            (PARACRAWL_V1.format(pair="en-fi"), "paracrawl-release1.en-fi.zipporah0-dedup-clean"),  # WMT18's ParaCrawl
        ],
        valid=[("wmt17", "newstest2017")], test=[("wmt18", "newstest2018"), ("wmt15", "newstest2015")],
    ),
    # Liu et al. 2021's other sequence-to-sequence tasks (A.1): their recipes prepare the data themselves
    # (own_prepare: liu's setting in the task's direction only)
    "cnndm_summarization": dict(
        src="source", tgt="target", papers=["liu"], metric="rouge", own_prepare=True,  # See et al. 2017's non-anonymized CNN/DailyMail
        train=[], valid=[(None, "val")], test=[(None, "test")],
    ),
    # CoNLL-2014 grammatical error correction (Chollampatt & Ng 2018's preprocessing, Liu et al. A.1): the training data
    # needs registration (prepare.sh --local); the test set's gold edits are public
    "conll14_gec": dict(
        src="src", tgt="trg", papers=["liu"], metric="m2", own_prepare=True, train=[], valid=[(None, "dev")], test=[(None, "conll14")],
        registration=[("NUCLE release 3.2 (the NUS Corpus of Learner English)", "https://www.comp.nus.edu.sg/~nlp/corpora.html"),
                      ("Lang-8 Learner Corpora v2 (lang-8-20111007-L1-v2.dat)", "https://sites.google.com/site/naistlang8corpora/")],
    ),
    # this project's small setting (no paper): every arch trains with it, its technique flags as the arch presets them
    "multi30k_en_de": dict(
        src="en", tgt="de", papers=["multi30k"], local_default="multi30k", every_arch=True,
        train=[], valid=[(None, "val")], test=[(None, "test_2016_flickr"), (None, "test_2017_flickr"), (None, "test_2017_mscoco")],
    ),
}

# data released already tokenized and BPE'd by other authors, which a paper trained on as it is
# (prepare.sh downloads it with gdown and only binarizes it; files relative to the archive's folder)
GOOGLE_WMT16_EN_DE = dict(
    name="Google's WMT16 En-De (tokenized, joint BPE 32k; Vaswani et al. 2017, Ott et al. 2018)",
    url="https://drive.google.com/uc?id=0B_bZck-ksdkpM25jRUN2X2UxMm8", archive="wmt16_en_de.tar.gz",
    train="train.tok.clean.bpe.32000", valid="newstest2013.tok.bpe.32000", test=["newstest2014.tok.bpe.32000"],
    codes="bpe.32000", langs=("en", "de"),
    nwords=32768,  # fairseq examples/scaling_nmt: --nwordssrc 32768 --nwordstgt 32768 (Liu et al. Table 4: 32,768)
)
LEE_WMT16_EN_RO = dict(
    name="Lee et al. 2018's WMT16 En-Ro (tokenized, BPE; the link of Liu et al. footnote 1 and the authors' README)",
    url="https://drive.google.com/uc?id=1YrAwCEuktG-iDVxtEW-FE72uFTLc5QMl", archive="wmt16.tar.gz",
    train="train/corpus.bpe", valid="dev/dev.bpe", test=["test/test.bpe"], codes=None, langs=("en", "ro"),
    nwords=None,  # the whole joined dictionary (Liu et al. Table 4: 34,976)
)

# ---------------------------------------------------------------------------------------------
# papers: preprocessing and training/decoding settings (None: the paper does not say)
# ---------------------------------------------------------------------------------------------
VASWANI = dict(
    batch_tokens=25000, updates={"base": 100000, "big": 300000}, warmup=4000, lr=None,  # lr None: d^-0.5 * warmup^-0.5
    dropout=None,  # None: the arch's preset (base 0.1, big 0.3)
    beam=4, lenpen=0.6, average={"base": 5, "big": 20}, save_interval_updates=1500,
    share="all", fp16={"base": True, "big": True}, max_len=250,
)
PAPERS = {
    "vaswani": dict(title="Vaswani et al. 2017", bpe={}, train=VASWANI),
    "emelin": dict(
        title="Emelin, Titov, Sennrich 2019 (lexical shortcuts)",
        # A.2: Moses tokenization, cleaning, truecasing; joint BPE 32k (de, ru) / 89.5k (cs, fi), vocabulary threshold 50
        bpe={"default": dict(merges=32000, threshold=50, truecase=True),
             "wmt18_en_cs": dict(merges=89500, threshold=50, truecase=True),
             "wmt18_en_fi": dict(merges=89500, threshold=50, truecase=True)},
        # A.1: 25k-token batches, 150k (base) / 300k (big) updates, warm-up 4k base, 6k with shortcuts, 8k with
        # feature-fusion, 16k big; checkpoints every 4000 steps, average of the last 5 (base) / 16 (big); tied embeddings
        train=dict(VASWANI, updates={"base": 150000, "big": 300000}, warmup=4000, average={"base": 5, "big": 16},
                   save_interval_updates=4000),
    ),
    "dou": dict(
        title="Dou et al. 2018 (deep representations)",
        # 4.1: joint BPE 32k; Zh-En training sentences up to 50 words
        bpe={"default": dict(merges=32000), "wmt17_zh_en": dict(merges=32000, max_len=50)},
        # 4.1: 8 GPUs x 4096 tokens; otherwise Vaswani et al.
        train=dict(VASWANI, batch_tokens=8 * 4096),
    ),
    "xu": dict(
        title="Xu et al. 2020 (source phrase representations)",
        bpe={"default": dict(merges=32000)},
        # Settings: >= 25k target tokens, warm-up 8k, 100k/300k steps, dropout 0.1 (0.3 for big En-De), beam 4,
        # last 5 (base) / 20 (big) checkpoints saved every 1500 steps, untied encoder/decoder embeddings,
        # training sentences of at most 256 subwords
        train=dict(VASWANI, warmup=8000, dropout={"base": 0.1, "big": 0.1, ("big", "wmt14_en_de"): 0.3},
                   share="decoder", max_positions=256),
    ),
    "yang": dict(
        title="Yang et al. 2020 (sub-layer functionalities)",
        # A.1: fairseq's prepare-wmt14en2de.sh: Moses tokens, joint BPE 40k, no lower-/true-casing; its
        # clean-corpus-n.perl keeps pairs with a length ratio up to 1.5 (-ratio 1.5)
        bpe={"default": dict(merges=40000, max_ratio=1.5)},
        # App. A: En->Zh on WMT17 (validation "newsdev2016": WMT17 has no such Zh set, read as newsdev2017)
        data={"wmt17_zh_en": dict(reverse=True)},
        # 3 Models / A.1 / A.2: base 8 GPUs x 4096 tokens FP32, big 4 x 8192 FP16, warm-up 4k, beam 10,
        # model selected on validation loss
        train=dict(VASWANI, batch_tokens=32768, beam=10, lenpen=1.0, average=None, fp16={"base": False, "big": True}),
    ),
    "liu": dict(
        title="Liu et al. 2021 (encoder layer fusion)",
        # A.1 Table 4 vocabularies: Ro-En 34,976 (Lee et al. 2018 data), En-De 32,768 (Ott et al. 2018: 32k BPE),
        # En-Fr 36,736 (Ott et al. 2018: 40k BPE)
        # En-De / En-Fr follow Ott et al. 2018, i.e. fairseq's prepare scripts (length ratio 1.5)
        # (Ro-En: Lee et al. 2018's preprocessed data, ratio not given: Moses' 9)
        bpe={"default": dict(merges=32000, max_ratio=1.5), "wmt16_ro_en": dict(merges=40000, max_ratio=9.0),
             "wmt14_en_fr": dict(merges=40000, max_ratio=1.5),
             # mlconvgec2018: 30k merges (its training/preprocess.sh), pairs of 1-80 tokens (clean-corpus-n.perl 1 80)
             "conll14_gec": dict(merges=30000, max_len=80, max_ratio=9.0)},
        # A.1: Ro-En and En-De are the preprocessed data of Lee et al. / Ott et al.; En-Fr dev newstest2012+2013
        data={"wmt16_ro_en": dict(preprocessed=LEE_WMT16_EN_RO), "wmt14_en_de": dict(preprocessed=GOOGLE_WMT16_EN_DE),
              "wmt14_en_fr": dict(valid=[("wmt12", "newstest2012"), ("wmt13", "newstest2013")])},
        # Table 4: Ro-En base 16K tokens 60K steps dropout 0.3 beam 4 LP 1.0; En-De big 460K 30K 0.3 beam 5 LP 0.6;
        # En-Fr big 460K 80K 0.1 beam 5 LP 0.9; best validation perplexity checkpoint; lr 5e-4 (Ott et al. 2018);
        # "460K" read as Ott et al.'s 8 GPUs x 3584 tokens x update-freq 16 = 458,752 tokens
        train=dict(VASWANI, lr=5e-4, average=None, by_task={
            # §4.1: SurfaceFusion lambda 0.8 on the small Ro-En data (also the authors' README), 0.9 (the presets) otherwise
            "wmt16_ro_en": dict(batch_tokens=16000, updates={"base": 60000, "big": 60000}, dropout={"base": 0.3, "big": 0.3}, beam=4, lenpen=1.0,
                                arch_args={"transformer_surface_fusion": ["--surface-fusion-lambda", "0.8"]}),
            "wmt14_en_de": dict(batch_tokens=458752, updates={"base": 30000, "big": 30000}, dropout={"base": 0.3, "big": 0.3}, beam=5, lenpen=0.6),
            "wmt14_en_fr": dict(batch_tokens=458752, updates={"base": 80000, "big": 80000}, dropout={"base": 0.1, "big": 0.1}, beam=5, lenpen=0.9),
            # Table 4 and A.1: CNN/DM base 64K tokens 70K steps dropout 0.1 beam 4 LP 2.0, min length 55, max 140,
            # no repeated trigram (Paulus et al. 2018); SurfaceFusion lambda 0.8 (4.1)
            "cnndm_summarization": dict(batch_tokens=64000, updates={"base": 70000, "big": 70000}, dropout={"base": 0.1, "big": 0.1},
                                        beam=4, lenpen=2.0, gen_args=["--min-len", "55", "--max-len-b", "140", "--no-repeat-ngram-size", "3"],
                                        arch_args={"transformer_surface_fusion": ["--surface-fusion-lambda", "0.8"]}),
            # Table 4 and A.1: CoNLL base 64K 80K steps dropout 0.2 beam 6 LP 0.6; SwitchOut 0.8 source, 0.9 target;
            # SurfaceFusion lambda 0.9 (4.1, the presets' value)
            "conll14_gec": dict(batch_tokens=64000, updates={"base": 80000, "big": 80000}, dropout={"base": 0.2, "big": 0.2},
                                beam=6, lenpen=0.6,
                                model_args=["--task", "translation_switchout", "--switchout-tau-src", "0.8", "--switchout-tau-tgt", "0.9"]),
        }),
    ),
    "multi30k": dict(
        title="Multi30k (this project's small setting, no paper)",
        bpe={"default": dict(merges=4000)},
        train=dict(VASWANI, batch_tokens=4096, updates={"base": 6000, "big": 6000}, warmup=1000, lr=1e-3, dropout={"base": 0.3, "big": 0.3},
                   beam=5, lenpen=1.0, average={"base": 5, "big": 5}, save_interval_updates=500, fp16={"base": False, "big": False},
                   model_args=["--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", "128",
                               "--decoder-embed-dim", "128", "--encoder-ffn-embed-dim", "512", "--decoder-ffn-embed-dim", "512",
                               "--encoder-attention-heads", "4", "--decoder-attention-heads", "4"]),
    ),
}

# the papers' reported BLEU, for recipes/README.md: (paper, task, system, test set, BLEU, what)
REPORTED = [
    ("emelin", "wmt14_en_de", "transformer-BASE / + lexical shortcuts / + feature-fusion", "newstest2014", "25.8 / 26.1 / 26.8", "sacreBLEU (Table 1)"),
    ("emelin", "wmt14_en_de", "transformer-BASE / + lexical shortcuts / + feature-fusion", "newstest2014", "27.3 / 27.6 / 28.3", "tokenized (t2t, Table 1)"),
    ("emelin", "wmt14_en_de", "transformer-BIG / + shortcuts + feature-fusion", "newstest2014", "27.2 / 27.8", "sacreBLEU (Table 1)"),
    ("emelin", "wmt14_en_de", "de->en BASE / + shortcuts / + feature-fusion", "newstest2014", "31.1 / 31.3 / 31.7", "sacreBLEU (Table 2)"),
    ("emelin", "wmt17_en_ru", "BASE / + shortcuts / + feature-fusion", "newstest2017", "27.9 / 28.4 / 28.9", "sacreBLEU (Table 2)"),
    ("emelin", "wmt18_en_cs", "BASE / + shortcuts / + feature-fusion", "newstest2018", "21.1 / 21.4 / 21.6", "sacreBLEU (Table 2)"),
    ("emelin", "wmt18_en_fi", "BASE / + shortcuts / + feature-fusion", "newstest2018", "14.0 / 14.5 / 14.8", "sacreBLEU (Table 2)"),
    ("dou", "wmt14_en_de", "BASE / + hier. aggregation + Ldiversity", "newstest2014", "27.64 / 28.78", "4-gram BLEU (Table 2)"),
    ("dou", "wmt14_en_de", "BIG / + hier. aggregation + Ldiversity", "newstest2014", "28.58 / 29.21", "4-gram BLEU (Table 2)"),
    ("dou", "wmt17_zh_en", "BIG / + hier. aggregation + Ldiversity", "newstest2017", "24.56 / 25.10", "4-gram BLEU (Table 2)"),
    ("xu", "wmt14_en_de", "Base + phrase representations", "newstest2014", "+1.29 over Base", "tokenized (table not in the extracted text)"),
    ("xu", "wmt14_en_fr", "Base + phrase representations", "newstest2014", "+1.37 over Base", "tokenized (table not in the extracted text)"),
    ("yang", "wmt14_en_de", "standard / simplified decoder (base)", "newstest2014", "27.45 / 27.29", "tokenized, compound split (Table 4)"),
    ("yang", "wmt14_en_fr", "standard / simplified decoder (base)", "newstest2014", "40.39 / 40.07", "tokenized, compound split (Table 4)"),
    ("yang", "wmt17_zh_en", "en->zh standard / simplified decoder (base)", "newstest2017", "32.24 / 33.15", "tokenized, characters (Table 4)"),
    ("yang", "wmt14_en_de", "standard / simplified decoder (big)", "newstest2014", "28.66 / 28.20", "tokenized (Table 6)"),
    ("liu", "wmt16_ro_en", "vanilla / FGLA / hard / soft SurfaceFusion (base)", "newstest2016", "33.8 / 34.5 / 35.1 / 34.0", "tokenized (Table 2)"),
    ("liu", "wmt14_en_de", "vanilla / FGLA / hard / soft SurfaceFusion (big)", "newstest2014", "28.9 / 29.1 / 29.5 / 29.0", "tokenized (Table 2)"),
    ("liu", "wmt14_en_fr", "vanilla / FGLA / hard / soft SurfaceFusion (big)", "newstest2014", "43.4 / 43.5 / 43.9 / 43.6", "tokenized (Table 2)"),
    ("liu", "cnndm_summarization", "vanilla / FGLA / SurfaceFusion (base)", "test", "ROUGE-1/2/L", "Table 2 (not in the extracted text)"),
    ("liu", "conll14_gec", "vanilla / FGLA / SurfaceFusion (base)", "CoNLL-2014 test", "M2 P / R / F0.5", "Table 2 (not in the extracted text)"),
]


def preset_sources():
    """arch -> its preset's paper (``@describe(source=...)``), read from the presets' source text: what
    ``fairseq_fusion.models.catalog`` registers, without the seconds of importing fairseq (the tests check that
    both agree for every arch)."""
    import ast
    import glob
    import os

    from .data_paths import PLUGIN_DIR

    def called(node, name):
        f = node.func if isinstance(node, ast.Call) else None
        return f is not None and (getattr(f, "id", None) == name or getattr(f, "attr", None) == name)

    sources = {}
    for path in sorted(glob.glob(os.path.join(PLUGIN_DIR, "models", "*.py"))):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            source = [kw.value.value for d in fn.decorator_list if called(d, "describe") for kw in d.keywords
                      if kw.arg == "source" and isinstance(kw.value, ast.Constant)]
            names = [d.args[1].value for d in fn.decorator_list if called(d, "register_model_architecture")
                     and len(d.args) == 2 and isinstance(d.args[1], ast.Constant)]
            if source and len(names) == 1:
                sources[names[0]] = source[0]
    return sources


def source_of(arch):
    """The paper an arch's preset names (``@describe(source=...)``), None for an arch that is no preset (fairseq's)."""
    source = preset_sources().get(arch)
    if source is None:  # not a preset of the plugin's files (e.g. registered at run time): ask the catalog
        from fairseq_fusion.models import catalog

        entry = catalog.CATALOG.get(arch)
        source = None if entry is None else entry.source
    return source


def paper_of(arch, task=None):
    """The paper whose settings an arch trains with; baselines (fusion_transformer*) take the task's first paper,
    and so does every arch on a task with a setting of its own (multi30k_en_de)."""
    if task is not None and check_task(task).get("every_arch"):
        return TASKS[task]["papers"][0]
    source = source_of(arch)
    if source is not None and source != "vaswani":
        return source
    if task is not None:
        return TASKS[task]["papers"][0]
    raise ValueError(f"arch {arch!r} belongs to no paper; pass --paper")


def check_task(task):
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")
    return TASKS[task]


def check_paper(paper, task):
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; papers: {', '.join(PAPERS)}")
    if paper not in TASKS[task]["papers"] and paper != "vaswani":
        raise ValueError(f"paper {paper!r} does not train on {task} (its papers: {', '.join(TASKS[task]['papers'])}); "
                         f"pass --paper with one of them or vaswani")
    return PAPERS[paper]


def bpe_settings(task, paper):
    check_task(task)
    spec = check_paper(paper, task)["bpe"]
    # max_ratio: Moses clean-corpus-n.perl's default 9 unless the paper's pipeline says otherwise
    out = dict(merges=32000, threshold=None, truecase=False, max_len=250, max_ratio=9.0)
    out.update(spec.get("default", {}))
    out.update(spec.get(task, {}))
    return out


def data_settings(task, paper):
    """Dev/test sets, direction and preprocessed release of ``task`` as ``paper`` used them."""
    t = check_task(task)
    spec = check_paper(paper, task).get("data", {}).get(task, {})
    valid = spec.get("valid", t["valid"])
    src, tgt = (t["tgt"], t["src"]) if spec.get("reverse") else (t["src"], t["tgt"])
    pre = spec.get("preprocessed")
    test = spec.get("test", t["test"])[: len(pre["test"]) if pre else None]  # a release has its own test sets
    return dict(src=src, tgt=tgt, valid=valid, valid_name="+".join(name for _, name in valid), test=test, preprocessed=pre,
                registration=t.get("registration", []))


def _pick(value, size, task):
    if isinstance(value, dict):
        return value.get((size, task), value.get(size))
    return value


def model_args(arch, flags=()):
    """The arguments fairseq-train builds for ``arch`` with the model ``flags`` given after ``--``
    (fairseq's own parser: the preset's values, overridden by the flags)."""
    import fairseq_fusion  # noqa: F401  (registers the archs)
    from fairseq import options
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    if arch not in ARCH_CONFIG_REGISTRY:
        fusion = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m.__name__ == "FusionTransformerModel")
        raise ValueError(f"unknown arch {arch!r}; fusion_transformer archs: {', '.join(fusion)}")
    args, _ = options.parse_args_and_arch(options.get_training_parser(), ["data", "--arch", arch, *flags], parse_known=True)
    return args


def model_size(arch, flags=()):
    """('big' when the model has 1024-dim embeddings, else 'base'; that dim), from the arch and its flags."""
    dim = getattr(model_args(arch, flags), "encoder_embed_dim", 512)
    return ("big" if dim >= 1024 else "base"), dim


def warmup_of(paper, args, size, default):
    """Emelin et al. A.1 from the model's flags (``args``: ``model_args``; None: the plain transformer)."""
    if paper == "emelin":  # A.1: 4k base, 6k with lexical shortcuts, 8k with feature-fusion, 16k for every big model
        if size == "big":
            return 16000
        if getattr(args, "lexical_shortcuts", False):
            return 8000 if getattr(args, "lexical_shortcuts_feature_fusion", False) else 6000
    return default


def train_settings(task, arch, paper=None, n_gpus=0, max_tokens=None, size=None, flags=(), n_nodes=1):
    """fairseq-train settings of ``arch`` on ``task`` as the paper trained it, for ``n_gpus`` GPUs (0: CPU) on each of
    ``n_nodes`` nodes; ``flags``: model flags given after ``--`` (they decide the size and the techniques, not the arch
    name)."""
    check_task(task)
    paper = paper or paper_of(arch, task)
    spec = dict(check_paper(paper, task)["train"])
    spec.update(spec.pop("by_task", {}).get(task, {}))
    # the size from the model the command trains: the preset, the setting's model flags (Multi30k's small model), then
    # the flags after --
    margs = model_args(arch, [*spec.get("model_args", []), *flags])
    dim = getattr(margs, "encoder_embed_dim", 512)
    size, dim = (size, 1024 if size == "big" else 512) if size else (("big" if dim >= 1024 else "base"), dim)
    max_tokens = max_tokens or (spec["batch_tokens"] if task == "multi30k_en_de" else 4096)
    devices = max(1, n_gpus) * n_nodes  # the paper's tokens per update over every GPU of every node
    warmup = warmup_of(paper, margs, size, spec["warmup"])
    import fairseq_fusion.fusion_options as fusion_options

    s = dict(
        paper=paper, size=size, arch=arch, criterion=fusion_options.default_criterion(arch),
        batch_tokens=spec["batch_tokens"], max_tokens=max_tokens,
        update_freq=max(1, math.ceil(spec["batch_tokens"] / (devices * max_tokens))),
        max_update=_pick(spec["updates"], size, task), warmup=warmup,
        # Vaswani et al. Eq. 3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), peak at step = warmup;
        # fairseq's inverse_sqrt with --lr = that peak is the same schedule
        lr=spec["lr"] or dim ** -0.5 * warmup ** -0.5,
        dropout=_pick(spec["dropout"], size, task), fp16=bool(n_gpus) and _pick(spec["fp16"], size, task),
        share=spec["share"], save_interval_updates=spec["save_interval_updates"],
        average=_pick(spec["average"], size, task), beam=spec["beam"], lenpen=spec["lenpen"],
        max_positions=spec.get("max_positions"), gen_args=list(spec.get("gen_args", [])),
        # the task's settings for the arch's technique (by arch-name prefix), e.g. SurfaceFusion's lambda on Ro-En
        model_args=list(spec.get("model_args", [])) + [
            a for prefix, extra in spec.get("arch_args", {}).items() if arch.startswith(prefix) for a in extra],
    )
    return s


def train_command_args(s, n_gpus=0, n_nodes=1):
    """The fairseq-train options (after DATA) for settings ``s`` (``n_gpus`` per node; the launcher's flags of several
    nodes are recipe.sh's)."""
    args = ["--arch", s["arch"], "--criterion", s["criterion"]]
    if s["criterion"] == "label_smoothed_cross_entropy" or "label_smoothed" in s["criterion"]:
        args += ["--label-smoothing", "0.1"]
    args += ["--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
             "--lr", f"{s['lr']:.8g}", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(s["warmup"]),
             "--warmup-init-lr", "1e-07", "--max-tokens", str(s["max_tokens"]), "--update-freq", str(s["update_freq"]),
             "--max-update", str(s["max_update"]), "--save-interval-updates", str(s["save_interval_updates"]),
             "--keep-interval-updates", str(max(s["average"] or 1, 5)), "--no-epoch-checkpoints"]
    args += ["--share-all-embeddings"] if s["share"] == "all" else ["--share-decoder-input-output-embed"]
    if s["dropout"] is not None:
        args += ["--dropout", str(s["dropout"])]
    if s["max_positions"]:
        args += ["--max-source-positions", str(s["max_positions"]), "--max-target-positions", str(s["max_positions"])]
    if s["fp16"]:
        args += ["--fp16"]
    if n_gpus * n_nodes > 1:
        args += ["--ddp-backend", "legacy_ddp"]
    if n_gpus == 0:
        args += ["--cpu"]
    return args + list(s["model_args"])


# fairseq-hydra-train: one YAML per paper's headline arch (recipes/hydra/ARCH.yaml, written by `settings.py hydra`)
# (task, arch); Liu et al.'s base-size SurfaceFusion result is on Ro-En (on En-De they train big models)
HYDRA_HEADLINE = {"emelin": ("wmt14_en_de", "transformer_lexical_shortcuts_ff"),
                  "dou": ("wmt14_en_de", "transformer_hierarchical_aggregation"),
                  "xu": ("wmt14_en_de", "transformer_phrase"), "yang": ("wmt14_en_de", "transformer_simplified_decoder"),
                  "liu": ("wmt16_ro_en", "transformer_surface_fusion")}
HYDRA_GROUPS = ("common", "distributed_training", "dataset", "optimization", "checkpoint", "criterion", "optimizer",
                "lr_scheduler")


def hydra_config(task, arch, n_gpus=8):
    """The fairseq-hydra-train config of ``train_command_args`` for ``arch`` on ``task``: the values that differ
    from fairseq's defaults (of the same criterion, optimizer and scheduler), each in its config group; the
    model section holds the preset (``_name``) and the model flags it is given."""
    import logging
    import warnings
    from argparse import Namespace

    from fairseq import options
    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.registry import REGISTRIES
    from omegaconf import OmegaConf

    from fairseq_fusion.models.fusion_config import model_actions

    s = train_settings(task, arch, n_gpus=n_gpus)
    d = data_settings(task, s["paper"])
    argv = ["DATA", *train_command_args(s, n_gpus)]
    base_argv = ["DATA", "--arch", arch, "--criterion", s["criterion"], "--optimizer", "adam", "--lr-scheduler", "inverse_sqrt"]
    with warnings.catch_warnings():  # hydra's compose deprecation notices, not about these settings
        warnings.simplefilter("ignore")
        level = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            args, base = (options.parse_args_and_arch(options.get_training_parser(), a) for a in (argv, base_argv))
            cfg, cfg0 = convert_namespace_to_omegaconf(args), convert_namespace_to_omegaconf(base)
        finally:
            logging.disable(level)
    schema = OmegaConf.structured(FairseqConfig)

    def interpolated(group, key):  # e.g. optimizer.lr: ${optimization.lr}; kept as the interpolation
        node = schema[group] if OmegaConf.is_config(schema[group]) else None
        if node is None:
            registry = REGISTRIES.get(group)
            dc = registry and registry["dataclass_registry"].get(cfg[group]["_name"])
            node = OmegaConf.structured(dc) if dc else None
        return node is not None and key in node and OmegaConf.is_interpolation(node, key)

    out = {"common": {"user_dir": "fairseq_fusion"}}
    for group in HYDRA_GROUPS:
        new, old = cfg[group], cfg0[group]
        changed = {k: new[k] for k in new if (k == "_name" and new[k] is not None or k != "_name" and new[k] != old.get(k))
                   and not interpolated(group, k)}
        if group in ("criterion", "optimizer", "lr_scheduler") or len(changed) > ("_name" in changed):
            out.setdefault(group, {}).update(changed)
    model, model0 = vars(cfg.model) if isinstance(cfg.model, Namespace) else cfg.model, vars(base)
    flags = model_actions()
    out["model"] = {"_name": arch, **{k: model[k] for k in sorted(flags) if k in model and model[k] != model0.get(k)}}
    out["task"] = {"_name": "translation", "data": "???", "source_lang": d["src"], "target_lang": d["tgt"]}
    order = ["common", "task", "model", "criterion", "optimizer", "lr_scheduler", "optimization", "dataset",
             "distributed_training", "checkpoint"]
    out = {k: OmegaConf.to_container(OmegaConf.create(out[k])) for k in order if k in out}
    # hydra runs the job where the command was given (as fairseq's own config.yaml: no outputs/DATE/TIME folder, so
    # relative task.data, checkpoint.save_dir and user_dir mean what they say) and writes no .hydra/ folder there;
    # both keys exist in hydra-core 1.0 (fairseq 0.12.2's) and 1.3
    out["hydra"] = {"run": {"dir": "."}, "output_subdir": None}
    header = (f"# @package _global_\n# {arch} on {task} as {s['paper']} trained it, for {n_gpus} GPUs (written by\n"
              f"# `python recipes/common/settings.py hydra --task {task} --arch {arch} --n-gpus {n_gpus}`; the same\n"
              f"# settings as recipes/{task}/train.sh). Relative paths are relative to where you run it. From the\n"
              f"# repository root:\n"
              f"#   fairseq-hydra-train --config-dir recipes/hydra --config-name {arch} task.data=DATA_BIN\n"
              f"# from any other directory (REPO: this clone; fusion-user-dir prints the installed plugin's folder):\n"
              f"#   fairseq-hydra-train --config-dir \"$REPO/recipes/hydra\" --config-name {arch} task.data=DATA_BIN \\\n"
              f"#       common.user_dir=$(fusion-user-dir)\n")
    return header + OmegaConf.to_yaml(OmegaConf.create(out), sort_keys=False)


def _emit(**values):
    for k, v in values.items():
        if isinstance(v, (list, tuple)):
            print(f"{k}=({' '.join(shlex.quote(str(x)) for x in v)})")
        else:
            print(f"{k}={shlex.quote('' if v is None else str(v))}")


def main(argv=None):
    p = argparse.ArgumentParser(description="print the shell settings of a recipe step")
    p.add_argument("step", choices=["prepare", "paper", "train", "readme-table", "hydra"])
    p.add_argument("--task", default=None)
    p.add_argument("--paper", default=None)
    p.add_argument("--arch", default=None)
    p.add_argument("--n-gpus", type=int, default=0, help="GPUs per node")
    p.add_argument("--n-nodes", type=int, default=1, help="nodes (the tokens per update are spread over all their GPUs)")
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--model-flags", default="", help="the model flags given to train.sh after --")
    a = p.parse_args(argv)
    try:
        if a.step == "readme-table":
            print(readme_table())
            return
        if a.step == "hydra":
            print(hydra_config(a.task, a.arch, a.n_gpus), end="")
            return
        task = check_task(a.task)
        if a.step == "prepare":
            paper = a.paper or task["papers"][0]
            b, d = bpe_settings(a.task, paper), data_settings(a.task, paper)
            pre = d["preprocessed"] or {}
            _emit(PAPER=paper, SRC=d["src"], TGT=d["tgt"], BPE_MERGES=b["merges"], BPE_THRESHOLD=b["threshold"],
                  TRUECASE=int(b["truecase"]), MAX_LEN=b["max_len"], MAX_RATIO=b["max_ratio"],
                  VALID_SETS=[v or "" for v, _ in d["valid"]], VALID_PARTS=[name for _, name in d["valid"]], VALID=d["valid_name"],
                  TEST_SETS=[t or "" for t, _ in d["test"]], TESTS=[name for _, name in d["test"]],
                  LOCAL_DEFAULT=task.get("local_default", ""), EVERY_ARCH=int(bool(task.get("every_arch"))),
                  OWN_PREPARE=int(bool(task.get("own_prepare"))), METRIC=task.get("metric", "bleu"),
                  PAPERS=task["papers"], RELEASE_PAPERS=[q for q in task["papers"] if data_settings(a.task, q)["preprocessed"]],
                  TRAIN_URLS=[u for u, _ in task["train"]], TRAIN_PATHS=[q for _, q in task["train"]],
                  REGISTRATION=[f"{name}: {url}" for name, url in d["registration"]],
                  PRE_NAME=pre.get("name"), PRE_URL=pre.get("url"), PRE_ARCHIVE=pre.get("archive"), PRE_TRAIN=pre.get("train"),
                  PRE_VALID=pre.get("valid"), PRE_TESTS=pre.get("test", []), PRE_CODES=pre.get("codes"), PRE_NWORDS=pre.get("nwords"))
        elif a.step == "paper":  # light: no fairseq import
            paper = a.paper or paper_of(a.arch, a.task)
            d = data_settings(a.task, paper)
            _emit(PAPER=paper, SRC=d["src"], TGT=d["tgt"], OWN_PREPARE=int(bool(task.get("own_prepare"))), TASK_PAPERS=task["papers"])
        else:
            s = train_settings(a.task, a.arch, a.paper, a.n_gpus, a.max_tokens, flags=shlex.split(a.model_flags),
                               n_nodes=a.n_nodes)
            d = data_settings(a.task, s["paper"])
            _emit(PAPER=s["paper"], SIZE=s["size"], CRITERION=s["criterion"], BEAM=s["beam"], LENPEN=s["lenpen"],
                  AVERAGE=s["average"] or 0, SRC=d["src"], TGT=d["tgt"], METRIC=task.get("metric", "bleu"), GEN_EXTRA=s["gen_args"], TRUECASE=int(bpe_settings(a.task, s["paper"])["truecase"]),
                  TRAIN_ARGS=train_command_args(s, a.n_gpus, a.n_nodes))
    except ValueError as e:
        print(f"echo {shlex.quote('error: ' + str(e))} >&2; exit 2")
        sys.exit(0)


def readme_table():
    rows = ["| paper | task | direction, dev / tests | BPE (merges / vocab. threshold / truecase) | model | batch (tokens) | updates | warm-up | beam / LP | checkpoint | reported BLEU (test) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for paper, spec in PAPERS.items():
        if paper == "vaswani":
            continue
        for task, t in TASKS.items():
            if paper not in t["papers"]:
                continue
            b, d = bpe_settings(task, paper), data_settings(task, paper)
            bpe = (f"{b['merges']} / {b['threshold'] or '-'} / {'yes' if b['truecase'] else 'no'}" if not d["preprocessed"]
                   else "release: " + d["preprocessed"]["name"].split(" (")[0])
            if t.get("metric") == "rouge":
                bpe = "GPT-2 BPE (fairseq's files)"
            sets = f"{d['src']}->{d['tgt']}, {d['valid_name']} / {', '.join(n for _, n in d['test'])}"
            tr = dict(spec["train"])
            tr.update(tr.pop("by_task", {}).get(task, {}))
            if paper == "liu":  # Table 4: Ro-En base, En-De and En-Fr big
                sizes = ["base"] if task in ("wmt16_ro_en", "cnndm_summarization", "conll14_gec") else ["big"]
            else:
                sizes = ["base"] if paper == "multi30k" else ["base", "big"]
            reported = "; ".join(f"{sys_}: {bleu} ({what}, {test})" for p_, t_, sys_, test, bleu, what in REPORTED if p_ == paper and t_ == task)
            for size in sizes:
                avg = _pick(tr["average"], size, task)
                rows.append(
                    f"| {paper} | {task} | {sets if size == sizes[0] else ''} | {bpe} | {size} | "
                    f"{tr['batch_tokens']} | {_pick(tr['updates'], size, task)} | {warmup_of(paper, None, size, tr['warmup'])}"
                    f"{' (6k shortcuts, 8k feature-fusion)' if paper == 'emelin' and size == 'base' else ''} | "
                    f"{tr['beam']} / {tr['lenpen']} | {'average of last ' + str(avg) if avg else 'best valid. loss'} | "
                    f"{reported if size == sizes[0] else ''} |"
                )
    return "\n".join(rows)


if __name__ == "__main__":
    main()

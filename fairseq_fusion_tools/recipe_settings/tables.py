"""The papers' settings per task, as data: the tasks' official data, each paper's preprocessing, training and decoding
settings, their reported results and the headline arch of each paper's fairseq-hydra-train config. Plain values only:
the code that reads them is ``lookup.py``. Sources, by paper:

- emelin: Emelin, Titov, Sennrich 2019, App. A.1-A.2 and Tables 1-3, 5.
- dou: Dou et al. 2018, Sec. 4.1 and Tables 1-2 (other settings: Vaswani et al. 2017).
- xu: Xu et al. 2020, Sec. "Settings" (other settings: Vaswani et al. 2017).
- yang: Yang et al. 2020, Sec. 3 "Models" and App. A.1-A.2.
- liu: Liu et al. 2021, App. A.1 Table 4 and Sec. 4.1 (En-De/En-Fr follow Ott et al. 2018).
- vaswani: Vaswani et al. 2017 (the baseline every paper starts from); multi30k: this project's small setting.
"""

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


# fairseq-hydra-train: one YAML per paper's headline arch (recipes/hydra/ARCH.yaml, written by `settings.py hydra`)
# (task, arch); Liu et al.'s base-size SurfaceFusion result is on Ro-En (on En-De they train big models)
HYDRA_HEADLINE = {"emelin": ("wmt14_en_de", "transformer_lexical_shortcuts_ff"),
                  "dou": ("wmt14_en_de", "transformer_hierarchical_aggregation"),
                  "xu": ("wmt14_en_de", "transformer_phrase"), "yang": ("wmt14_en_de", "transformer_simplified_decoder"),
                  "liu": ("wmt16_ro_en", "transformer_surface_fusion")}

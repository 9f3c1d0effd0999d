"""The 250 documents of tests/data/rouge155/ (README.md there) as test_rouge155.py scores them. documents.json holds
the 240 built from newstest2014 as line ranges of the shared data's ``wmt14/newstest2014.en`` (the shared corpora are
never copied into the repository), read from the shared data (data_paths.data_root()) here, and the 10 of our own
making as text."""
import hashlib
import json
import os

from fairseq_fusion_tools import data_paths

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "rouge155")
# the newstest2014.en the line ranges point into (3,003 lines)
NEWSTEST_SHA256 = "1e10b7cb106e08ab9b3a4ed85f5c866bd9391d2659626e68a6e0904d5b1aebcf"


def newstest_path():
    """The shared data's newstest2014.en (it may be missing: test_rouge155.py skips its tests then)."""
    return data_paths.data_path("wmt14", "newstest2014.en", must_exist=False)


def newstest_lines():
    """newstest2014.en's sentences, line n at index n - 1; an error if it is not the file the fixture was built from."""
    with open(data_paths.data_path("wmt14", "newstest2014.en"), "rb") as f:
        raw = f.read()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != NEWSTEST_SHA256:
        raise ValueError(f"{newstest_path()} has sha256 {digest}, not {NEWSTEST_SHA256}: not the newstest2014.en "
                         "tests/data/rouge155 was built from")
    return raw.decode("utf-8").split("\n")[:-1]


def lines_of(lines, span):
    """The sentences on lines ``first`` to ``last`` (from 1, both included) of ``lines``."""
    first, last = span
    return lines[first - 1:last]


def stored(summary, reference):
    """documents.json's entry of a document: a newstest2014 one as line ranges ((first, last), (first, last)) of its
    summary and reference, one of our own as its two texts (sentences one a line)."""
    if isinstance(summary, str):
        return {"summary": summary.split("\n") if summary else [], "reference": reference.split("\n")}
    return {"summary_lines": list(summary), "reference_lines": list(reference)}


def load_documents():
    """documents.json's 250 documents in its order, each {"summary": [sentences], "reference": [sentences]}."""
    with open(os.path.join(FIXTURE, "documents.json"), encoding="utf-8") as f:
        entries = json.load(f)
    return resolve(entries, newstest_lines() if any("summary_lines" in e for e in entries) else None)


def resolve(entries, lines):
    """documents.json's ``entries`` as documents, {"summary": [sentences], "reference": [sentences]}: line ranges
    read from ``lines`` (newstest_lines())."""
    return [{"summary": lines_of(lines, e["summary_lines"]), "reference": lines_of(lines, e["reference_lines"])}
            if "summary_lines" in e else e for e in entries]

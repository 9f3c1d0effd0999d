"""Docs work from a fresh clone: no absolute paths of one machine, no work-item numbers in headings."""
import ast
import glob
import os
import re
import subprocess

import pytest

from fairseq_fusion_tools import data_paths

REPO = data_paths.REPO_ROOT

# an absolute path under one of these roots; `./work/`, `$REPO/work/`, `../shared/...` and URLs are not
ABSOLUTE_PATH = re.compile(r"(?<![\w.~$/-])/(?:work|tmp|root|home)/")
# "issue 6", "Issue #12", "(#9)", "work item 3" in a heading
ISSUE_NUMBER = re.compile(r"\bissues?\s*#?\s*\d+|\(#\d+\)|\bwork[- ]items?\s*#?\s*\d+", re.IGNORECASE)
HEADING = re.compile(r"^ {0,3}#{1,6}\s")


def markdown_files():
    """Tracked markdown files (and new ones not ignored by git); every *.md outside ignored folders without git."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
                             cwd=REPO, capture_output=True, text=True, check=True).stdout
        files = [f for f in out.splitlines() if os.path.exists(os.path.join(REPO, f))]
    except (OSError, subprocess.CalledProcessError):
        skip = (".venv", "build", "demo_work", "work", "data-bin", ".pytest_cache")
        files = [os.path.relpath(f, REPO) for f in glob.glob(os.path.join(REPO, "**", "*.md"), recursive=True)
                 if os.path.relpath(f, REPO).split(os.sep)[0] not in skip]
    return sorted(files)


def problems(text):
    """(line number, what) for each absolute machine path and each heading naming an issue number."""
    found, in_fence = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if ABSOLUTE_PATH.search(line):
            found.append((n, f"absolute path: {line.strip()}"))
        if not in_fence and HEADING.match(line) and ISSUE_NUMBER.search(line):
            found.append((n, f"issue number in heading: {line.strip()}"))
    return found


@pytest.mark.parametrize("text", [
    "# Source phrase representations (Xu et al. 2020), issue 6\n",
    "# Recipes: one per WMT task of the papers (issue 9)\n",
    "## Memory (Issue #12)\n",
    "Paper: (`/work/shared/papers/002_cb77e61a0fe86b52.txt`).\n",
    "Data: `/tmp/m30k_full` (fusion-prepare-text, 4000 joint BPE merges).\n",
    "    fairseq-train /tmp/m30k --user-dir fairseq_fusion\n",
    "```\nfusion-aer --gold /home/me/deen.talp\n```\n",
    "see /root/.cache/x\n",
])
def test_checker_catches_the_old_text(text):
    assert problems(text)


@pytest.mark.parametrize("text", [
    "# Source phrase representations (Xu et al. 2020)\n",
    "Paper: (`../shared/papers/002_cb77e61a0fe86b52.txt`).\n",
    "`WORK` defaults to `./work/<task>`; `$REPO/work/x`; https://example.org/home/page\n",
    "```\n# shell comment about issue 5, not a heading\n```\n",
    "The issue 12 text may be cited in a sentence.\n",
])
def test_checker_accepts_repo_relative_text(text):
    assert not problems(text)


def test_markdown_files_have_no_machine_paths_or_issue_headings():
    files = markdown_files()
    assert "README.md" in files and any(f.startswith("docs/") for f in files)
    bad = []
    for f in files:
        with open(os.path.join(REPO, f), encoding="utf-8") as fh:
            bad += [f"{f}:{n}: {what}" for n, what in problems(fh.read())]
    assert not bad, "\n".join(bad)


def table_problems(text):
    """(line number, cells, header cells) for each markdown table row whose cell count is not its header's (a ``|``
    inside a cell must be escaped as ``\\|``)."""
    lines, found, in_fence, i = text.splitlines(), [], False, 0
    cells = lambda row: len(re.split(r"(?<!\\)\|", row.strip().strip("|")))  # noqa: E731
    while i < len(lines):
        if lines[i].lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and lines[i].startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|[-:| ]+\|", lines[i + 1]):
            width, j = cells(lines[i]), i + 2
            while j < len(lines) and lines[j].startswith("|"):
                if cells(lines[j]) != width:
                    found.append((j + 1, cells(lines[j]), width))
                j += 1
            i = j
            continue
        i += 1
    return found


def test_table_checker_catches_a_short_row():
    assert table_problems("| a | b | c |\n|---|---|---|\n| 1 | 2 |\n| 1 | 2 \\| 3 | 4 |\n") == [(3, 2, 3)]


def test_markdown_tables_are_well_formed():
    bad = []
    for f in markdown_files():
        with open(os.path.join(REPO, f), encoding="utf-8") as fh:
            bad += [f"{f}:{n}: {got} cells, the header has {want}" for n, got, want in table_problems(fh.read())]
    assert not bad, "\n".join(bad)


TECHNIQUE_TABLE = re.compile(r"<!-- technique table.*?-->\n(.*?)<!-- end of technique table -->", re.DOTALL)
# `modules/surface_fusion.py:SurfaceFusion.fuse`: a path under fairseq_fusion/, then a function or Class.method
FILE_FUNCTION = re.compile(r"`([\w/]+\.py):([\w.]+)`")


def defined_names(source):
    """Top-level functions and classes, and `Class.method` for each method, of a Python source."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            names |= {f"{node.name}.{m.name}" for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names


def test_defined_names_tell_methods_from_functions():
    names = defined_names("def f():\n    pass\nclass C:\n    def m(self):\n        pass\n")
    assert names == {"f", "C", "C.m"}


def test_technique_table_names_functions_that_exist():
    with open(os.path.join(REPO, "ARCHITECTURE.md"), encoding="utf-8") as fh:
        table = TECHNIQUE_TABLE.search(fh.read())
    assert table, "ARCHITECTURE.md lost its technique table (or its markers)"
    cells = FILE_FUNCTION.findall(table.group(1))
    assert len(cells) >= 20, cells  # every technique row names at least one function
    missing = []
    for path, name in sorted(set(cells)):
        full = os.path.join(REPO, "fairseq_fusion", path)
        if not os.path.isfile(full):
            missing.append(f"{path}: no such file under fairseq_fusion/")
            continue
        with open(full, encoding="utf-8") as fh:
            if name not in defined_names(fh.read()):
                missing.append(f"{path}:{name}: not defined there")
    assert not missing, "\n".join(missing)


# ---- relative links: [text](path#anchor) in the markdown resolves to a file and, with #anchor, to one of its headings
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`]*`")


def heading_anchors(text):
    """GitHub's anchors of a markdown text's headings: lower case, punctuation dropped, spaces to hyphens, repeats -1."""
    anchors, seen, in_fence = set(), {}, False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and HEADING.match(line):
            slug = re.sub(r"[^\w\- ]", "", line.lstrip().lstrip("#").strip().lower()).replace(" ", "-")
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def broken_links(source, text, exists, read):
    """(line number, link, why) for each relative link of ``source`` (a repo-relative path) that does not resolve;
    ``exists(path)`` and ``read(path)`` see the repository."""
    found, in_fence = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for target in LINK.findall(INLINE_CODE.sub("", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
            if not exists(full):
                found.append((n, target, f"no file {full}"))
            elif anchor and full.endswith(".md") and anchor not in heading_anchors(read(full)):
                found.append((n, target, f"no heading #{anchor} in {full}"))
    return found


def test_link_checker_catches_missing_files_and_anchors():
    files = {"README.md": "# Top\n## Quick start, in detail\n", "docs/a.md": "# A\n## Tests\n## Tests\n"}
    text = ("[ok](docs/a.md#tests-1) [ok](#quick-start-in-detail) [web](https://x.org/y) `[code](nowhere.md)`\n"
            "[gone](docs/b.md) [anchor](docs/a.md#nope)\n```\n[fenced](nowhere.md)\n```\n")
    found = broken_links("README.md", text, files.__contains__, files.__getitem__)
    assert [(n, t) for n, t, _ in found] == [(2, "docs/b.md"), (2, "docs/a.md#nope")]


def test_relative_links_of_readme_and_docs_resolve():
    files = [f for f in markdown_files() if f == "README.md" or f.startswith("docs/")]
    assert "README.md" in files and len(files) > 5

    def read(path):
        with open(os.path.join(REPO, path), encoding="utf-8") as fh:
            return fh.read()
    bad = [f"{f}:{n}: {target}: {why}" for f in files
           for n, target, why in broken_links(f, read(f), lambda p: os.path.exists(os.path.join(REPO, p)), read)]
    assert not bad, "\n".join(bad)

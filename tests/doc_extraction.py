"""The commands the docs show, extracted from the markdown and the recipes' --help texts (the registry of how each
runs here is tests/documented_commands.py).

`extract()` yields one `Doc(source, line, text)` per documented command: shell lines of fenced and 4-space indented
blocks (continuation lines ending in `\\` joined), inline `code` spans that start with a command, the hub
python example of docs/usage.md, and the lines of the recipes' --help that start with a command. `tests/test_documented_commands.py`
checks that each one is in documented_commands.REGISTRY (and each REGISTRY entry still in the docs) and runs it.
"""
import glob
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MARKDOWN = ["README.md", "ARCHITECTURE.md", "recipes/README.md"]  # + docs/*.md
HELP_SCRIPTS = ["recipes/compare/multi30k.sh", "recipes/benchmark/run.sh"]  # + recipes/*/{prepare,train,evaluate}.sh
PYTHON_EXAMPLES = ["docs/usage.md"]  # the hub example (python fences elsewhere are not commands a user runs as shown)

# a line (or `code` span) that is a command: what a user types
COMMAND_START = re.compile(
    r"^(?:[A-Z_]+=(?:\"[^\"]*\"|'[^']*'|\S*)\s+)*"  # leading environment assignments: SIZE=base OUT=x ...
    r"(?:echo\s+\"[^\"]*\"\s*\|\s*)?(?:(?:fairseq-[a-z0-9-]+|fusion-[a-z0-9-]+)(?=\s|$)|make\b|bash\s+(?:recipes|examples)/|recipes/\S+\.sh(?=\s|$)|python\s+(?:recipes|examples)/|for\s+\w+\s+in\b|torchrun\b|sacrebleu\b)")
SHELL_FENCES = ("", "bash", "sh", "shell", "console")


def markdown_files():
    return MARKDOWN[:1] + ["ARCHITECTURE.md"] + sorted(
        os.path.relpath(f, REPO) for f in glob.glob(os.path.join(REPO, "docs", "*.md"))) + ["recipes/README.md"]


class Doc:
    """One documented command: where it is (`source:line`) and its text (continuations joined with one space)."""

    def __init__(self, source, line, text, kind="shell"):
        self.source, self.line, self.text, self.kind = source, line, text, kind

    @property
    def where(self):
        return f"{self.source}:{self.line}"

    def __repr__(self):
        return f"{self.where}: {self.text}"


def normalize(text):
    """One space between words; a trailing shell comment dropped (`cmd  # what it does` is `cmd`)."""
    return re.sub(r"\s+#\s[^'\"]*$", "", " ".join(text.split()))


def _join_continuations(lines):
    """(first line number, joined text) for each logical line of a block; a `for ... done` loop is one command."""
    out, buf, start = [], [], None
    for n, line in lines:
        stripped = line.strip()
        if not buf:
            start = n
        if stripped.endswith("\\"):
            buf.append(stripped[:-1].strip())
            continue
        buf.append(stripped)
        text = normalize(" ".join(buf))
        buf = []
        if out and out[-1][1].startswith("for ") and not out[-1][1].rstrip().endswith(("done", "done; wait")):
            out[-1] = (out[-1][0], out[-1][1] + "\n" + text)
        else:
            out.append((start, text))
    return out


def _block_commands(source, lines):
    """Shell commands of one code block: comment lines dropped, trailing `# comments` kept in the text."""
    docs = []
    for n, text in _join_continuations(lines):
        first = text.split("\n")[0]
        if first and not first.startswith("#") and COMMAND_START.match(first):
            docs.append(Doc(source, n, text))
    return docs


INLINE = re.compile(r"`([^`]+)`")


def markdown_commands(source, text):
    docs, lines, para = [], text.splitlines(), []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^\s*```\s*(\w*)", line)
        indented = line.startswith("    ") and (i == 0 or not lines[i - 1].strip()) and not line.lstrip().startswith(("-", "*", "|"))
        if fence or indented or not line.strip():
            docs += _inline_commands(source, para)
            para = []
        if fence:
            lang, body, i = fence.group(1), [], i + 1
            while i < len(lines) and not lines[i].lstrip().startswith("```"):
                body.append((i + 1, lines[i]))
                i += 1
            if lang in SHELL_FENCES:
                docs += _block_commands(source, body)
            elif lang == "python" and source in PYTHON_EXAMPLES:
                docs.append(Doc(source, body[0][0], "\n".join(l for _, l in body), kind="python"))
            i += 1
            continue
        if indented:
            body = []
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                if lines[i].strip():
                    body.append((i + 1, lines[i][4:]))
                i += 1
            docs += _block_commands(source, body)
            continue
        if line.strip():
            para.append((i + 1, line))
        i += 1
    return docs + _inline_commands(source, para)


def _inline_commands(source, para):
    """`code` spans of one paragraph (a span may run over lines) that start with a command."""
    if not para:
        return []
    text = "\n".join(l for _, l in para)
    docs = []
    for m in INLINE.finditer(text):
        span = normalize(m.group(1))
        if COMMAND_START.match(span) and " " in span:
            docs.append(Doc(source, para[0][0] + text.count("\n", 0, m.start()), span, kind="inline"))
    return docs


def help_scripts():
    return sorted(os.path.relpath(f, REPO) for f in glob.glob(os.path.join(REPO, "recipes", "*", "*.sh"))
                  if os.path.basename(f) in ("prepare.sh", "train.sh", "evaluate.sh")) + HELP_SCRIPTS


def help_text(script):
    import tempfile
    with tempfile.TemporaryDirectory() as binarized:  # run.sh prepares BIN before anything else when it is missing
        open(os.path.join(binarized, ".done"), "w").close()
        env = dict(os.environ, PATH=os.path.dirname(sys.executable) + ":" + os.environ["PATH"], BIN=binarized,
                   OUT=os.path.join(binarized, "out.json"))
        proc = subprocess.run(["bash", script, "--help"], cwd=REPO, capture_output=True, text=True, env=env)
    return proc.stdout + proc.stderr


def help_commands(script, text):
    """Lines of a --help text that are commands (indented example lines)."""
    lines = []
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("usage:") or s.startswith("Usage:"):
            continue
        lines.append((n, s))
    # the ten evaluate.sh print the same synopsis with their own task: one command, `recipes/TASK/...`
    task = script.split("/")[1]
    return [Doc(f"{script} --help", n, t.replace(f"recipes/{task}/evaluate.sh", "recipes/TASK/evaluate.sh"))
            for n, t in _join_continuations(lines) if COMMAND_START.match(t.split("\n")[0]) and " " in t]


def extract(with_help=True):
    docs = []
    for f in markdown_files():
        with open(os.path.join(REPO, f), encoding="utf-8") as fh:
            docs += markdown_commands(f, fh.read())
    if with_help:
        for script in help_scripts():
            docs += help_commands(script, help_text(script))
    return docs

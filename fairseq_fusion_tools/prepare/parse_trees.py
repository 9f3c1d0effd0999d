"""fusion-parse-trees's run: a tokenized text parsed into one bracketed tree a line."""

from .. import atomic_files
from ..progress import progress as progress_bar
from fairseq_fusion.tasks.phrase_spans import PARSERS
from fairseq_fusion_tools.user_files import fail


def parse_file(parser, lines, batch_size=64, progress=True):
    """Trees of ``lines`` (None where the parser failed or the line is empty)."""
    trees = []
    for start in progress_bar(range(0, len(lines), batch_size), show=progress, desc="parsing", unit="batch"):
        batch = [line.split() for line in lines[start:start + batch_size]]
        todo = [i for i, words in enumerate(batch) if words]
        parsed = parser.parse([batch[i] for i in todo]) if todo else []
        out = [None] * len(batch)
        for i, tree in zip(todo, parsed):
            out[i] = tree
        trees.extend(out)
    return trees


def main(args, parser=None):
    with open(args.input, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    try:
        parser = parser or PARSERS[args.parser](args.lang, args.model_dir, args.batch_size)
    except (ImportError, RuntimeError) as e:
        fail(f"fusion-parse-trees: {e}")
    trees = parse_file(parser, lines, args.batch_size)
    failed = [i for i, t in enumerate(trees, start=1) if t is None]
    atomic_files.write_lines(args.output, [tree or "" for tree in trees])
    print(f"| wrote {args.output}: {len(trees)} lines, {len(trees) - len(failed)} parsed, {len(failed)} not parsed"
          + (f" (lines {', '.join(map(str, failed[:10]))}{' ...' if len(failed) > 10 else ''}: empty in the output; "
             "fusion-parse-spans --fallback ngram gives them n-gram spans)" if failed else ""))
    return trees

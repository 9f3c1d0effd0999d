"""fusion-embedding-similarity-bilingual: cosine similarity of aligned source and target word
embeddings over a bilingual dictionary, "All" pairs and "Non-Shared" pairs whose source and
target words differ (Liu et al. 2021, Table 3).

The dictionary is a file of ``source target`` lines (e.g. from fast_align links), or is built
from a gold word alignment (``src ||| tgt`` text + ``.talp`` links) with --alignment-text/-links;
pairs whose words are not single vocabulary entries of the model are left out (counted).

  fusion-embedding-similarity-bilingual --path sf/checkpoint_best.pt --compare vanilla/checkpoint_best.pt \\
      --alignment-text $DATA/alignment/deen/test.de-en --alignment-links $DATA/alignment/deen/deen.talp \\
      --reverse --out results/similarity
"""
import argparse
import ast

from ..analysis.common import add_checkpoint_args, load_model

from ..outputs import figure_title, locked, new_figure, write_outputs
from ..analysis.layer_fusion import bilingual_similarity, dictionary_from_alignments, read_dictionary
from ._tools import description_of
from fairseq_fusion_tools.user_files import fail


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-embedding-similarity-bilingual", description=description_of(__doc__))
    add_checkpoint_args(p, weights_only=True)
    p.add_argument("--compare", nargs="*", default=[], help="More checkpoints to compare.")
    p.add_argument("--labels", default=None, help="Comma-separated names of --path and --compare.")
    p.add_argument("--dictionary", default=None, help="File of 'source target' word pairs.")
    p.add_argument("--alignment-text", default=None, help="'src ||| tgt' sentences of a gold alignment.")
    p.add_argument("--alignment-links", default=None,
                   help="Its links, i-j (ipj possible links skipped): gold .talp files count words from 1, fast_align from 0.")
    p.add_argument("--links-index-base", type=int, choices=[0, 1], default=None,
                   help="Index of the first word in --alignment-links (default: read from the file; "
                   "an error when the file cannot tell).")
    p.add_argument("--reverse", action="store_true", help="Swap the alignment's sides (e.g. De-En links for En->De).")
    p.add_argument("--min-count", type=int, default=1, help="Keep aligned pairs seen at least this often.")
    return p


def plot(results):
    """All / Non-Shared similarity of each checkpoint (``results``: [{path, label, all, non_shared}]) as bars."""
    fig, ax = new_figure(figsize=(3.0 + 1.6 * len(results), 3.6))
    width = 0.35
    for k, (key, name) in enumerate((("all", "All"), ("non_shared", "Non-Shared"))):
        ax.bar([i + (k - 0.5) * width for i in range(len(results))], [r[key] for r in results], width, label=name)
    ax.set_xticks(range(len(results)), [r["label"] for r in results])
    ax.set_ylabel("cosine similarity")
    ax.legend()
    return figure_title(fig, "Aligned word embeddings' cosine similarity: " + ", ".join(r["path"] for r in results),
                        fontsize=9)


def main(args):
    if bool(args.dictionary) == bool(args.alignment_text and args.alignment_links):
        fail("fusion-embedding-similarity-bilingual: give either --dictionary or both --alignment-text and --alignment-links")
    if args.dictionary:
        pairs = read_dictionary(args.dictionary)
    else:
        try:
            pairs = dictionary_from_alignments(args.alignment_text, args.alignment_links, args.min_count, args.reverse,
                                               args.links_index_base)
        except ValueError as e:
            fail(f"fusion-embedding-similarity-bilingual: {e}")
    if not pairs:
        given = f"--dictionary {args.dictionary}" if args.dictionary else f"--alignment-text {args.alignment_text}"
        fail(f"fusion-embedding-similarity-bilingual: {given}: no word pairs; expected one 'source target' pair a line")
    paths = [args.path] + list(args.compare)
    labels = args.labels.split(",") if args.labels else paths
    if len(labels) != len(paths):
        fail(f"fusion-embedding-similarity-bilingual: --labels has {len(labels)} names for {len(paths)} checkpoints")
    results = []
    for path, label in zip(paths, labels):
        model, task, _ = load_model(path, args.data, ast.literal_eval(args.model_overrides), cpu=True)
        results.append(dict(bilingual_similarity(model, task, pairs), path=path, label=label))
    write_outputs(args.out, {"models": results}, plot(results))
    for r in results:
        print(f"| {r['label']}: All {r['all']:.3f}, Non-Shared {r['non_shared']:.3f} "
              f"({r['pairs']} pairs in the vocabulary of {r['dictionary_pairs']}, {r['non_shared_pairs']} non-shared)")


def cli_main():
    main(locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

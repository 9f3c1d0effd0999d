"""fusion-embedding-similarity-bilingual's run: the dictionary read or built from gold alignments, each checkpoint's
bilingual similarity, the figure.
"""
import ast

from .common import checkpoint_labels, load_model
from ..outputs import figure_title, mark_narrow_range, new_figure, write_outputs
from .layer_fusion import bilingual_similarity, dictionary_from_alignments, read_dictionary
from fairseq_fusion_tools.user_files import fail


def plot(results):
    """All / Non-Shared similarity of each checkpoint (``results``: [{path, label, all, non_shared}]) as bars."""
    fig, ax = new_figure(figsize=(3.0 + 1.6 * len(results), 3.6))
    width = 0.35
    for k, (key, name) in enumerate((("all", "All"), ("non_shared", "Non-Shared"))):
        ax.bar([i + (k - 0.5) * width for i in range(len(results))], [r[key] for r in results], width, label=name)
    ax.set_xticks(range(len(results)), [r["label"] for r in results])
    ax.set_ylabel("cosine similarity")
    ax.legend()
    mark_narrow_range(ax)
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
    labels = checkpoint_labels(paths, args.labels, "fusion-embedding-similarity-bilingual")
    results = []
    for path, label in zip(paths, labels):
        model, task, _ = load_model(path, args.data, ast.literal_eval(args.model_overrides), cpu=True)
        results.append(dict(bilingual_similarity(model, task, pairs), path=path, label=label))
    write_outputs(args.out, {"models": results}, plot(results))
    for r in results:
        print(f"| {r['label']}: All {r['all']:.3f}, Non-Shared {r['non_shared']:.3f} "
              f"({r['pairs']} pairs in the vocabulary of {r['dictionary_pairs']}, {r['non_shared_pairs']} non-shared)")

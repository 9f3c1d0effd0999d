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

from .. import outputs
from ..analysis import embedding_similarity_bilingual
from ..analysis.common import add_checkpoint_args
from ._tools import description_of


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


def cli_main():
    embedding_similarity_bilingual.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

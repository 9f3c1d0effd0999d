"""fusion-embedding-similarity: cosine similarity between the embeddings and every layer's
states, encoder and decoder (Emelin et al. 2019, §4.1, A.3, Fig. 6-7).

  fusion-embedding-similarity --path ckpt/checkpoint_last.pt --data /tmp/m30k --split test \\
      --out results/embedding_similarity
"""
import argparse

from .. import outputs
from ..analysis import embedding_similarity
from ..analysis.common import add_common_args
from ._tools import description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-embedding-similarity", description=description_of(__doc__))
    return add_common_args(p, split="test")


def cli_main():
    embedding_similarity.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

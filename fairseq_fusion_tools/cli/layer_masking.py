"""fusion-layer-masking: mask each encoder layer of a layer-attention model in turn at inference
and report the relative change of the task's metric and of the output length (Liu et al. 2021,
§3.3, Fig. 1-2).

Each masked model is loaded with the model override ``layer_attention_mask`` = n, as
``fairseq-generate --model-overrides "{'layer_attention_mask': n}"`` would, and decoded with
fairseq's generator: every ``fairseq-generate`` generation option (``--beam``, ``--lenpen``,
``--min-len``, ``--no-repeat-ngram-size``, ``--max-len-a/b``, ...) is accepted, and
``--post-process`` / ``--bpe gpt2`` turn the output back into text. ``--metric``: bleu
(tokenized BLEU on the post-processed text, the paper's metric for translation), sacrebleu, chrf,
or a metric a task registered (``fairseq_fusion_tools/scoring/metrics.py``).

  # translation (the paper: beam 4)
  fusion-layer-masking --path ckpt/checkpoint_best.pt --data data-bin/multi30k --split test --out results/masking
  # summarization settings (Liu et al. A.2): beam 4, length penalty 2.0, 55-140 tokens, no repeated 3-grams
  fusion-layer-masking --path sum/checkpoint_best.pt --data data-bin/cnndm --beam 4 --lenpen 2.0 --min-len 55 \\
      --max-len-a 0 --max-len-b 140 --no-repeat-ngram-size 3 --bpe gpt2 --gpt2-encoder-json encoder.json \\
      --gpt2-vocab-bpe vocab.bpe --metric rouge --out results/masking_cnndm
"""
import argparse

from .. import outputs
from ..analysis import layer_masking
from ..analysis.common import add_common_args
from ..analysis.layer_fusion import TRANSLATION_GENERATION
from ..scoring.metrics import known_metrics
from ._tools import add_generation_args, description_of


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-layer-masking", description=description_of(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    add_common_args(p, split="test")
    p.add_argument("--layers", default=None, help="Comma-separated encoder layers to mask (default: all attended, 0 = embeddings).")
    p.add_argument("--metric", default="bleu", help=f"Corpus metric, one of {known_metrics()} (default: %(default)s).")
    p.add_argument("--post-process", default=None, choices=layer_masking.POST_PROCESS,
                   help="How fairseq post-processes the output tokens (default: subword_nmt; none with --bpe gpt2).")
    p.add_argument("--bpe", default=None, choices=["gpt2"], help="Decode fairseq's GPT-2 BPE after --post-process none.")
    p.add_argument("--gpt2-encoder-json", default=None, help="With --bpe gpt2: the encoder.json file.")
    p.add_argument("--gpt2-vocab-bpe", default=None, help="With --bpe gpt2: the vocab.bpe file.")
    add_generation_args(p)
    p.set_defaults(**TRANSLATION_GENERATION)
    return p


def cli_main():
    layer_masking.main(outputs.locked(get_parser().parse_args()))


if __name__ == "__main__":
    cli_main()

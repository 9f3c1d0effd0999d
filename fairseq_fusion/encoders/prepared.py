"""``--bpe prepared``: raw text in and out, processed exactly as the data folder was prepared.

``fusion-prepare-text`` records its pipeline in the folder's ``prepare.json`` (punctuation
normalization, Chinese segmentation, Moses tokens, truecasing, BPE codes and vocabulary threshold).
``fairseq-interactive data-bin --bpe prepared`` and the hub's ``bpe="prepared"`` replay it on new
source sentences and undo it on the output (BPE joined, detruecased, Moses-detokenized), so raw text
is segmented as the model was trained, with no tokenizer/BPE flags to match by hand. The folder
is the task's data folder; the languages are ``-s``/``-t`` when given, else the folder's.
"""
import json
import os
from dataclasses import dataclass, field
from typing import Optional

from fairseq.data.encoders import register_bpe
from fairseq.dataclass import FairseqDataclass
from omegaconf import II

from ..errors import FusionError


@dataclass
class PreparedBPEConfig(FairseqDataclass):
    # interpolations without help text: fairseq fills them from the task, adds no flags
    prepared_data: str = II("task.data")
    prepared_source_lang: Optional[str] = II("task.source_lang")
    prepared_target_lang: Optional[str] = II("task.target_lang")


def _manifest(folder):
    path = os.path.join(folder, "prepare.json")
    if not os.path.exists(path):
        raise FusionError(f"--bpe prepared: {path} not found; expected a data folder written by fusion-prepare-text "
                          "(or use --tokenizer moses --bpe subword_nmt --bpe-codes FILE)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@register_bpe("prepared", dataclass=PreparedBPEConfig)
class PreparedBPE:
    def __init__(self, cfg):
        from .text_pipeline import TextPipeline

        folder = str(cfg.prepared_data).split(os.pathsep)[0]
        manifest = _manifest(folder)
        self.source_lang = cfg.prepared_source_lang or manifest["source_lang"]
        self.target_lang = cfg.prepared_target_lang or manifest["target_lang"]
        self.detruecase = bool(manifest.get("truecase"))
        try:
            self.pipeline = TextPipeline(folder, self.source_lang)
        except FileNotFoundError as e:
            raise FusionError(f"--bpe prepared: {e}") from None

    def encode(self, x: str) -> str:
        return self.pipeline(x)

    def decode(self, x: str) -> str:
        from .text_pipeline import detokenize

        tokens = (x + " ").replace("@@ ", "").rstrip()
        return detokenize([tokens], self.target_lang, detruecase=self.detruecase)[0]

    def is_beginning_of_word(self, x: str) -> bool:
        return not x.endswith("@@")

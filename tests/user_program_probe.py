"""A program of the user's own (run as ``python tests/user_program_probe.py CHECKPOINT DATA``, a fresh interpreter):
chooses torch's threads, imports the plugin, loads a checkpoint through the hub and translates; prints, as JSON, the
process settings before the import and after the translation, and the translation."""
import json
import logging
import sys
import warnings

import torch


def settings():
    return {"threads": torch.get_num_threads(), "excepthook": repr(sys.excepthook),
            "showwarning": repr(warnings.showwarning),
            "filters": [f[1].pattern if f[1] is not None else None for f in warnings.filters],
            "meta_path": repr(sys.meta_path), "cudnn_sdp": torch.backends.cuda.cudnn_sdp_enabled(),
            "logger_filters": sorted(name for name, lg in logging.root.manager.loggerDict.items()
                                     if isinstance(lg, logging.Logger) and lg.filters)}


def main(checkpoint, data):
    import os

    torch.set_num_threads(2)  # the user's choice
    before = settings()
    from fairseq_fusion.models.fusion_transformer import FusionTransformerModel

    hub = FusionTransformerModel.from_pretrained(os.path.dirname(checkpoint), os.path.basename(checkpoint), data)
    translation = hub.translate("a man is riding a bike .", beam=2)
    print(json.dumps({"before": before, "after": settings(), "translation": translation}))


if __name__ == "__main__":
    main(*sys.argv[1:])

"""The papers' settings per WMT task: data, BPE, training and decoding.

Used by every ``recipes/<task>/{prepare,train,evaluate}.sh`` through its command line,
``python recipes/common/settings.py prepare|train|evaluate ...`` (prints shell variable assignments), by the
benchmark (the papers' beams), by fusion-compare (the papers' protocols) and by ``tests/test_recipes.py``.
``tables`` holds the settings as plain data (with their sources), ``lookup`` reads them for a task, paper and arch,
``hydra`` writes a fairseq-hydra-train config, ``command`` is the command line (``main``). Nothing here imports
fairseq or torch at load time, so the recipes' shell steps read it quickly.
"""
from .command import main, readme_table
from .hydra import HYDRA_GROUPS, hydra_config
from .lookup import (bpe_settings, check_paper, check_task, data_settings, model_args, model_size, paper_of, pick,
                     preset_sources, source_of, train_command_args, train_settings, warmup_of)
from .tables import GOOGLE_WMT16_EN_DE, HYDRA_HEADLINE, LEE_WMT16_EN_RO, PAPERS, REPORTED, TASKS, VASWANI

__all__ = ["main", "readme_table", "HYDRA_GROUPS", "hydra_config", "bpe_settings", "check_paper", "check_task",
           "data_settings", "model_args", "model_size", "paper_of", "pick", "preset_sources", "source_of",
           "train_command_args", "train_settings", "warmup_of", "GOOGLE_WMT16_EN_DE", "HYDRA_HEADLINE", "LEE_WMT16_EN_RO",
           "PAPERS", "REPORTED", "TASKS", "VASWANI"]

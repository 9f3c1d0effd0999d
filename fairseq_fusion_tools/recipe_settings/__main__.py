"""``python -m fairseq_fusion_tools.recipe_settings STEP ...``: the same as ``python recipes/common/settings.py``."""
from .command import main

main()

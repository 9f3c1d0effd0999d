"""The recipes' command line for the papers' settings per task (``python recipes/common/settings.py --help``).

The settings live in the importable module ``fairseq_fusion_tools.recipe_settings`` (its docstring names the
sources); every ``recipes/<task>/{prepare,train,evaluate}.sh`` calls this file through ``recipes/common/recipe.sh``.
"""
from fairseq_fusion_tools.recipe_settings import main

if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# evaluate step of the wmt17_zh_en recipe (see recipes/README.md and --help).
TASK=wmt17_zh_en
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_evaluate "$@"

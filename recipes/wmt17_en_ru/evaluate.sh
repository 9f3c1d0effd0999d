#!/usr/bin/env bash
# evaluate step of the wmt17_en_ru recipe (see recipes/README.md and --help).
TASK=wmt17_en_ru
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_evaluate "$@"

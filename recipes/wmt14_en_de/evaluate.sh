#!/usr/bin/env bash
# evaluate step of the wmt14_en_de recipe (see recipes/README.md and --help).
TASK=wmt14_en_de
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_evaluate "$@"

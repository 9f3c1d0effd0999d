#!/usr/bin/env bash
# train step of the wmt14_en_fr recipe (see recipes/README.md and --help).
TASK=wmt14_en_fr
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_train "$@"

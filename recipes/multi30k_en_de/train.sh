#!/usr/bin/env bash
# train step of the multi30k_en_de recipe (see recipes/README.md and --help).
TASK=multi30k_en_de
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_train "$@"

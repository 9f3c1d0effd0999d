#!/usr/bin/env bash
# evaluate step of the conll14_gec recipe (see recipes/README.md and --help).
TASK=conll14_gec
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_evaluate "$@"

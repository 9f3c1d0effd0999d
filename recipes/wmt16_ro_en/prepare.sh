#!/usr/bin/env bash
# prepare step of the wmt16_ro_en recipe (see recipes/README.md and --help).
TASK=wmt16_ro_en
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_prepare "$@"

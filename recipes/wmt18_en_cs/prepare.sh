#!/usr/bin/env bash
# prepare step of the wmt18_en_cs recipe (see recipes/README.md and --help).
TASK=wmt18_en_cs
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_prepare "$@"

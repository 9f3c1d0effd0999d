#!/usr/bin/env bash
# train step of the cnndm_summarization recipe (see recipes/README.md and --help).
TASK=cnndm_summarization
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"
recipe_train "$@"

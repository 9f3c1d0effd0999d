#!/usr/bin/env bash
# prepare step of the conll14_gec recipe (see recipes/README.md and --help).
TASK=conll14_gec
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"

CONLL14_URL="https://www.comp.nus.edu.sg/~nlp/conll14st/conll14st-test-data.tar.gz"

usage() {
    cat <<USAGE
usage: recipes/conll14_gec/prepare.sh --local DIR [--test-m2 FILE] [--keep-unchanged] [--work DIR]
                                      [--max-lines N] [--workers N]

Prepares grammatical error correction on CoNLL-2014 as Liu et al. (2021, A.1), who used the
preprocessing of Chollampatt & Ng (2018, nusnlp/mlconvgec2018): NUCLE + Lang-8 v2 training pairs
(NLTK tokens), a 1/4 of NUCLE as the dev set, the CoNLL-2014 test set with its official M2 gold
edits. The training pairs without any correction are left out (mlconvgec2018's get_diff.py: the
paper's 1.3M pairs). The tokens are kept as they are (the M2 offsets count them), joint BPE with
30,000 merges, one dictionary. DATA/valid.m2 and DATA/test.m2 are the gold edits the M2 scorer
(fusion-score-m2, evaluate.sh) reads; the target side of dev and test is annotator 0's correction.

  --local DIR       NUCLE and Lang-8 need registration, so there is no download: DIR holds the output of
                    mlconvgec2018's data/prepare_data.sh: DIR/train.tok.src, DIR/train.tok.trg (source and
                    corrected training sentences, tokenized) and DIR/dev.all.m2 (the NUCLE dev set)
  --test-m2 FILE    the CoNLL-2014 gold edits (default: download $CONLL14_URL
                    and use noalt/official-2014.combined.m2, both annotators)
  --keep-unchanged  keep the training pairs whose source needs no correction
  --work DIR        working folder (default: \$WORK or ./work/conll14_gec); data goes to DIR/data-liu.src-trg
  --max-lines N     use only the first N training pairs (quick tests; dev and test stay whole)
Environment: BPE_MERGES overrides the merge count; PYTHON picks the Python environment.
USAGE
}

local_dir="" test_m2="" keep=0 max_lines="" workers="${WORKERS:-2}" merges_env="${BPE_MERGES:-}"
parse_common "$@"
set -- "${REST[@]+"${REST[@]}"}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --local) local_dir="$2"; shift 2 ;;
        --test-m2) test_m2="$2"; shift 2 ;;
        --keep-unchanged) keep=1; shift ;;
        --max-lines) max_lines="$2"; shift 2 ;;
        --workers) workers="$2"; shift 2 ;;
        *) die "prepare.sh: unknown option $1 (see --help)" ;;
    esac
done
settings prepare --task "$TASK" --paper liu
[[ -z "$PAPER_OPT" || "$PAPER_OPT" == liu ]] || die "--paper $PAPER_OPT: $TASK has liu's setting only"
[[ "$REVERSE" == 0 ]] || die "--reverse: $TASK corrects $SRC -> $TGT only"
dest="$WORK/data-$PAPER.$SRC-$TGT"
if prepared "$dest"; then exit 0; fi
if [[ -z "$local_dir" ]]; then
    reg=""
    for r in "${REGISTRATION[@]}"; do reg+=$'\n'"  - $r"; done
    die "the GEC training data needs registration, so it cannot be downloaded:$reg
Run nusnlp/mlconvgec2018's data/prepare_data.sh on them and pass its data/ folder with --local DIR (see --help)."
fi
for f in train.tok.src train.tok.trg dev.all.m2; do
    [[ -s "$local_dir/$f" ]] || die "--local $local_dir: missing $f (expected the data/ folder of mlconvgec2018's prepare_data.sh: train.tok.src, train.tok.trg, dev.all.m2)"
done
if [[ -z "$test_m2" ]]; then
    mkdir -p "$WORK/download"
    archive="$WORK/download/conll14st-test-data.tar.gz"
    [[ -s "$archive" ]] || wget -q -O "$archive" "$CONLL14_URL" || die "download of $CONLL14_URL failed; pass --test-m2 FILE"
    tar -xzf "$archive" -C "$WORK/download" || die "$archive: not a tar.gz archive; pass --test-m2 FILE"
    test_m2="$WORK/download/conll14st-test-data/noalt/official-2014.combined.m2"
fi
[[ -s "$test_m2" ]] || die "--test-m2 $test_m2: no such file (the CoNLL-2014 gold edits in M2 format)"

raw="$WORK/raw"
mkdir -p "$raw"
"$PYTHON" - "$local_dir" "$test_m2" "$raw" "$keep" "${max_lines:-0}" <<'PY' || die "reading the GEC data failed"
import sys
from fairseq_fusion_tools.scoring.m2 import m2_to_parallel

local, test_m2, raw, keep, max_lines = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1", int(sys.argv[5])
kept = total = 0
with open(f"{local}/train.tok.src", encoding="utf-8") as fs, open(f"{local}/train.tok.trg", encoding="utf-8") as ft, \
        open(f"{raw}/train.src", "w", encoding="utf-8") as os_, open(f"{raw}/train.trg", "w", encoding="utf-8") as ot:
    for s, t in zip(fs, ft):
        if max_lines and total == max_lines:
            break
        total += 1
        s, t = s.strip(), t.strip()
        if keep or s != t:  # mlconvgec2018 get_diff.py: only the pairs with a correction
            os_.write(s + "\n")
            ot.write(t + "\n")
            kept += 1
print(f"| training pairs: {kept} of {total} kept" + ("" if keep else " (those with a correction)"))
print(f"| dev: {m2_to_parallel(f'{local}/dev.all.m2', f'{raw}/dev.src', f'{raw}/dev.trg')} sentences")
print(f"| test: {m2_to_parallel(test_m2, f'{raw}/conll14.src', f'{raw}/conll14.trg')} sentences")
PY
echo "| $TASK: tokens kept, joint BPE ${merges_env:-$BPE_MERGES} merges -> $dest"
tool fusion-prepare-text -s "$SRC" -t "$TGT" --tokenizer none --trainpref "$raw/train" --validpref "$raw/dev" \
    --testpref "$raw/conll14" --bpe-merges "${merges_env:-$BPE_MERGES}" --max-len "$MAX_LEN" --max-ratio "$MAX_RATIO" \
    --destdir "$dest" --workers "$workers"
# the gold edits beside the data (after fusion-prepare-text, which writes a new folder)
cp "$local_dir/dev.all.m2" "$dest/valid.m2"
cp "$test_m2" "$dest/test.m2"

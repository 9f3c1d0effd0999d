#!/usr/bin/env bash
# prepare step of the cnndm_summarization recipe (see recipes/README.md and --help).
TASK=cnndm_summarization
source "$(dirname "${BASH_SOURCE[0]}")/../common/recipe.sh"

usage() {
    cat <<USAGE
usage: recipes/cnndm_summarization/prepare.sh [--local DIR] [--gpt2-dir DIR] [--work DIR] [--max-lines N]
                                              [--truncate-source N] [--workers N]

Prepares the non-anonymized CNN/DailyMail corpus of See et al. (2017) as Liu et al. (2021, A.1,
following Ott et al. 2019): articles truncated to their first 400 words, GPT-2 byte-level BPE with
fairseq's encoder files (vocabulary 50,264 with the special symbols, Liu et al. Table 4), one
dictionary for both sides (fusion-prepare-gpt2). Summaries keep their sentences apart with <q>,
which ROUGE-L's summary-level LCS uses (fusion-score-rouge).

  --local DIR          DIR/{train,val,test}.{source,target}: one article / one summary a line, the
                       summary's sentences separated by <q> (default: download with the datasets package,
                       "abisee/cnn_dailymail" 3.0.0, the non-anonymized version)
  --gpt2-dir DIR       encoder.json, vocab.bpe and dict.txt (default: download them from
                       https://dl.fbaipublicfiles.com/fairseq/gpt2_bpe/)
  --truncate-source N  words kept of each article (default 400)
  --work DIR           working folder (default: \$WORK or ./work/cnndm_summarization); data goes to
                       DIR/data-liu.source-target
  --max-lines N        use only the first N lines of each file (quick tests)
USAGE
}

local_dir="" gpt2_dir="" max_lines="" truncate=400 workers="${WORKERS:-2}"
parse_common "$@"
set -- "${REST[@]+"${REST[@]}"}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        -h|--help) usage; exit 0 ;;
        --local) local_dir="$2"; shift 2 ;;
        --gpt2-dir) gpt2_dir="$2"; shift 2 ;;
        --max-lines) max_lines="$2"; shift 2 ;;
        --truncate-source) truncate="$2"; shift 2 ;;
        --workers) workers="$2"; shift 2 ;;
        *) die "prepare.sh: unknown option $1 (see --help)" ;;
    esac
done
settings prepare --task "$TASK" --paper liu
[[ -z "$PAPER_OPT" || "$PAPER_OPT" == liu ]] || die "--paper $PAPER_OPT: $TASK has liu's setting only"
[[ "$REVERSE" == 0 ]] || die "--reverse: $TASK summarizes $SRC -> $TGT only"
dest="$WORK/data-$PAPER.$SRC-$TGT"
if prepared "$dest"; then exit 0; fi
raw="$WORK/raw"
if [[ -n "$local_dir" ]]; then
    [[ -d "$local_dir" ]] || die "--local $local_dir: no such folder"
    for split in train val test; do
        for side in source target; do
            [[ -e "$local_dir/$split.$side" || -e "$local_dir/$split.$side.gz" ]] \
                || die "--local $local_dir: missing $split.$side (expected {train,val,test}.{source,target}, one article / summary a line)"
        done
    done
    raw="$local_dir"
else
    mkdir -p "$raw"
    "$PYTHON" -c "import datasets" 2>/dev/null \
        || die "downloading CNN/DailyMail needs the datasets package (pip install datasets), or pass --local DIR"
    "$PYTHON" - "$raw" <<'PY' || die "download of CNN/DailyMail failed; pass --local DIR"
import sys, datasets
out = sys.argv[1]
data = datasets.load_dataset("abisee/cnn_dailymail", "3.0.0")
for split, name in (("train", "train"), ("validation", "val"), ("test", "test")):
    with open(f"{out}/{name}.source", "w", encoding="utf-8") as s, open(f"{out}/{name}.target", "w", encoding="utf-8") as t:
        for ex in data[split]:
            s.write(" ".join(ex["article"].split()) + "\n")
            t.write(" <q> ".join(" ".join(x.split()) for x in ex["highlights"].split("\n") if x.strip()) + "\n")
PY
fi
if [[ -z "$gpt2_dir" ]]; then
    gpt2_dir="$WORK/gpt2"
    mkdir -p "$gpt2_dir"
    for f in encoder.json vocab.bpe dict.txt; do
        [[ -s "$gpt2_dir/$f" ]] || wget -q -O "$gpt2_dir/$f" "https://dl.fbaipublicfiles.com/fairseq/gpt2_bpe/$f" \
            || die "download of fairseq's GPT-2 $f failed; pass --gpt2-dir DIR"
    done
fi
echo "| $TASK: articles truncated to $truncate words, GPT-2 BPE -> $dest"
tool fusion-prepare-gpt2 -s "$SRC" -t "$TGT" --trainpref "$raw/train" --validpref "$raw/val" --testpref "$raw/test" \
    --gpt2-dir "$gpt2_dir" --truncate-source "$truncate" --destdir "$dest" --workers "$workers" ${max_lines:+--max-lines "$max_lines"}
echo "| prepared $dest"

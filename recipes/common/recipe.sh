# Shared shell functions of the recipes: sourced by recipes/<task>/{prepare,train,evaluate}.sh with TASK set.
# The papers' numbers live in recipes/common/settings.py; this file only runs the tools.
set -euo pipefail

RECIPES="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REPO="$(cd "$RECIPES/.." && pwd)"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$REPO/.venv/bin/python" ]]; then PYTHON="$REPO/.venv/bin/python"; else PYTHON="$(command -v python3)"; fi
fi
BIN="$(dirname "$PYTHON")"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

tool() {  # a console script beside $PYTHON, else on PATH
    local name=$1; shift
    if [[ -x "$BIN/$name" ]]; then "$BIN/$name" "$@"; else "$name" "$@"; fi
}

die() { echo "error: $*" >&2; exit 2; }

script_path() {  # the path of a console script beside $PYTHON, else on PATH
    if [[ -x "$BIN/$1" ]]; then echo "$BIN/$1"; else command -v "$1" || die "$1 is neither beside $PYTHON nor on PATH"; fi
}

data_root() {  # the data folder: fairseq_fusion_tools/data_paths.py (FUSION_DATA, ../shared/data, the cache)
    "$PYTHON" -c "import sys; sys.path.insert(0, sys.argv[1]); from fairseq_fusion_tools import data_paths; print(data_paths.data_root())" "$REPO"
}

settings() {  # eval the shell variables settings.py prints for a step
    local out
    out="$("$PYTHON" "$RECIPES/common/settings.py" "$@" 2>/dev/null)" || die "settings.py $* failed"
    eval "$out"
}

work_dir() { echo "${WORK:-$PWD/work/$TASK}"; }

# options common to the three steps; sets PAPER, REVERSE, WORK, REST (the other arguments)
parse_common() {
    PAPER_OPT=""; REVERSE=0; REST=()
    WORK="$(work_dir)"
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --paper) PAPER_OPT="$2"; shift 2 ;;
            --reverse) REVERSE=1; shift ;;
            --work) WORK="$2"; shift 2 ;;
            *) REST+=("$1"); shift ;;
        esac
    done
}

direction() {  # swaps SRC/TGT with --reverse; sets PAIR
    if [[ "$REVERSE" == 1 ]]; then local t=$SRC; SRC=$TGT; TGT=$t; fi
    PAIR="$SRC-$TGT"
}

# ------------------------------------------------------------------------------------------ prepare
prepare_usage() {
    settings prepare --task "$TASK"
    local release_syn="" source_text
    [[ ${#RELEASE_PAPERS[@]} -gt 0 ]] && release_syn=" [--preprocessed DIR | --from-raw]"
    if [[ -n "$LOCAL_DEFAULT" ]]; then
        source_text="reads the local copy of the data (--local
DIR), Moses-tokenizes it (sacremoses), cleans the training pairs, learns joint BPE with the merge
count of the task's setting ($PAPER) and binarizes it with fairseq-preprocess --joined-dictionary
(fusion-prepare-text does all of this)."
    else
        source_text="gets the official data (downloads it, or reads --local DIR),
normalizes punctuation and Moses-tokenizes it (sacremoses; Chinese segmented with jieba), cleans
the training pairs, learns joint BPE with the merge count, vocabulary threshold and truecasing of
PAPER's setup, and binarizes it with fairseq-preprocess --joined-dictionary (fusion-prepare-text
does all of this)."
    fi
    cat <<EOF
usage: recipes/$TASK/prepare.sh [--local DIR] [--extra-train PREFIX]... [--paper PAPER] [--reverse]
                                 [--bpe-tool subword-nmt|fastbpe] [--work DIR] [--max-lines N] [--workers N]$release_syn

Prepares $TASK for training: $source_text
A folder prepared already (it has prepare.json) is left as it is: remove it to prepare it again.

  --local DIR       read plain text (or .gz) from DIR$([[ -z "$LOCAL_DEFAULT" ]] && echo " instead of downloading")$([[ -n "$LOCAL_DEFAULT" ]] && echo " (default: \$FUSION_DATA/$LOCAL_DEFAULT, FUSION_DATA" && echo "                    defaulting to ../shared/data beside the repository, else make data's cache)"):
                    DIR/train.L, the dev set DIR/<name>.L and the test sets DIR/<name>.L (L = both languages;
                    names: ${VALID_PARTS[*]} ${TESTS[*]}; the test sets after the first are optional)
  --extra-train P   add P.SRC and P.TGT to the training data (corpora that need registration; repeatable)
  --paper PAPER     whose preprocessing, dev/test sets and direction to use: ${PAPERS[*]} or vaswani;
                    default: $PAPER; see recipes/README.md
  --reverse         the other translation direction than PAPER's
  --bpe-tool T      the tool that applies BPE: subword-nmt (default) or fastbpe (make install FASTBPE=1)
  --work DIR        working folder (default: \$WORK or ./work/$TASK); data goes to DIR/data-PAPER.SRC-TGT
  --max-lines N     use only the first N lines of each file (quick tests)
  --workers N       parallel processes of tokenization, BPE and binarization (default: \$WORKERS or 2)
EOF
    if [[ ${#RELEASE_PAPERS[@]} -gt 0 ]]; then
        cat <<EOF
  --preprocessed DIR  the extracted preprocessed release ${RELEASE_PAPERS[*]} trained on (instead of downloading it
                    with gdown: that release is only binarized)
  --from-raw        run the raw-text pipeline even where PAPER (${RELEASE_PAPERS[*]}) used a preprocessed release
EOF
    fi
    echo "Environment: BPE_MERGES overrides the merge count; PYTHON picks the Python environment."
}

recipe_prepare() {
    parse_common "$@"
    set -- "${REST[@]+"${REST[@]}"}"
    local local_dir="" bpe_tool="subword-nmt" max_lines="" workers="${WORKERS:-2}" merges_env="${BPE_MERGES:-}"
    local pre_dir="" from_raw=0 extra_train=()
    while [[ $# -gt 0 ]]; do
        case "$1" in
            -h|--help) prepare_usage; exit 0 ;;
            --local) local_dir="$2"; shift 2 ;;
            --extra-train) extra_train+=("$2"); shift 2 ;;
            --preprocessed) pre_dir="$2"; shift 2 ;;
            --from-raw) from_raw=1; shift ;;
            --bpe-tool) bpe_tool="$2"; shift 2 ;;
            --max-lines) max_lines="$2"; shift 2 ;;
            --workers) workers="$2"; shift 2 ;;
            *) die "prepare.sh: unknown option $1 (see --help)" ;;
        esac
    done
    settings prepare --task "$TASK" ${PAPER_OPT:+--paper "$PAPER_OPT"}
    direction
    if [[ -n "$pre_dir" && -z "$PRE_URL" ]]; then die "--preprocessed: $PAPER trained $TASK on raw data, not on a preprocessed release"; fi
    if prepared "$WORK/data-$PAPER.$PAIR"; then return; fi
    if [[ -n "$PRE_URL" && "$from_raw" == 0 ]]; then
        [[ -z "$local_dir" && ${#extra_train[@]} -eq 0 ]] || die "$PAPER trained $TASK on $PRE_NAME: --local/--extra-train need --from-raw"
        prepare_preprocessed "$pre_dir" "$workers"
        return
    fi
    local reg
    for reg in "${REGISTRATION[@]+"${REGISTRATION[@]}"}"; do
        echo "| note: the papers' training data also has $reg (needs registration: add it with --extra-train PREFIX)"
    done
    if [[ -z "$local_dir" && -n "$LOCAL_DEFAULT" ]]; then
        local_dir="$(data_root)/$LOCAL_DEFAULT"
    fi
    local raw="$WORK/raw"
    if [[ -n "$local_dir" ]]; then
        [[ -d "$local_dir" ]] || die "--local $local_dir: no such folder"
        raw="$local_dir"
        local prefix lang
        for prefix in train "${VALID_PARTS[@]}" "${TESTS[0]}"; do
            for lang in "$SRC" "$TGT"; do
                [[ -e "$raw/$prefix.$lang" || -e "$raw/$prefix.$lang.gz" ]] \
                    || die "--local $local_dir: missing $prefix.$lang (or .gz); expected train, ${VALID_PARTS[*]} and ${TESTS[0]} in both languages (optional: ${TESTS[*]:1})"
            done
        done
        local present=()  # the further test sets that are there (they keep their order: test1, test2, ...)
        for prefix in "${TESTS[@]}"; do
            [[ -e "$raw/$prefix.$SRC" || -e "$raw/$prefix.$SRC.gz" ]] && present+=("$prefix")
        done
        TESTS=("${present[@]}")
    else
        download "$raw"
    fi
    local train_pref="$raw/train" valid_pref="$raw/$VALID" p lang
    if [[ ${#extra_train[@]} -gt 0 || ${#VALID_PARTS[@]} -gt 1 ]]; then  # concatenations go to WORK/joined
        mkdir -p "$WORK/joined"
        for lang in "$SRC" "$TGT"; do
            if [[ ${#extra_train[@]} -gt 0 ]]; then
                train_pref="$WORK/joined/train"
                for p in "$raw/train" "${extra_train[@]}"; do cat_text "$p" "$lang"; done > "$train_pref.$lang"
            fi
            if [[ ${#VALID_PARTS[@]} -gt 1 ]]; then
                valid_pref="$WORK/joined/$VALID"
                for p in "${VALID_PARTS[@]}"; do cat_text "$raw/$p" "$lang"; done > "$valid_pref.$lang"
            fi
        done
    fi
    local dest="$WORK/data-$PAPER.$PAIR"
    local tests=() t
    for t in "${TESTS[@]}"; do tests+=("$raw/$t"); done
    local extra=()
    [[ -n "$BPE_THRESHOLD" ]] && extra+=(--bpe-vocab-threshold "$BPE_THRESHOLD")
    [[ "$TRUECASE" == 1 ]] && extra+=(--truecase)
    [[ "$TASK" != multi30k_en_de ]] && extra+=(--normalize-punctuation)  # fairseq's and Edinburgh's WMT pipelines
    [[ -n "$max_lines" ]] && extra+=(--max-lines "$max_lines")
    BPE_MERGES="${merges_env:-$BPE_MERGES}"
    echo "| $TASK ($PAIR), $PAPER's preprocessing: $BPE_MERGES BPE merges, dev set $VALID -> $dest"
    tool fusion-prepare-text -s "$SRC" -t "$TGT" --trainpref "$train_pref" --validpref "$valid_pref" \
        --testpref "$(IFS=,; echo "${tests[*]}")" --destdir "$dest" --bpe-merges "$BPE_MERGES" \
        --bpe-tool "$bpe_tool" --max-len "$MAX_LEN" --max-ratio "$MAX_RATIO" --workers "$workers" "${extra[@]+"${extra[@]}"}"
    echo "| prepared $dest (test sets: ${TESTS[*]} -> subsets test, test1, ...)"
}

prepared() {  # DEST: skip a folder fusion-prepare-text or -gpt2 completed (each renames it into place when complete)
    [[ -f "$1/prepare.json" ]] || return 1
    echo "| $1 is prepared already: nothing to do (remove it, or give another --work, to prepare it again)"
}

cat_text() {  # PREFIX LANG: PREFIX.LANG or PREFIX.LANG.gz to stdout
    if [[ -e "$1.$2" ]]; then cat "$1.$2"; elif [[ -e "$1.$2.gz" ]]; then gunzip -c "$1.$2.gz"; else die "missing $1.$2 (or .gz)"; fi
}

prepare_preprocessed() {  # DIR WORKERS: binarize the paper's preprocessed release (downloaded when DIR is empty)
    local dir=$1 workers=$2 orig="$WORK/orig" found
    if [[ -z "$dir" ]]; then
        mkdir -p "$orig"
        if [[ ! -s "$orig/$PRE_ARCHIVE" ]]; then
            "$PYTHON" -c "import gdown" 2>/dev/null \
                || die "$PAPER trained $TASK on $PRE_NAME, a Google Drive file: pip install gdown, or download $PRE_URL yourself, extract it and pass --preprocessed DIR (or --from-raw for the raw-text pipeline)"
            "$PYTHON" -m gdown "$PRE_URL" -O "$orig/$PRE_ARCHIVE" || die "download of $PRE_URL failed; download it yourself and use --preprocessed DIR"
        fi
        mkdir -p "$orig/preprocessed"
        tar -xzf "$orig/$PRE_ARCHIVE" -C "$orig/preprocessed"
        dir="$orig/preprocessed"
    fi
    [[ -d "$dir" ]] || die "--preprocessed $dir: no such folder"
    # the folder that holds the training files, wherever the archive put them
    found="$(find "$dir" -path "*/$PRE_TRAIN.$SRC" -o -path "$dir/$PRE_TRAIN.$SRC" 2>/dev/null | head -n 1)"
    [[ -n "$found" ]] || die "--preprocessed $dir: no $PRE_TRAIN.$SRC in it (expected $PRE_NAME: $PRE_TRAIN, $PRE_VALID, ${PRE_TESTS[*]} .$SRC/.$TGT)"
    local base="${found%/$PRE_TRAIN.$SRC}" raw="$WORK/raw" j tests=() raws=()
    mkdir -p "$raw"
    for j in "${!PRE_TESTS[@]}"; do  # the raw references sacreBLEU scores against, from sacreBLEU
        tests+=("$base/${PRE_TESTS[$j]}"); raws+=("$raw/${TESTS[$j]}")
        tool sacrebleu -t "${TEST_SETS[$j]}" -l "$SRC-$TGT" --echo src > "$raw/${TESTS[$j]}.$SRC"
        tool sacrebleu -t "${TEST_SETS[$j]}" -l "$SRC-$TGT" --echo ref > "$raw/${TESTS[$j]}.$TGT"
    done
    local dest="$WORK/data-$PAPER.$PAIR" extra=()
    [[ -n "$PRE_CODES" ]] && extra+=(--bpe-codes "$base/$PRE_CODES")
    [[ -n "$PRE_NWORDS" ]] && extra+=(--nwords "$PRE_NWORDS")
    echo "| $TASK ($PAIR), $PAPER's data: $PRE_NAME -> $dest"
    tool fusion-prepare-text --preprocessed -s "$SRC" -t "$TGT" --trainpref "$base/$PRE_TRAIN" --validpref "$base/$PRE_VALID" \
        --testpref "$(IFS=,; echo "${tests[*]}")" --raw-testpref "$(IFS=,; echo "${raws[*]}")" --destdir "$dest" \
        --workers "$workers" "${extra[@]+"${extra[@]}"}"
    echo "| prepared $dest (test sets: ${TESTS[*]:0:${#PRE_TESTS[@]}} -> subsets test, ...)"
}

download() {  # official training corpora (statmt.org, OPUS) and dev/test sets (through sacreBLEU) into $1
    local raw=$1 orig="$WORK/orig" i url path file lang
    mkdir -p "$raw" "$orig"
    command -v wget >/dev/null || die "wget is needed to download; or pass --local DIR"
    for lang in "$SRC" "$TGT"; do : > "$raw/train.$lang"; done
    for i in "${!TRAIN_URLS[@]}"; do
        url="${TRAIN_URLS[$i]}"; path="${TRAIN_PATHS[$i]}"
        file="$orig/$(basename "${url%%\?*}")"
        [[ "$url" == *"f=SETIMES"* ]] && file="$orig/setimes.en-ro.txt.zip"
        [[ -s "$file" ]] || wget -c -O "$file" "$url" || die "download of $url failed; download it yourself and use --local"
        case "$file" in
            *.tgz|*.tar.gz) tar -xzf "$file" -C "$orig" ;;
            *.tar) tar -xf "$file" -C "$orig"; gunzip -f "$orig/$path".*.gz 2>/dev/null || true ;;
            *.zip) (cd "$orig" && unzip -o -q "$file") ;;
            *.tsv.gz) gunzip -c "$file" > "$orig/$path" ;;
        esac
        if [[ "$path" == *.tsv ]]; then  # wikititles: "<xx>\t<en>" per line
            local first="${path#*-v1.}"; first="${first%%-*}"
            if [[ "$first" == "$SRC" ]]; then
                cut -f1 "$orig/$path" >> "$raw/train.$SRC"; cut -f2 "$orig/$path" >> "$raw/train.$TGT"
            else
                cut -f2 "$orig/$path" >> "$raw/train.$SRC"; cut -f1 "$orig/$path" >> "$raw/train.$TGT"
            fi
        else
            local where="$orig/$path"
            if [[ ! -e "$where.$SRC" ]]; then  # some archives put the files in a folder of their own
                where="$(find "$orig" -name "$(basename "$path").$SRC" | head -n 1)"; where="${where%.$SRC}"
            fi
            for lang in "$SRC" "$TGT"; do
                [[ -n "$where" && -e "$where.$lang" ]] || die "expected $orig/$path.$lang after extracting $file"
                cat "$where.$lang" >> "$raw/train.$lang"
            done
        fi
    done
    local sets=("${VALID_SETS[@]}" "${TEST_SETS[@]}") names=("${VALID_PARTS[@]}" "${TESTS[@]}") j
    for j in "${!sets[@]}"; do
        tool sacrebleu -t "${sets[$j]}" -l "$SRC-$TGT" --echo src > "$raw/${names[$j]}.$SRC"
        tool sacrebleu -t "${sets[$j]}" -l "$SRC-$TGT" --echo ref > "$raw/${names[$j]}.$TGT"
    done
}

# -------------------------------------------------------------------------------------------- train
train_usage() {
    settings prepare --task "$TASK"
    local what stages syn="[--paper PAPER] [--reverse] " opts
    opts="  --paper PAPER  train with PAPER's settings (${PAPERS[*]} or vaswani) on WORK/data-PAPER.SRC-TGT
  --reverse      the other translation direction than PAPER's
"
    if [[ "$OWN_PREPARE" == 1 ]]; then syn=""; opts=""; fi
    if [[ "$EVERY_ARCH" == 1 ]]; then
        what="with
the task's own small setting ($PAPER, no paper's; see recipes/README.md) whatever the arch: its
model size, dropout, learning rate, warm-up, batch, update count and checkpoint interval; the
arch's technique flags (as its preset sets them) and its criterion
(fusion_options.default_criterion, e.g. the diversity criterion) stay."
        stages="Every arch trains in one stage here unless --two-stage."
    else
        local which="read from the arch's name; baselines take the task's first paper, or --paper"
        [[ "$OWN_PREPARE" == 1 ]] && which="${PAPERS[*]}, the task's only setting"
        what="with
the hyperparameters of the arch's paper (PAPER: $which): base/big
dims from the arch, Adam with the inverse-sqrt warm-up schedule, the paper's warm-up, batch
(tokens per update reached through --update-freq for the GPUs of every node), update count,
dropout, checkpoint interval, FP16 on GPU and distributed training when several GPUs are visible or
several nodes train, and the arch's default criterion (fusion_options.default_criterion, e.g. the
diversity criterion)."
        stages="dou's archs train in two stages by default, the others in one."
    fi
    cat <<EOF
usage: recipes/$TASK/train.sh ARCH $syn[--work DIR] [--eval-bleu]
                               [--two-stage | --one-stage] [--print-command] [-- FAIRSEQ_TRAIN_ARGS...]

Trains ARCH (any fusion_transformer arch, e.g. fusion_transformer, transformer_lexical_shortcuts_ff,
transformer_hierarchical_aggregation_big) on $TASK $what

$opts  --work DIR     working folder (default: \$WORK or ./work/$TASK)
  --eval-bleu    also log validation BLEU (fairseq's --eval-bleu, with the setting's beam and length
                 penalty, Moses detokenization); plot the curve with fusion-training-curve
  --two-stage    Dou et al.'s protocol (4.1, "initialized by the pre-trained model"): first train the
                 vanilla fusion_transformer(_big) of the same size with the same settings (or reuse
                 WORK/checkpoints/fusion_transformer*.PAPER.SRC-TGT), then train ARCH from its
                 checkpoint_last.pt with --init-from-vanilla
  --one-stage    train ARCH from scratch
  $stages
  --print-command  print the fairseq-train command(s) (with their launcher on several nodes) and
                 exit: nothing is run or written, the data need not be prepared
  -- ARGS        fairseq-train flags, after the recipe's (model flags given here decide size and warm-up)

Reads WORK/data-PAPER.SRC-TGT (run prepare.sh first); writes WORK/checkpoints/ARCH.PAPER.SRC-TGT.
Environment overrides: MAX_UPDATE, MAX_TOKENS (per GPU), N_GPUS (GPUs per node), SEED (default 1),
EXTRA_ARGS (appended to fairseq-train); PYTHON picks the Python environment.
Several nodes (WORK on a filesystem they share; --update-freq keeps the paper's tokens per update
over all their GPUs; see recipes/README.md):
  With torchrun: set NNODES=N NODE_RANK=R MASTER_ADDR=HOST [MASTER_PORT=P, default 29500] on each
    node; the recipe runs fairseq-train under torchrun (N_GPUS processes a node; fairseq's env://).
  Under SLURM: srun, one task per node, in a job of several nodes (SLURM_NNODES > 1); fairseq finds
    the nodes itself and spawns a process per GPU; its --distributed-port is MASTER_PORT, default
    10000 + SLURM_JOB_ID % 50000.
  Node R > 0 logs to train.nodeR.log.
EOF
}

checkpoint_dir() { echo "$WORK/checkpoints/$ARCH.$PAPER.$PAIR"; }

train_setup() {  # ARCH + options -> settings, DATA, SAVE
    [[ $# -ge 1 && "$1" != -* ]] || die "the first argument must be ARCH (see --help)"
    ARCH=$1; shift
    parse_common "$@"
    settings paper --task "$TASK" --arch "$ARCH" ${PAPER_OPT:+--paper "$PAPER_OPT"}
    if [[ "$OWN_PREPARE" == 1 ]]; then  # prepare.sh prepares the task's setting in its direction only
        [[ -z "$PAPER_OPT" || " ${TASK_PAPERS[*]} " == *" $PAPER_OPT "* ]] || die "--paper $PAPER_OPT: $TASK has ${TASK_PAPERS[*]}'s setting only"
        [[ "$REVERSE" == 0 ]] || die "--reverse: $TASK goes $SRC -> $TGT only"
    fi
    direction
    DATA="$WORK/data-$PAPER.$PAIR"
    SAVE="$(checkpoint_dir)"
}

train_settings() {  # the paper's settings of ARCH (+ model flags); "cached": those train.sh recorded in SAVE, if any
    local cache="$SAVE/recipe_settings.sh"
    if [[ "${1:-}" == cached && -f "$cache" ]]; then
        source "$cache"  # evaluate.sh decodes with the settings the model was trained with
    else
        local flags="${1:-}"
        [[ "$flags" == cached ]] && flags=""
        # N_GPUS unset: settings.py counts the visible GPUs (it imports torch anyway) and sets it
        settings train --task "$TASK" --arch "$ARCH" --n-gpus "${N_GPUS:-auto}" --n-nodes "${NODES:-1}" --paper "$PAPER" \
            ${MAX_TOKENS:+--max-tokens "$MAX_TOKENS"} --model-flags="$flags"
        direction
    fi
}

whole() {  # NAME VALUE MIN [MAX]: VALUE is a whole number in [MIN, MAX]
    if [[ "$2" =~ ^[0-9]{1,18}$ ]] && (( 10#$2 >= $3 )) && { [[ -z "${4:-}" ]] || (( 10#$2 <= $4 )); }; then return 0; fi
    die "$1=$2: expected a whole number $([[ -n "${4:-}" ]] && echo "from $3 to $4" || echo "of $3 or more")"
}

gpus_per_node() {  # N_GPUS: as the user set it, else torch's count of the visible GPUs
    N_GPUS="${N_GPUS:-$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)}"
}

# Several nodes: sets NODES, NODE (this node's rank), LAUNCH (the launcher before fairseq-train's path; empty on one
# node, where fairseq-train spawns a process per GPU as before) and DIST_ARGS (fairseq-train's flags). fairseq
# initializes itself (fairseq/distributed/utils.py infer_init_method): env:// from torchrun's variables; under SLURM
# tcp://FIRST_NODE:--distributed-port with one task per node, each spawning a process per GPU.
distributed_setup() {
    NODES=1; NODE=0; LAUNCH=(); DIST_ARGS=()
    if [[ -n "${TORCHELASTIC_RUN_ID:-}" || ( -n "${LOCAL_RANK:-}" && -n "${WORLD_SIZE:-}" ) ]]; then
        die "train.sh runs under torchrun (LOCAL_RANK and WORLD_SIZE are set): run it once per node with NNODES, NODE_RANK and MASTER_ADDR set instead; it starts torchrun itself (see --help)"
    fi
    local port
    if [[ -n "${NNODES:-}" ]]; then
        whole NNODES "$NNODES" 1
        NODES=$((10#$NNODES))
        [[ $NODES -gt 1 ]] || return 0
        [[ -n "${NODE_RANK:-}" ]] || die "NNODES=$NODES: set NODE_RANK, this node's rank (0 to $((NODES - 1)))"
        whole NODE_RANK "$NODE_RANK" 0 $((NODES - 1))
        [[ -n "${MASTER_ADDR:-}" ]] || die "NNODES=$NODES: set MASTER_ADDR, the host name or address of node 0"
        port="${MASTER_PORT:-29500}"
        whole MASTER_PORT "$port" 1 65535
        NODE=$((10#$NODE_RANK))
        gpus_per_node
        LAUNCH=(torchrun --nnodes "$NODES" --nproc_per_node "$N_GPUS" --node_rank "$NODE" --master_addr "$MASTER_ADDR"
                --master_port "$port")
    elif [[ -n "${SLURM_JOB_NODELIST:-}${SLURM_STEP_NODELIST:-}" && "${SLURM_NNODES:-1}" != 1 ]]; then
        whole SLURM_NNODES "$SLURM_NNODES" 1
        NODES=$((10#$SLURM_NNODES))
        local per_node="${SLURM_NTASKS_PER_NODE:-}"  # as fairseq reads it
        [[ -n "$per_node" ]] || per_node=$(( ${SLURM_NTASKS:-$NODES} / NODES ))
        [[ "$per_node" == 1 ]] || die "SLURM_NTASKS_PER_NODE=$per_node: train.sh takes one SLURM task per node (srun --ntasks-per-node=1); fairseq-train spawns a process per GPU"
        [[ -n "${SLURM_NODEID:-}" ]] || die "SLURM_NNODES=$NODES but no SLURM_NODEID: start train.sh on every node with srun"
        NODE=$SLURM_NODEID
        gpus_per_node
        port="${MASTER_PORT:-}"
        if [[ -z "$port" ]]; then  # the same on every node of the job
            [[ -n "${SLURM_JOB_ID:-}" ]] || die "SLURM_NNODES=$NODES without SLURM_JOB_ID: set MASTER_PORT, the port every node uses"
            whole SLURM_JOB_ID "$SLURM_JOB_ID" 0
            port=$((10000 + 10#$SLURM_JOB_ID % 50000))
        fi
        whole MASTER_PORT "$port" 1 65535
        DIST_ARGS=(--distributed-port "$port")
    else
        return 0
    fi
    [[ "$N_GPUS" -gt 0 ]] || die "N_GPUS=$N_GPUS: training on $NODES nodes needs GPUs (none visible on this node)"
    # given, so that fairseq initializes the group even with one GPU a node (its default world size is the node's GPUs)
    DIST_ARGS=(--distributed-world-size $((NODES * N_GPUS)) "${DIST_ARGS[@]+"${DIST_ARGS[@]}"}")
}

quoted_command() { local q; q="$(printf '%q ' "$@")"; echo "${q% }"; }

recipe_train() {
    case "${1:-}" in -h|--help|"") train_usage; [[ -n "${1:-}" ]] && exit 0 || exit 2 ;; esac
    train_setup "$@"
    local passthrough=() seen=0 a eval_bleu=0 stages="" print_only=0
    for a in "${REST[@]+"${REST[@]}"}"; do
        if [[ $seen == 1 ]]; then passthrough+=("$a")
        elif [[ "$a" == "--" ]]; then seen=1
        elif [[ "$a" == --eval-bleu ]]; then eval_bleu=1
        elif [[ "$a" == --two-stage ]]; then stages=2
        elif [[ "$a" == --one-stage ]]; then stages=1
        elif [[ "$a" == --print-command ]]; then print_only=1
        else die "train.sh: unknown option $a"; fi
    done
    distributed_setup
    if [[ -z "$stages" ]]; then
        stages=1; [[ "$PAPER" == dou && "$ARCH" != fusion_transformer* ]] && stages=2
    fi
    # the model flags after -- decide size and warm-up with the arch (e.g. -- --lexical-shortcuts on a baseline)
    local quoted=""
    [[ ${#passthrough[@]} -gt 0 ]] && quoted="$(printf '%q ' "${passthrough[@]}")"
    train_settings "$quoted"
    if [[ "$print_only" == 0 ]]; then
        [[ -f "$DATA/dict.$SRC.txt" ]] || die "$DATA not prepared: run recipes/$TASK/prepare.sh --paper $PAPER$([[ $REVERSE == 1 ]] && echo " --reverse")"
        mkdir -p "$SAVE"
        declare -p PAPER SIZE CRITERION BEAM LENPEN AVERAGE SRC TGT TRUECASE METRIC GEN_EXTRA TRAIN_ARGS PAIR | sed 's/^declare /declare -g /' > "$SAVE/recipe_settings.sh"
    fi
    local extra=()
    [[ -n "${MAX_UPDATE:-}" ]] && extra+=(--max-update "$MAX_UPDATE")
    if [[ "$eval_bleu" == 1 ]]; then  # fairseq's translation task: BLEU of the valid set after each validation
        extra+=(--eval-bleu --eval-bleu-args "{\"beam\": $BEAM, \"lenpen\": $LENPEN}" --eval-bleu-detok moses
                --eval-bleu-remove-bpe)
    fi
    if [[ "$stages" == 2 ]]; then
        local vanilla="fusion_transformer" own=()
        [[ "$SIZE" == big ]] && vanilla="fusion_transformer_big"
        [[ "$ARCH" != "$vanilla" ]] || die "--two-stage: $ARCH is the vanilla model itself"
        [[ "$REVERSE" == 1 ]] && own+=(--reverse)
        [[ "$eval_bleu" == 1 ]] && own+=(--eval-bleu)
        local stage1="$WORK/checkpoints/$vanilla.$PAPER.$PAIR"
        if [[ "$print_only" == 1 ]]; then
            bash "$RECIPES/$TASK/train.sh" "$vanilla" --paper "$PAPER" --work "$WORK" --one-stage --print-command "${own[@]+"${own[@]}"}"
        elif [[ -f "$stage1/checkpoint_last.pt" ]] && grep -q "done training" "$stage1/train.log" 2>/dev/null; then
            echo "| $PAPER's protocol, stage 1: reusing the trained $stage1"
        else  # trains it, or resumes it from its checkpoint_last.pt
            echo "| $PAPER's protocol, stage 1: the vanilla $vanilla"
            bash "$RECIPES/$TASK/train.sh" "$vanilla" --paper "$PAPER" --work "$WORK" --one-stage "${own[@]+"${own[@]}"}" \
                || die "--two-stage: training the vanilla $vanilla failed"
        fi
        local init="$stage1/checkpoint_last.pt"
        if [[ "$print_only" == 0 ]]; then
            [[ -f "$init" ]] || die "--two-stage: $init not found after stage 1"
            echo "| stage 2: $ARCH initialized from $init"
        fi
        extra+=(--init-from-vanilla "$init")
    fi
    # shellcheck disable=SC2206
    [[ -n "${EXTRA_ARGS:-}" ]] && extra+=($EXTRA_ARGS)
    local train_bin=fairseq-train
    if [[ ${#LAUNCH[@]} -gt 0 ]]; then train_bin="$(script_path fairseq-train)"; fi  # torchrun runs it by its path
    local cmd=("${LAUNCH[@]+"${LAUNCH[@]}"}" "$train_bin" "$DATA" --user-dir "$REPO/fairseq_fusion" --source-lang "$SRC"
               --target-lang "$TGT" "${TRAIN_ARGS[@]}" "${DIST_ARGS[@]+"${DIST_ARGS[@]}"}" --save-dir "$SAVE"
               --log-format simple --log-interval 100 --seed "${SEED:-1}" "${extra[@]+"${extra[@]}"}"
               "${passthrough[@]+"${passthrough[@]}"}")
    if [[ "$print_only" == 1 ]]; then quoted_command "${cmd[@]}"; return 0; fi
    local gpus="$N_GPUS GPU(s)" node=""
    if [[ $NODES -gt 1 ]]; then gpus="$NODES nodes x $N_GPUS GPUs, node $NODE"; fi
    if [[ $NODE -gt 0 ]]; then node=".node$NODE"; fi  # node 0 logs to train.log, as on one node
    echo "| $TASK ($PAIR): $ARCH with $PAPER's settings ($SIZE, $gpus, criterion $CRITERION) -> $SAVE"
    echo "| ${cmd[*]}" | tee "$SAVE/command$node.txt"
    tool "${cmd[@]}" 2>&1 | tee -a "$SAVE/train$node.log"
    return "${PIPESTATUS[0]}"
}

# ----------------------------------------------------------------------------------------- evaluate
evaluate_usage() {
    settings prepare --task "$TASK"
    local report syn="[--paper PAPER] [--reverse] " common="--paper, --reverse, --work"
    [[ "$OWN_PREPARE" == 1 ]] && { syn=""; common="--work DIR"; }
    case "$METRIC" in
        rouge) report="reports ROUGE-1/2/L (fusion-score-rouge) against the raw summaries" ;;
        m2) report="reports the M2 scorer's precision, recall and F0.5 (fusion-score-m2) against DATA/SUBSET.m2" ;;
        *) report="reports detokenized sacreBLEU with its signature and tokenized BLEU (Moses tokens; compound
splitting for German and French, characters for Chinese), through fusion-score-bleu" ;;
    esac
    cat <<EOF
usage: recipes/$TASK/evaluate.sh ARCH $syn[--work DIR] [--checkpoint FILE]
                                  [--subset test|test1|...] [--beam N] [--lenpen X]
EOF
    [[ "$METRIC" == bleu ]] && echo "       recipes/$TASK/evaluate.sh --hyp FILE --ref FILE [--hyp-format tok|detok|generate] [-t|--target-lang LANG] [--out PREFIX]"
    cat <<EOF

Evaluates ARCH trained by train.sh with its settings: averages the last N checkpoints (N from the
setting; those that selected on validation use checkpoint_best.pt), translates the test set with
the setting's beam and length penalty (fairseq-generate), and
$report.
Results: WORK/checkpoints/ARCH.PAPER.SRC-TGT/eval/SUBSET.json.

  --checkpoint FILE  evaluate FILE instead (e.g. WORK/checkpoints/ARCH.PAPER.SRC-TGT/checkpoint_last.pt)
  --subset S         test (default), test1, ...: the test sets in prepare.sh's order; valid: the dev set
  --beam N, --lenpen X  decode with these instead of the setting's
  $common  as for train.sh
EOF
    [[ "$METRIC" == bleu ]] && printf '%s\n' "With --hyp it only scores an existing system output (tokenized by default) against --ref" \
        "(results: PREFIX.json and PREFIX.detok; PREFIX defaults to FILE.score)."
    cat <<EOF
Environment: AVERAGE overrides the number of checkpoints averaged (0: checkpoint_best.pt);
GEN_ARGS is appended to fairseq-generate, GEN_MAX_TOKENS its --max-tokens (default 8000);
N_GPUS, PYTHON as for train.sh.
EOF
}

recipe_evaluate() {
    local a
    for a in "$@"; do [[ "$a" == -h || "$a" == --help ]] && { evaluate_usage; exit 0; }; done
    if [[ "${1:-}" == --hyp ]]; then score_only "$@"; return; fi
    local average_env="${AVERAGE:-}"
    train_setup "$@"
    set -- "${REST[@]+"${REST[@]}"}"
    local ckpt="" subset="test" beam="" lenpen=""
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --checkpoint) ckpt="$2"; shift 2 ;;
            --subset) subset="$2"; shift 2 ;;
            --beam) beam="$2"; shift 2 ;;
            --lenpen) lenpen="$2"; shift 2 ;;
            *) die "evaluate.sh: unknown option $1 (see --help)" ;;
        esac
    done
    # before the settings (they import fairseq where train.sh recorded none): is there anything to evaluate?
    [[ -n "$ckpt" || -n "$(find "$SAVE" -maxdepth 1 -name 'checkpoint*.pt' 2>/dev/null)" ]] \
        || die "no checkpoint in $SAVE: train first (recipes/$TASK/train.sh $ARCH)"
    train_settings cached
    beam="${beam:-$BEAM}"; lenpen="${lenpen:-$LENPEN}"
    local n="${average_env:-$AVERAGE}" out="$SAVE/eval"
    if [[ -z "$ckpt" ]]; then
        if [[ "$n" -gt 0 ]]; then
            local found setting="$PAPER's setting"
            [[ -n "$average_env" ]] && setting="AVERAGE=$n"
            found=$(find "$SAVE" -maxdepth 1 -name 'checkpoint_*_*.pt' | wc -l)
            [[ "$found" -gt 0 ]] || die "found 0 checkpoint_E_U.pt in $SAVE, $setting averages the last $n (the run ended before its first --save-interval-updates): evaluate checkpoint_best.pt with AVERAGE=0, or one file with --checkpoint $SAVE/checkpoint_last.pt"
            if [[ "$found" -lt "$n" ]]; then
                echo "| warning: $setting averages the last $n checkpoints, $SAVE has $found: averaging those" >&2
                n=$found
            fi
            ckpt="$out/average.last$n.pt"
            mkdir -p "$out"
            tool fusion-average-checkpoints --inputs "$SAVE" --num-update-checkpoints "$n" --output "$ckpt"
        else
            ckpt="$SAVE/checkpoint_best.pt"
            [[ -f "$ckpt" ]] || die "$ckpt not found (it is written after a validation): evaluate one file with --checkpoint $SAVE/checkpoint_last.pt"
        fi
    fi
    [[ -f "$ckpt" ]] || die "checkpoint $ckpt not found"
    mkdir -p "$out"
    # --required-batch-size-multiple 1: this fairseq build drops a last batch that is not a multiple of it
    local gen="$out/generate.$subset.txt"
    echo "| translating $subset with beam $beam, length penalty $lenpen: $ckpt"
    tool fairseq-generate "$DATA" --user-dir "$REPO/fairseq_fusion" --source-lang "$SRC" --target-lang "$TGT" \
        --path "$ckpt" --gen-subset "$subset" --beam "$beam" --lenpen "$lenpen" $(bpe_decoding_args) \
        --max-tokens "${GEN_MAX_TOKENS:-8000}" --required-batch-size-multiple 1 --num-workers 0 $([[ "${N_GPUS:-}" == 0 ]] && echo --cpu) \
        "${GEN_EXTRA[@]+"${GEN_EXTRA[@]}"}" ${GEN_ARGS:-} > "$gen"
    score_generation "$gen" "$subset" "$out/$subset"
}

bpe_decoding_args() {  # GPT-2 BPE (DATA/gpt2/ from prepare.sh): fairseq's gpt2 decoder; else subword-nmt's @@
    if [[ -f "$DATA/gpt2/encoder.json" ]]; then
        echo "--bpe gpt2 --gpt2-encoder-json $DATA/gpt2/encoder.json --gpt2-vocab-bpe $DATA/gpt2/vocab.bpe"
    else
        echo "--remove-bpe"
    fi
}

score_generation() {  # GENERATE_OUTPUT SUBSET OUT: the task's metric (METRIC from settings.py)
    local gen=$1 subset=$2 out=$3
    case "${METRIC:-bleu}" in
        bleu)
            local truecase=()
            [[ "$TRUECASE" == 1 ]] && truecase=(--detruecase)
            tool fusion-score-bleu --hyp "$gen" --hyp-format generate --ref "$DATA/tok/$subset.raw.$TGT" -t "$TGT" \
                "${truecase[@]+"${truecase[@]}"}" --out "$out" ;;
        rouge)
            tool fusion-score-rouge --hyp "$gen" --hyp-format generate --ref "$DATA/tok/$subset.raw.$TGT" --out "$out" ;;
        m2)
            [[ -f "$DATA/$subset.m2" ]] || die "$DATA/$subset.m2 not found: the gold edits of $subset (prepare.sh writes them)"
            tool fusion-score-m2 --hyp "$gen" --hyp-format generate --gold "$DATA/$subset.m2" --out "$out" ;;
        *) die "unknown metric $METRIC" ;;
    esac
}

score_only() {  # --hyp FILE --ref FILE [--hyp-format F] [-t LANG]
    local hyp="" ref="" fmt="tok" lang="" out=""
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --hyp) hyp="$2"; shift 2 ;;
            --ref) ref="$2"; shift 2 ;;
            --hyp-format) fmt="$2"; shift 2 ;;
            -t|--target-lang) lang="$2"; shift 2 ;;
            --out) out="$2"; shift 2 ;;
            *) die "evaluate.sh --hyp: unknown option $1" ;;
        esac
    done
    [[ -n "$ref" ]] || die "--hyp needs --ref FILE (the raw reference)"
    settings prepare --task "$TASK"
    [[ "$METRIC" == bleu ]] || die "--hyp scores BLEU; $TASK's metric is $METRIC: run fusion-score-$METRIC on the output"
    [[ -n "$lang" ]] || lang="$TGT"
    tool fusion-score-bleu --hyp "$hyp" --hyp-format "$fmt" --ref "$ref" -t "$lang" --out "${out:-$hyp.score}"
}

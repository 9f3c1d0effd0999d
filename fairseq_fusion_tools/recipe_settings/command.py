"""The command line of the recipes' settings (``recipes/common/settings.py``, ``python -m
fairseq_fusion_tools.recipe_settings``): a recipe step's settings as shell assignments, the README table, a hydra
config."""
import argparse
import shlex
import sys

from .hydra import hydra_config
from .lookup import (bpe_settings, check_task, data_settings, paper_of, pick, train_command_args, train_settings,
                     warmup_of)
from .tables import PAPERS, REPORTED, TASKS


def _emit(**values):
    for k, v in values.items():
        if isinstance(v, (list, tuple)):
            print(f"{k}=({' '.join(shlex.quote(str(x)) for x in v)})")
        else:
            print(f"{k}={shlex.quote('' if v is None else str(v))}")


def gpu_count(value):
    """--n-gpus: a whole number, or auto."""
    if value == "auto":
        return value
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number of GPUs or auto, not {value!r}")
    return int(value)


def main(argv=None):
    p = argparse.ArgumentParser(description="print the shell settings of a recipe step")
    p.add_argument("step", choices=["prepare", "paper", "train", "readme-table", "hydra"])
    p.add_argument("--task", default=None)
    p.add_argument("--paper", default=None)
    p.add_argument("--arch", default=None)
    p.add_argument("--n-gpus", type=gpu_count, default=0,
                   help="GPUs per node; auto: torch's count of the visible GPUs (train prints it as N_GPUS)")
    p.add_argument("--n-nodes", type=int, default=1, help="nodes (the tokens per update are spread over all their GPUs)")
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--model-flags", default="", help="the model flags given to train.sh after --")
    a = p.parse_args(argv)
    if a.n_gpus == "auto" and a.step in ("train", "hydra"):  # these steps import fairseq, and so torch, anyway
        import torch

        a.n_gpus = torch.cuda.device_count()
    try:
        if a.step == "readme-table":
            print(readme_table())
            return
        if a.step == "hydra":
            print(hydra_config(a.task, a.arch, a.n_gpus), end="")
            return
        task = check_task(a.task)
        if a.step == "prepare":
            paper = a.paper or task["papers"][0]
            b, d = bpe_settings(a.task, paper), data_settings(a.task, paper)
            pre = d["preprocessed"] or {}
            _emit(PAPER=paper, SRC=d["src"], TGT=d["tgt"], BPE_MERGES=b["merges"], BPE_THRESHOLD=b["threshold"],
                  TRUECASE=int(b["truecase"]), MAX_LEN=b["max_len"], MAX_RATIO=b["max_ratio"],
                  VALID_SETS=[v or "" for v, _ in d["valid"]], VALID_PARTS=[name for _, name in d["valid"]], VALID=d["valid_name"],
                  TEST_SETS=[t or "" for t, _ in d["test"]], TESTS=[name for _, name in d["test"]],
                  LOCAL_DEFAULT=task.get("local_default", ""), EVERY_ARCH=int(bool(task.get("every_arch"))),
                  OWN_PREPARE=int(bool(task.get("own_prepare"))), METRIC=task.get("metric", "bleu"),
                  PAPERS=task["papers"], RELEASE_PAPERS=[q for q in task["papers"] if data_settings(a.task, q)["preprocessed"]],
                  TRAIN_URLS=[u for u, _ in task["train"]], TRAIN_PATHS=[q for _, q in task["train"]],
                  REGISTRATION=[f"{name}: {url}" for name, url in d["registration"]],
                  PRE_NAME=pre.get("name"), PRE_URL=pre.get("url"), PRE_ARCHIVE=pre.get("archive"), PRE_TRAIN=pre.get("train"),
                  PRE_VALID=pre.get("valid"), PRE_TESTS=pre.get("test", []), PRE_CODES=pre.get("codes"), PRE_NWORDS=pre.get("nwords"))
        elif a.step == "paper":  # light: no fairseq import
            paper = a.paper or paper_of(a.arch, a.task)
            d = data_settings(a.task, paper)
            _emit(PAPER=paper, SRC=d["src"], TGT=d["tgt"], OWN_PREPARE=int(bool(task.get("own_prepare"))), TASK_PAPERS=task["papers"])
        else:
            s = train_settings(a.task, a.arch, a.paper, a.n_gpus, a.max_tokens, flags=shlex.split(a.model_flags),
                               n_nodes=a.n_nodes)
            d = data_settings(a.task, s["paper"])
            _emit(PAPER=s["paper"], SIZE=s["size"], CRITERION=s["criterion"], BEAM=s["beam"], LENPEN=s["lenpen"],
                  AVERAGE=s["average"] or 0, SRC=d["src"], TGT=d["tgt"], METRIC=task.get("metric", "bleu"), GEN_EXTRA=s["gen_args"], TRUECASE=int(bpe_settings(a.task, s["paper"])["truecase"]),
                  TRAIN_ARGS=train_command_args(s, a.n_gpus, a.n_nodes), N_GPUS=a.n_gpus)
    except ValueError as e:
        print(f"echo {shlex.quote('error: ' + str(e))} >&2; exit 2")
        sys.exit(0)


def readme_table():
    rows = ["| paper | task | direction, dev / tests | BPE (merges / vocab. threshold / truecase) | model | batch (tokens) | updates | warm-up | beam / LP | checkpoint | reported BLEU (test) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for paper, spec in PAPERS.items():
        if paper == "vaswani":
            continue
        for task, t in TASKS.items():
            if paper not in t["papers"]:
                continue
            b, d = bpe_settings(task, paper), data_settings(task, paper)
            bpe = (f"{b['merges']} / {b['threshold'] or '-'} / {'yes' if b['truecase'] else 'no'}" if not d["preprocessed"]
                   else "release: " + d["preprocessed"]["name"].split(" (")[0])
            if t.get("metric") == "rouge":
                bpe = "GPT-2 BPE (fairseq's files)"
            sets = f"{d['src']}->{d['tgt']}, {d['valid_name']} / {', '.join(n for _, n in d['test'])}"
            tr = dict(spec["train"])
            tr.update(tr.pop("by_task", {}).get(task, {}))
            if paper == "liu":  # Table 4: Ro-En base, En-De and En-Fr big
                sizes = ["base"] if task in ("wmt16_ro_en", "cnndm_summarization", "conll14_gec") else ["big"]
            else:
                sizes = ["base"] if paper == "multi30k" else ["base", "big"]
            reported = "; ".join(f"{sys_}: {bleu} ({what}, {test})" for p_, t_, sys_, test, bleu, what in REPORTED if p_ == paper and t_ == task)
            for size in sizes:
                avg = pick(tr["average"], size, task)
                rows.append(
                    f"| {paper} | {task} | {sets if size == sizes[0] else ''} | {bpe} | {size} | "
                    f"{tr['batch_tokens']} | {pick(tr['updates'], size, task)} | {warmup_of(paper, None, size, tr['warmup'])}"
                    f"{' (6k shortcuts, 8k feature-fusion)' if paper == 'emelin' and size == 'base' else ''} | "
                    f"{tr['beam']} / {tr['lenpen']} | {'average of last ' + str(avg) if avg else 'best valid. loss'} | "
                    f"{reported if size == sizes[0] else ''} |"
                )
    return "\n".join(rows)

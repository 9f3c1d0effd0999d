"""--fusion-log-internals in W&B: fairseq-train with ``--wandb-project`` in offline mode (``WANDB_MODE=offline``)
writes every figure under ``train_inner/fusion/...`` and ``valid/fusion/...``; the test reads the offline run file
back.

wandb is installed beside the venv (``make install``: ``.venv/wandb-test``), not in it: fairseq imports wandb in every
process where it is importable, 0.5 s of each command's start. The training and the reading of its run file are
processes with that folder on their path; skipped where it is not there (an environment of one's own)."""
import glob
import json
import os
import struct
import subprocess
import sys

import pytest

from conftest import run_cli, tiny_train_args

WANDB_DIR = os.path.join(os.path.dirname(os.path.dirname(sys.executable)), "wandb-test")  # .venv/wandb-test
if not os.path.isdir(os.path.join(WANDB_DIR, "wandb")):
    pytest.skip(f"no wandb at {WANDB_DIR} (make install puts it there)", allow_module_level=True)
HERE = os.path.dirname(os.path.abspath(__file__))


BLOCK, HEADER = 32768, 7  # the run file: a 7-byte header (":W&B", magic, version), then LevelDB's log format


def run_file_records(path):
    """The records of a W&B run file (LevelDB's log format: 32 KiB blocks of chunks, each a 4-byte checksum, a
    2-byte length, a 1-byte type: 1 whole, 2 first, 3 middle, 4 last), read here (wandb >= 0.2x has no reader)."""
    data = open(path, "rb").read()
    assert data[:4] == b":W&B", data[:8]
    records, pending, at = [], b"", HEADER
    while at + 7 <= len(data):
        if BLOCK - at % BLOCK < 7:  # a block's tail too short for a chunk header: padding
            at += BLOCK - at % BLOCK
            continue
        length, kind = struct.unpack("<HB", data[at + 4:at + 7])
        chunk, at = data[at + 7:at + 7 + length], at + 7 + length
        if kind == 0 and length == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            records.append(pending)
    return records


def offline_history(folder):
    """[{key: value}] of the history records in the offline run files under ``folder``: read with wandb's own record
    type (``wandb.proto``) in a process that has wandb on its path."""
    code = (f"import json, sys; sys.path.insert(0, {HERE!r}); import test_internals_wandb as t; "
            f"print(json.dumps(t.history_rows({folder!r})))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=WANDB_DIR))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def history_rows(folder):
    from wandb.proto import wandb_internal_pb2

    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "wandb", "offline-run-*", "run-*.wandb"))):
        for data in run_file_records(path):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            if record.WhichOneof("record_type") != "history":
                continue
            rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                         for item in record.history.item})
    return rows


def test_figures_reach_wandb_offline(multi30k_slice, tmp_path):
    env = {"WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "WANDB_CONSOLE": "off", "PYTHONPATH": WANDB_DIR}
    proc = run_cli(tiny_train_args(multi30k_slice, str(tmp_path / "save"), "transformer_lexical_shortcuts",
                                   "--fusion-log-internals", "--log-format", "json", "--wandb-project", "fusion-test",
                                   max_update=3), env=env, process=True)
    records = [json.loads(line[line.index("{"):]) for line in proc.stdout.splitlines() if '{"epoch"' in line]
    inner = [r for r in records if "loss" in r]
    name = "fusion/shortcuts/enc0_key_gate"
    assert len(inner) == 3, proc.stdout[-2000:]
    rows = offline_history(str(tmp_path))
    logged = {}
    for row in rows:
        for key, value in row.items():
            logged.setdefault(key, []).append(value)
    assert logged.get("train_inner/" + name) == pytest.approx([float(r[name]) for r in inner], abs=1e-5), sorted(logged)
    assert "valid/" + name in logged and "train_inner/loss" in logged

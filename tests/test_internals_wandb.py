"""--fusion-log-internals in W&B: fairseq-train with ``--wandb-project`` in offline mode (``WANDB_MODE=offline``)
writes every figure under ``train_inner/fusion/...`` and ``valid/fusion/...``; the test reads the offline run file
back. Skipped where wandb is not installed (it is in the ``test`` extra of pyproject.toml)."""
import glob
import json
import os
import struct

import pytest

from conftest import run_cli, tiny_train_args

wandb = pytest.importorskip("wandb")


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
    """[{key: value}] of the history records in the offline run files under ``folder``."""
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
           "WANDB_DISABLE_GIT": "true", "WANDB_CONSOLE": "off"}
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

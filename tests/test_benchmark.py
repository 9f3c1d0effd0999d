"""fusion-benchmark: the memory mode end to end on the real Multi30k slice, and the memory measure itself.
No timing is asserted."""
import json
import os

import torch

from fairseq_fusion import benchmark
from conftest import run_cli


def test_profiled_peak_increase_counts_live_tensor_bytes():
    def step():
        a = torch.empty(2 * 2**20, dtype=torch.float32)  # 8 MiB
        b = torch.empty(2**20, dtype=torch.float32)  # 4 MiB, both alive: 12 MiB
        del a, b
        c = torch.empty(2**20, dtype=torch.float32)  # 4 MiB after the peak
        return c

    kept = []
    peak, net = benchmark.profiled_peak_increase(lambda: kept.append(step()))
    assert abs(peak - 12 * 2**20) < 2**16 and abs(net - 4 * 2**20) < 2**16


def test_memory_table_has_memory_column_and_ratio():
    rows = [{"arch": "transformer", "params": 2e6, "peak_train_step_mb": 100.0},
            {"arch": "x", "params": 3e6, "peak_train_step_mb": 160.0}]
    table = benchmark.markdown_table(rows)
    assert benchmark.MEMORY_HEADER in table.splitlines()[0]
    assert table.splitlines()[-1] == "| x | 3.00M | 160 | 1.60 |"
    timed = [dict(r, train_words_per_s=10.0, decode_sentences_per_s=1.0) for r in rows]
    assert benchmark.MEMORY_HEADER in benchmark.markdown_table(timed).splitlines()[0]


def test_memory_only_end_to_end(multi30k_slice, tmp_path):
    out = tmp_path / "memory.json"
    proc = run_cli(["fusion-benchmark", "--data", multi30k_slice, "--archs", "fusion_transformer,transformer_lexical_shortcuts",
                    "--size", "tiny", "--memory-only", "--max-tokens", "1024", "--cpu", "--out", str(out)])
    data = json.loads(out.read_text())
    rows = {r["arch"]: r for r in data["results"]}
    assert list(rows) == ["transformer", "fusion_transformer", "transformer_lexical_shortcuts"]
    for r in rows.values():
        assert r["peak_train_step_mb"] > r["held_at_step_start_mb"] > 0
        assert r["batch"]["sentences"] * max(r["batch"]["src_len"], r["batch"]["tgt_len"]) <= 1024
        assert "train_words_per_s" not in r  # no timing in this mode
    # fusion_transformer with every flag off is fairseq's transformer: the same tensors, the same bytes
    assert abs(rows["fusion_transformer"]["peak_train_step_mb"] / rows["transformer"]["peak_train_step_mb"] - 1) < 0.01
    assert rows["transformer_lexical_shortcuts"]["params"] > rows["transformer"]["params"]
    header = data["table"].splitlines()[0]
    assert benchmark.MEMORY_HEADER in header and "words/s" not in header
    assert len(data["table"].splitlines()) == 2 + 3 and data["settings"]["memory_only"]
    assert "peak train step" in proc.stdout
    assert os.path.getsize(out) > 0

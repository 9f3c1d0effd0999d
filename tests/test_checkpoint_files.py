"""A checkpoint cut at any length, or corrupt, is refused in one line naming the file by every reader of checkpoints:
fairseq's loaders (patched by the plugin), fusion-average-checkpoints and fusion-convert-checkpoint
(``fairseq_fusion/guards/checkpoint_files.py``). Called in-process for the sweep; one case through a real command.

What cannot be refused: torch checks no checksum, so bytes flipped inside a tensor's data load as other numbers.
Only damage to what torch reads to find the tensors (the zip's directory, ``data.pkl``, ``version``) is refused.
"""
import io
import os
import struct
import zipfile

import pytest
from fairseq import checkpoint_utils

import fairseq_fusion  # noqa: F401  (patches fairseq's loaders)
from conftest import run_cli
from fairseq_fusion.errors import PREFIX, FusionError
from fairseq_fusion_tools.cli import convert_checkpoint as convert_checkpoint_cli
from fairseq_fusion_tools.checkpoints import convert_checkpoint
from fairseq_fusion_tools.checkpoints.average_checkpoints import average_checkpoints
from test_refusals import generate, one_line_refusal


def cut_lengths(size):
    """Short cuts, every 1/16 of the file, and all but its last byte."""
    return sorted({0, 1, 10, 100, 1000, 4000, size - 1} | {size * k // 16 for k in range(1, 16)})


def without_member(data, suffix):
    """The zip archive ``data`` rewritten without its member whose name ends in ``suffix``."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dest:
        for info in src.infolist():
            if not info.filename.endswith(suffix):
                dest.writestr(info, src.read(info.filename))
    return out.getvalue()


def with_flipped_pickle(data):
    """``data`` with the first 16 bytes of its ``data.pkl`` (the tensors' index) inverted."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("/data.pkl"))
    name_length, extra_length = struct.unpack("<HH", data[info.header_offset + 26:info.header_offset + 30])
    start = info.header_offset + 30 + name_length + extra_length  # after the local header (zip's layout)
    return data[:start] + bytes(b ^ 0xFF for b in data[start:start + 16]) + data[start + 16:]


def corruptions(data):
    return {
        "zeroed header": bytes(64) + data[64:],
        "zip without data.pkl": without_member(data, "/data.pkl"),
        "zip without version": without_member(data, "/version"),
        "zip without a tensor": without_member(data, "/data/0"),
        "flipped data.pkl": with_flipped_pickle(data),
        "text file": b"source target\nein Hund . a dog .\n" * 20,
    }


def variants(checkpoint):
    with open(checkpoint, "rb") as f:
        data = f.read()
    found = [(f"cut at {n} bytes", data[:n]) for n in cut_lengths(len(data))]
    return found + list(corruptions(data).items())


def load_with_fairseq(path):
    checkpoint_utils.load_checkpoint_to_cpu(path)


def load_ensemble_with_fairseq(path):
    checkpoint_utils.load_model_ensemble_and_task([path])


def average(path):
    average_checkpoints([path])


def convert(path):
    out = path + ".converted"
    try:
        convert_checkpoint.main(convert_checkpoint_cli.get_parser().parse_args(["--input", path, "--output", out]))
    finally:
        assert not os.path.exists(out), "a refused conversion must not write its output"


@pytest.mark.parametrize("read", [load_with_fairseq, load_ensemble_with_fairseq, average, convert])
def test_every_cut_and_corruption_is_refused_naming_the_file(tiny_checkpoint, tmp_path, read):
    for what, blob in variants(tiny_checkpoint):
        path = str(tmp_path / "bad.pt")
        with open(path, "wb") as f:
            f.write(blob)
        with pytest.raises(FusionError) as refusal:
            read(path)
        message = str(refusal.value)
        assert message.startswith(f"{PREFIX}checkpoint {path}: "), (what, message)
        assert "\n" not in message, (what, message)
        expected = "the file is empty (0 bytes)" if not blob else f"cannot be read ({len(blob)} bytes;"
        assert expected in message, (what, message)


def test_the_whole_checkpoint_still_loads(tiny_checkpoint):
    """The sweep's control: the uncut file is no refusal."""
    assert "model" in checkpoint_utils.load_checkpoint_to_cpu(tiny_checkpoint)


def test_fairseq_generate_refuses_a_checkpoint_cut_short(multi30k_slice, tiny_checkpoint, tmp_path):
    """Through the real command: 10,000 bytes, a cut where torch's zip reader raised OSError (Errno 22) before (it
    seeks back 64 KiB from the end to find the zip's directory)."""
    cut = str(tmp_path / "cut.pt")
    with open(tiny_checkpoint, "rb") as f, open(cut, "wb") as out:
        out.write(f.read()[:10000])
    one_line_refusal(generate(multi30k_slice, cut), f"checkpoint {cut}", "10000 bytes", "truncated", "cut short")


def test_fusion_average_checkpoints_refuses_a_text_file(tmp_path):
    text = str(tmp_path / "notes.pt")
    with open(text, "w") as f:
        f.write("not a checkpoint\n")
    proc = run_cli(["fusion-average-checkpoints", "--inputs", text, "--output", str(tmp_path / "avg.pt")], check=False)
    one_line_refusal(proc, f"checkpoint {text}", "not a file torch.save wrote")
    assert not os.path.exists(tmp_path / "avg.pt")

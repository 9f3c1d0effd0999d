"""Raw text in, detokenized text out: ``--bpe prepared`` (fairseq-interactive and the hub) replays the data
folder's preparation; over-long lines are refused in one line or skipped on request."""
import os

from sacremoses import MosesDetokenizer, MosesTokenizer
from subword_nmt.apply_bpe import BPE

from conftest import REPO, run_cli
from fairseq_fusion.errors import PREFIX

LINES = ["A man's dog & a cat are \"happy\" - well-fed.", " ".join(["word"] * 40), "Two dogs play in the snow."]


def expected_source(data, line):
    """Moses tokens as fusion-prepare-text writes them (no escaping, aggressive dash splits), then the folder's BPE."""
    tokens = MosesTokenizer(lang="en").tokenize(line, escape=False, aggressive_dash_splits=True, return_str=True)
    with open(os.path.join(data, "bpe.codes"), encoding="utf-8") as f:
        return BPE(f).process_line(tokens)


def detokenized(bpe_tokens):
    return MosesDetokenizer(lang="de").detokenize(bpe_tokens.replace("@@ ", "").split())


def interactive(data, checkpoint, tmp_path, *extra):
    src = tmp_path / "input.en"
    src.write_text("\n".join(LINES) + "\n")
    return run_cli(["fairseq-interactive", data, "--user-dir", os.path.join(REPO, "fairseq_fusion"), "--path", checkpoint,
                    "--cpu", "--beam", "2", "--max-len-b", "6", "--bpe", "prepared", "--input", str(src),
                    "--max-source-positions", "32", *extra], check=False)


def fields(stdout, kind):
    return {int(line.split("\t")[0][2:]): line.split("\t")[-1] for line in stdout.splitlines() if line.startswith(kind + "-")}


def test_interactive_translates_raw_text_and_skips_an_over_long_line_on_request(multi30k_slice, tiny_checkpoint, tmp_path):
    proc = interactive(multi30k_slice, tiny_checkpoint, tmp_path, "--skip-invalid-size-inputs-valid-test")
    assert proc.returncode == 0, proc.stderr[-3000:]
    sources, hyps, detoks = fields(proc.stdout, "S"), fields(proc.stdout, "H"), fields(proc.stdout, "D")
    assert sorted(sources) == [0, 2], proc.stdout  # the 40-word line (over 32 positions) skipped, the rest translated
    assert "1 samples have invalid sizes and will be skipped" in proc.stderr
    for i in (0, 2):
        assert sources[i] == expected_source(multi30k_slice, LINES[i])
        assert detoks[i] == detokenized(hyps[i])


def test_interactive_refuses_an_over_long_line_in_one_line(multi30k_slice, tiny_checkpoint, tmp_path):
    proc = interactive(multi30k_slice, tiny_checkpoint, tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(PREFIX) and "max_positions=(32" in last and "--skip-invalid-size-inputs-valid-test" in last


def test_hub_translates_raw_text(multi30k_slice, tiny_checkpoint):
    from fairseq_fusion.models import FusionTransformerModel

    folder, name = os.path.split(tiny_checkpoint)
    mt = FusionTransformerModel.from_pretrained(folder, checkpoint_file=name, data_name_or_path=multi30k_slice,
                                                bpe="prepared")
    line = LINES[0]
    assert mt.apply_bpe(mt.tokenize(line)) == expected_source(multi30k_slice, line)
    best = mt.generate(mt.encode(line), beam=2, max_len_b=6)[0]
    hyp_bpe = mt.string(best["tokens"])
    assert mt.translate(line, beam=2, max_len_b=6) == detokenized(hyp_bpe)

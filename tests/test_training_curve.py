"""fusion-training-curve: --labels names the curves (one per log, as the other multi-checkpoint commands); a count
mismatch, labels given twice or two curves with one name are refused in one line; the plot's title names the logs."""
import json

import pytest

from figure_checks import assert_readable

LINE = "2026-01-01 | INFO | valid | epoch 001 | valid on 'valid' subset | loss {loss} | ppl 9.5 | bleu {bleu} | num_updates {n}\n"


def write_log(folder, bleus):
    folder.mkdir(parents=True)
    path = folder / "train.log"
    path.write_text("".join(LINE.format(loss=5 - i, bleu=b, n=100 * (i + 1)) for i, b in enumerate(bleus)))
    return str(path)


def run(argv):
    from fairseq_fusion_tools.cli import training_curve as training_curve_cli
    from fairseq_fusion_tools.scoring import training_curve

    return training_curve.main(training_curve_cli.get_parser().parse_args(argv))


def test_labels_name_the_curves(tmp_path, monkeypatch):
    from fairseq_fusion_tools import outputs

    a = write_log(tmp_path / "run" / "a" / "checkpoints", [10.0, 12.5])
    b = write_log(tmp_path / "run" / "b" / "checkpoints", [11.0, 13.0, 14.0])
    titles, save = [], outputs.write_outputs

    def check_then_write(out, data, fig=None):  # the figure as the command saves it
        assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["hier", "vanilla"]
        assert_readable(fig, a, b)
        titles.append(fig._suptitle.get_text())
        return save(out, data, fig)

    monkeypatch.setattr(outputs, "write_outputs", check_then_write)
    out = str(tmp_path / "curve")
    result = run([a, b, "--labels", "hier,vanilla", "--out", out])
    saved = json.load(open(out + ".json"))
    assert list(saved["curves"]) == ["hier", "vanilla"] and saved["logs"] == {"hier": a, "vanilla": b}
    assert [p["bleu"] for p in saved["curves"]["vanilla"]] == [11.0, 13.0, 14.0]  # each label on its own log's points
    assert result["curves"]["hier"][1] == {"num_updates": 200, "bleu": 12.5, "loss": 4.0, "nll_loss": None, "ppl": 9.5}
    assert len(titles) == 1


def test_default_labels_and_log_equals_label(tmp_path):
    a = write_log(tmp_path / "a", [10.0])
    b = write_log(tmp_path / "b", [11.0])
    assert list(run([a, f"{b}=mine", "--out", str(tmp_path / "o")])["curves"]) == ["a", "mine"]


@pytest.mark.parametrize("labels, message", [
    ("one", "--labels has 1 names but 2 logs are given"),
    ("a,b,c", "--labels has 3 names but 2 logs are given"),
])
def test_label_count_mismatch_is_one_line(tmp_path, labels, message):
    a = write_log(tmp_path / "a", [10.0])
    b = write_log(tmp_path / "b", [11.0])
    with pytest.raises(SystemExit) as e:
        run([a, b, "--labels", labels, "--out", str(tmp_path / "o")])
    assert str(e.value) == "fairseq-fusion: error: " + message
    assert not (tmp_path / "o.json").exists()


def test_labels_given_twice_or_repeated_are_refused(tmp_path):
    a = write_log(tmp_path / "x" / "checkpoints", [10.0])
    b = write_log(tmp_path / "y" / "checkpoints", [11.0])
    with pytest.raises(SystemExit, match="either as LOG=LABEL or with --labels, not both"):
        run([f"{a}=p", b, "--labels", "p,q", "--out", str(tmp_path / "o")])
    # both logs are in a folder named 'checkpoints': before, the second curve silently replaced the first
    with pytest.raises(SystemExit, match="two logs would have the same label 'checkpoints'"):
        run([a, b, "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o.json").exists()

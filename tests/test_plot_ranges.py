"""The analysis figures' y axes: panels whose values compare share one range, and an axis matplotlib zoomed to a
span under 0.05 says so in its label (a wiggle of 0.002 drawn over the whole height reads as structure); checkpoints
are named with the update count they were saved at, not only their file name (``fairseq_fusion_tools/outputs.py``:
``share_range``, ``mark_narrow_range``; ``analysis/common.py``: ``with_updates``).

Each plotting function gets results of its command's shape whose values differ by about 0.002 (narrow) or by units
(wide): a narrow axis is marked, a wide one is left as it was.
"""
import pytest
import torch

from fairseq_fusion_tools.outputs import NARROW

MARK = "axis spans only"
CKPT = "checkpoints/transformer_lexical_shortcuts/checkpoint_last.pt"


@pytest.fixture(autouse=True)
def close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def data_axes(fig):
    return [ax for ax in fig.axes if ax.axison and (ax.lines or ax.patches)]


def marked(ax):
    return MARK in ax.get_ylabel()


def assert_marked_or_wide(fig):
    for ax in data_axes(fig):
        lo, hi = ax.get_ylim()
        assert hi - lo >= NARROW or marked(ax), (ax.get_title(), ax.get_ylabel(), (lo, hi))


def near(base, n, step=0.001):
    return [base + step * (i % 3) for i in range(n)]


def test_layer_masking_panels_share_one_range_and_a_narrow_one_is_marked():
    from fairseq_fusion_tools.analysis import layer_masking

    baseline = {"score": 30.0, "length": 12.0}
    narrow = [{"masked_layer": n, "score_change": 0.001 * n, "length_change": -0.002 * n} for n in range(3)]
    fig = layer_masking.plot(narrow, baseline, "bleu", "t")
    a, b = data_axes(fig)
    assert a.get_ylim() == b.get_ylim() and marked(a) and marked(b)
    wide = [{"masked_layer": n, "score_change": -10.0 * n, "length_change": 0.001 * n} for n in range(3)]
    a, b = data_axes(layer_masking.plot(wide, baseline, "bleu", "t"))
    assert a.get_ylim() == b.get_ylim() and not marked(a) and not marked(b)  # (b) drawn on (a)'s scale


def test_lexical_probe_accuracies_share_one_range():
    from fairseq_fusion_tools.analysis import lexical_probe

    def side(acc, bins=0.5, pos=0.9):
        return {"accuracy": acc, "accuracy_by_frequency_bin": [near(bins, 4) for _ in acc],
                "positions_per_pos": {"NOUN": 10}, "accuracy_by_pos": {"NOUN": near(pos, len(acc))}}

    fig = lexical_probe.plot({"encoder": side(near(0.95, 3)), "decoder": side([0.2, 0.5, 0.9])})
    limits = {ax.get_ylim() for ax in data_axes(fig)}
    assert len(limits) == 1 and len(data_axes(fig)) == 5, limits
    assert_marked_or_wide(fig)
    fig = lexical_probe.plot({"encoder": side(near(0.95, 3), 0.95, 0.95)})  # every accuracy within 0.002
    assert len(data_axes(fig)) == 3 and all(marked(ax) for ax in data_axes(fig))


@pytest.mark.parametrize("wide", [False, True])
def test_single_panel_plots_mark_a_narrow_axis(wide):
    from fairseq_fusion_tools.analysis import embedding_expressivity, lexical_similarity
    from fairseq_fusion_tools.compare import figure
    from fairseq_fusion_tools.scoring import evaluation, training_curve

    spread = 5.0 if wide else 0.001

    def series(base, n):
        return near(base, n, spread)

    figs = {
        "similarity": lexical_similarity.plot({"encoder": {r: series(0.3, 4) for r in lexical_similarity.REFERENCES}}),
        "expressivity": embedding_expressivity.plot(
            [{"path": CKPT, "label": "a", "curves": {"all": series(-1.0, 5)}}], "encoder"),
        "bleu by length": evaluation.plot_bleu_by_length(
            {"buckets": ["(0,15]", ">15"], "sentences": [3, 4], "bleu": {"sys": series(30.0, 2)}}),
        "training curve": training_curve.plot(
            {"run": [{"num_updates": u, "bleu": b, "loss": b, "nll_loss": b, "ppl": b}
                     for u, b in zip((100, 200, 300), series(20.0, 3))]}),
        "compare deltas": figure.results_figure(
            [{"system": "s", "subsets": {"test": {"sacrebleu_mean_sd": [30.0, 1.0], "sacrebleu": [29.0, 31.0],
                                                 "deltas": series(0.01, 2), "p_values": [0.5, 0.5]}}}], ["test"], "t"),
    }
    for name, fig in figs.items():
        assert_marked_or_wide(fig)
        axes = data_axes(fig)[-1:] if name == "compare deltas" else data_axes(fig)
        assert all(marked(ax) != wide for ax in axes), (name, [ax.get_ylabel() for ax in axes])


def test_layer_attention_map_colours_span_the_weights_range(tmp_path):
    """Weights within 0.01 of each other are not drawn from the darkest to the brightest colour; the title says how
    far the checkpoint was trained."""
    from fairseq_fusion_tools.analysis import layer_attention_map

    path = tmp_path / "checkpoint_last.pt"
    torch.save({"optimizer_history": [{"num_updates": 1200}], "model": {}}, path)
    matrix = torch.full((2, 3), 1 / 3) + torch.tensor([[0.001, 0.0, -0.001], [0.0, 0.002, -0.002]])
    fig = layer_attention_map.plot(matrix, str(path))
    assert fig.axes[0].images[0].get_clim() == (0, 1)
    assert "(1200 updates)" in " ".join(fig._suptitle.get_text().split())  # the title wraps at the figure's width


def test_checkpoint_labels_name_the_update_count(tmp_path):
    from fairseq_fusion_tools.analysis.common import checkpoint_labels

    paths = []
    for name, updates in (("checkpoint1.pt", 300), ("checkpoint_last.pt", 900)):
        paths.append(str(tmp_path / name))
        torch.save({"optimizer_history": [{"num_updates": updates}], "model": {}}, paths[-1])
    assert checkpoint_labels(paths, None, "prog") == [f"{paths[0]} (300 updates)", f"{paths[1]} (900 updates)"]
    assert checkpoint_labels(paths, "first,last", "prog") == ["first (300 updates)", "last (900 updates)"]


def test_alignment_and_probe_panels_mark_a_narrow_axis_and_the_probes_modules_share_one():
    """fusion-alignment-analysis's AER panel (the coverage is drawn on [0, 1]) and fusion-information-probe's recovery
    PPL panels: a side's modules compare, so they share one range; with every PPL within 0.002 it is marked."""
    from fairseq_fusion_tools.analysis import alignment_stream, information_probe

    def layers(aer):
        return [{"layer": i + 1, "aer": a, "cumulative_coverage": 0.2 * (i + 1)} for i, a in enumerate(aer)]

    fig = alignment_stream.plot([{"label": "a", "layers": layers(near(0.4, 3))}])
    aer, coverage = data_axes(fig)
    assert marked(aer) and not marked(coverage) and coverage.get_ylim() == (0, 1.05)
    assert not marked(data_axes(alignment_stream.plot([{"label": "a", "layers": layers([0.2, 0.4, 0.6])}]))[0])

    def entry(tem, sem):
        return {"label": "a", "ppl": {"source": {"TEM": tem, "SEM": sem}}, "baseline_ppl": {"source": 30.0}}

    fig = information_probe.plot([entry([2.0, 3.0, 4.0], [10.0, 20.0, 25.0])])
    tem, sem = data_axes(fig)
    assert tem.get_ylim() == sem.get_ylim() and sem.get_ylim()[1] >= 30.0  # the zero baseline in view on both
    narrow = {"label": "a", "ppl": {"source": {"TEM": near(5.0, 3), "SEM": near(5.0, 3)}}}
    assert all(marked(ax) for ax in data_axes(information_probe.plot([narrow])))


def test_bilingual_similarity_bars_mark_a_narrow_axis():
    from fairseq_fusion_tools.analysis import embedding_similarity_bilingual

    def bars(values):
        return [{"path": CKPT, "label": f"m{i}", "all": v, "non_shared": v} for i, v in enumerate(values)]

    assert marked(data_axes(embedding_similarity_bilingual.plot(bars([0.001, 0.002])))[0])
    assert not marked(data_axes(embedding_similarity_bilingual.plot(bars([0.2, 0.6])))[0])

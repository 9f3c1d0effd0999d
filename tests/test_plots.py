"""Every figure the fusion-* commands save (PNG): a title naming the checkpoints or inputs, no overlapping texts;
overlaid checkpoints told apart, whole-number layer axes, n/a cells apart from 0, the baseline of a change stated.

Each plotting function is called with small synthetic results of the shape its command computes (paper sizes:
6 layers, 10 frequency bins, a suite's many categories); `figure_checks.assert_readable` renders the figure, the other
checks read the figure's artists back.
"""
import os

import numpy as np
import pytest
import torch

from figure_checks import (assert_distinct_lines, assert_integer_ticks, assert_readable, layer_axes,
                           overlapping_texts, rendered_colour)

CKPT = "checkpoints/transformer_lexical_shortcuts/checkpoint_best.pt"
CKPT2 = "checkpoints/transformer/checkpoint_best.pt"
rng = np.random.default_rng(1)


def values(n, low=0.0, high=1.0):
    return [float(v) for v in rng.uniform(low, high, n)]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_overlap_check_finds_overlapping_titles():
    """The helper itself: two panel titles too long for their panels collide; the same figure with short ones does not."""
    from fairseq_fusion_tools.outputs import new_figure

    fig, axes = new_figure(1, 2, figsize=(4, 2), layout=None)
    for ax in axes:
        ax.set_title("a rather long panel title that cannot fit")
    assert overlapping_texts(fig)
    for ax in axes:
        ax.set_title("short")
    assert not overlapping_texts(fig)


def test_alignment_plot():
    from fairseq_fusion_tools.analysis import alignment_stream

    entries = [{"label": label, "layers": [{"layer": i, "aer": a, "cumulative_coverage": c}
                                           for i, a, c in zip(range(1, 7), values(6), values(6))]}
               for label in ("lexical shortcuts", "transformer")]
    assert_readable(alignment_stream.plot(entries, f"Encoder attention of {CKPT}, {CKPT2} on test.de-en (508 sentences)"),
                    CKPT, CKPT2)


def test_information_probe_plot():
    from fairseq_fusion_tools.analysis import information_probe

    entries = [{"label": label, "ppl": {side: {m: values(6, 1, 300) for m in information_probe.PANELS}
                                        for side in ("source", "target")},
                "baseline_ppl": {"source": 400.0, "target": 350.0}} for label in ("sf", "vanilla")]
    assert_readable(information_probe.plot(entries, f"Recovery PPL of {CKPT}, {CKPT2} on test"), CKPT, CKPT2)


def test_lexical_probe_plot():
    from fairseq_fusion_tools.analysis import lexical_probe

    cats = ("NOUN", "VERB", "ADJ-ADV", "OTHER")
    result = {side: {"accuracy": values(7), "accuracy_by_frequency_bin": [values(10) for _ in range(7)],
                     "positions_per_pos": {c: 1000 for c in cats}, "accuracy_by_pos": {c: values(7) for c in cats}}
              for side in ("encoder", "decoder")}
    assert_readable(lexical_probe.plot(result, f"of {CKPT} (transformer_lexical_shortcuts, test)"), CKPT)


def gate_statistics(layers=6, sides=("encoder", "decoder")):
    """fusion-shortcut-gates' statistics of one checkpoint: both gates of every attention with shortcuts."""
    from fairseq_fusion_tools.analysis import lexical_gates

    attentions = {"encoder": ("self_attn",), "decoder": ("self_attn", "encoder_attn")}
    return {f"{stack}.layers.{layer}.{attn}.{gate}": {
        "mean": 0.4, "std": 0.1, "histogram": values(lexical_gates.HIST_BINS), "by_frequency_bin": {"mean": values(10)}}
        for stack in sides for attn in attentions[stack] for layer in range(layers) for gate in ("k_gate", "v_gate")}


def test_lexical_gates_plot():
    from fairseq_fusion_tools.analysis import lexical_gates

    fig = lexical_gates.plot({"checkpoint1": gate_statistics(), "checkpoint_best": gate_statistics()}, f"of {CKPT}, {CKPT2} (test)")
    assert_readable(fig, CKPT, CKPT2)
    assert {ax.get_ylim() for ax in fig.axes[0::3] + fig.axes[1::3]} == {(0, 1)}  # means near 0.5 stay near 0.5


def test_gate_legend_names_the_update_count(tmp_path):
    from fairseq_fusion_tools.analysis.common import with_updates

    path = tmp_path / "checkpoint_last.pt"
    torch.save({"optimizer_history": [{"num_updates": 50}, {"num_updates": 1200}], "model": {}}, path)
    assert with_updates("checkpoint_last", str(path)) == "checkpoint_last (1200 updates)"
    torch.save({"model": {}}, path)
    assert with_updates("checkpoint_last", str(path)) == "checkpoint_last"


@pytest.mark.parametrize("n_checkpoints", [2, 5])
def test_lexical_gates_checkpoints_apart(n_checkpoints):
    """The user's report: checkpoints overlaid in solid lines of repeated colours. Each checkpoint's legend entry has
    its own colour and line style, and its lines in every panel are drawn so; one row per gate (6 with both sides)."""
    from fairseq_fusion_tools.analysis import lexical_gates

    labels = [f"checkpoint{i}" for i in range(1, n_checkpoints)] + ["checkpoint_last"]
    fig = lexical_gates.plot({label: gate_statistics() for label in labels}, f"of {CKPT}")
    assert_distinct_lines(fig, labels)
    assert len(fig.axes) == 6 * 3
    assert_readable(fig, CKPT)


def test_lexical_gates_encoder_only_model():
    """A model with shortcuts on one side (transformer_lexical_shortcuts_ff_encoder_only): its two gates, two rows."""
    from fairseq_fusion_tools.analysis import lexical_gates

    fig = lexical_gates.plot({"checkpoint_last": gate_statistics(sides=("encoder",))}, f"of {CKPT}")
    assert len(fig.axes) == 2 * 3
    assert [ax.get_ylabel().split("\n")[0] for ax in fig.axes[::3]] == ["encoder self-attention"] * 2
    assert_readable(fig, CKPT)


def layer_plots(layers):
    """Every figure with a layer axis, drawn for a model of ``layers`` layers."""
    from fairseq_fusion_tools.analysis import alignment_stream, information_probe, lexical_gates, lexical_probe, lexical_similarity
    from fairseq_fusion_tools.analysis import layer_attention_map

    cats = ("NOUN", "VERB")
    probe = {side: {"accuracy": values(layers + 1), "accuracy_by_frequency_bin": [values(10) for _ in range(layers + 1)],
                    "positions_per_pos": {c: 10 for c in cats}, "accuracy_by_pos": {c: values(layers + 1) for c in cats}}
             for side in ("encoder", "decoder")}
    return {
        "shortcut gates": lexical_gates.plot({"checkpoint1": gate_statistics(layers)}),
        "alignment": alignment_stream.plot([{"label": "a", "layers": [
            {"layer": i, "aer": 0.5, "cumulative_coverage": 0.5} for i in range(1, layers + 1)]}]),
        "information probe": information_probe.plot([{"label": "a", "ppl": {"source": {m: values(layers, 1, 9) for m in
                                                                                      information_probe.PANELS}}}]),
        "lexical probe": lexical_probe.plot(probe, "of x"),
        "embedding similarity": lexical_similarity.plot(
            {side: {ref: values(layers + 1) for ref in lexical_similarity.REFERENCES} for side in ("encoder", "decoder")}, "of x"),
        "layer attention map": layer_attention_map.plot(torch.full((layers, layers + 1), 1 / (layers + 1)), CKPT),
    }


@pytest.mark.parametrize("layers", [2, 3, 6])
def test_layer_axes_have_whole_number_ticks(layers):
    """The user's report: the gates' layer axis had ticks 1.25, 1.5 (2 layers). Every figure with a layer axis, every
    panel of it, ticks at whole layers only; the gates' frequency bins too."""
    from fairseq_fusion_tools.analysis import lexical_gates

    for name, fig in layer_plots(layers).items():
        axes = layer_axes(fig)
        assert axes, f"{name}: no axis labelled with layers"
        fig.canvas.draw()
        for ax in axes:
            assert_integer_ticks(ax, name=name, draw=False)
    gates = lexical_gates.plot({"checkpoint1": gate_statistics(layers)})
    gates.canvas.draw()
    for ax in gates.axes[1::3]:
        assert_integer_ticks(ax, draw=False)


def test_embedding_similarity_plot():
    from fairseq_fusion_tools.analysis import lexical_similarity

    result = {side: {ref: values(6) for ref in lexical_similarity.REFERENCES} for side in ("encoder", "decoder")}
    assert_readable(lexical_similarity.plot(result, f"of {CKPT} (transformer_lexical_shortcuts, test)"), CKPT)


def test_exploitation_plot():
    from fairseq_fusion_tools.analysis import exploitation
    from fairseq_fusion_tools.outputs import new_figure

    nodes = [f"Ĥ^{l}" for l in range(2, 7)]
    result = {f"{side}: iterative aggregation": {
        "nodes": nodes, "inputs": ["H^l", "Ĥ^{l-1}"],
        "scores": {n: dict(zip(["H^l", "Ĥ^{l-1}"], values(2))) for n in nodes}} for side in ("encoder", "decoder")}
    assert_readable(exploitation.plot(result, new_figure, f"of {CKPT}"), CKPT)


def test_exploitation_na_cells_apart_from_zero():
    """The user's report: an input a node does not read (n/a) was drawn white, the colour of 0.0. Hierarchical
    aggregation: node Ĥ^2 reads H^1, H^2 (score 0.0 for H^1) but not H^3. The n/a cell is labelled n/a, hatched, and
    its rendered colour is far from that of the 0.0 cell (and from 1.0's)."""
    from fairseq_fusion_tools.analysis import exploitation
    from fairseq_fusion_tools.outputs import new_figure

    nodes = ["Ĥ^2", "Ĥ^3"]
    result = {"encoder: hierarchical aggregation": {"nodes": nodes, "inputs": ["H^1", "H^2", "H^3"], "scores": {
        "Ĥ^2": {"H^1": 0.0, "H^2": 1.0}, "Ĥ^3": {"H^1": 0.2, "H^2": 0.3, "H^3": 0.5}}}}
    fig = exploitation.plot(result, new_figure, f"of {CKPT}")
    ax = fig.axes[0]
    rows = {"H^3": 0, "H^2": 1, "H^1": 2}  # highest input on top (row 0)
    texts = {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_text() for t in ax.texts}
    assert texts[(0, rows["H^3"])] == "n/a" and texts[(0, rows["H^1"])] == "0.000" and texts[(0, rows["H^2"])] == "1.000"
    assert [p.get_hatch() for p in ax.patches if p.get_gid() == "n/a"] == ["//"]

    def corner(row):  # a corner of cell (Ĥ^2, row), away from its text
        return rendered_colour(ax, -0.45, row - 0.45, -0.3, row - 0.3)

    na, zero, one = corner(rows["H^3"]), corner(rows["H^1"]), corner(rows["H^2"])
    assert np.abs(na - zero).max() > 0.1 and np.abs(na - one).max() > 0.1, (na, zero, one)
    assert_readable(fig, CKPT)


def test_contrastive_score_plot():
    from fairseq_fusion_tools.analysis import contrastive_protocols as protocols

    def table(names):
        return {n: {"accuracy": a, "total": 100} for n, a in zip(names, values(len(names)))}

    results = {"lingeval97": {"by_category": table(["np_agreement", "subj_verb_agreement", "subj_adequacy",
                                                     "polarity_particle_nicht_del", "polarity_affix_del", "auxiliary",
                                                     "verb_particle", "compound", "transliteration"]),
                              "by_distance": table(protocols.DISTANCE_BINS)},
               "contrawsd": {"by_category": table([f"word{i}:sense{j}" for i in range(12) for j in (1, 2)])}}
    assert_readable(protocols.plot(results, f"of {CKPT}"), CKPT)


@pytest.mark.parametrize("suite", ["MuCoW", "ContraWSD WMT18"])
def test_contrastive_translate_plot(suite):
    from fairseq_fusion_tools.analysis import contrastive_check

    words = [f"ambiguous{i}" for i in range(150)]
    if suite == "MuCoW":
        result = {"suite": suite, "pair": "en-de",
                  "by_word": {w: {"precision": p, "recallA": r} for w, p, r in zip(words, values(150), values(150))},
                  "by_domain": {d: {"precision": 0.5, "recallA": 0.4} for d in ("in", "out")}}
    else:
        result = {"suite": suite, "pair": "de-en", "by_word": {w: {"accuracy": a} for w, a in zip(words, values(150))},
                  "by_frequency": {b: {"accuracy": 0.5} for b in (">10k", ">5k", ">2k", ">1k", ">500", ">200", ">100",
                                                                   ">50", ">20", "0-20")}}
    assert_readable(contrastive_check.plot(result, f"translations of {CKPT}"), CKPT, suite)


def test_bleu_by_length_plot():
    from fairseq_fusion_tools.scoring import evaluation

    result = {"buckets": ["(0,15]", "(15,30]", "(30,45]", ">45"], "sentences": [1200, 1300, 400, 100],
              "bleu": {"transformer": values(4, 20, 30), "lexical shortcuts": values(4, 20, 30)}}
    assert_readable(evaluation.plot_bleu_by_length(result, "BLEU by source length against newstest2014.de"),
                    "newstest2014.de")


def test_training_curve_plot():
    from fairseq_fusion_tools.scoring import training_curve

    curves = {label: [{"num_updates": u, "bleu": b, "loss": 5.0, "nll_loss": 4.0, "ppl": 16.0}
                      for u, b in zip(range(1000, 11000, 1000), values(10, 10, 30))] for label in ("hier", "vanilla")}
    logs = "work/checkpoints/hier/train.log, work/checkpoints/vanilla/train.log"
    assert_readable(training_curve.plot(curves, f"Validation (valid) of {logs}"), logs)


def test_compare_plot():
    from fairseq_fusion_tools.compare import figure

    rows = [{"system": name, "subsets": {s: {"sacrebleu_mean_sd": [30.0, 0.5], "sacrebleu": values(2, 29, 31),
                                             "deltas": None if name == "transformer" else values(2, -2, 2),
                                             "p_values": None if name == "transformer" else [0.01, 0.3]}
                                         for s in ("test", "test1")}}
            for name in ("transformer", "fusion_transformer", "transformer_lexical_shortcuts_ff",
                         "transformer_hierarchical_aggregation", "shortcuts+simplified+surface")]
    assert_readable(figure.results_figure(rows, ["test", "test1"], "multi30k: 400 updates, 2 seeds, size small, beam 5"),
                    "multi30k")


def test_embedding_expressivity_plot():
    from fairseq_fusion_tools.analysis import embedding_expressivity

    models = [{"path": p, "label": label, "curves": {"all": sorted(values(256, -6, 0), reverse=True),
                                                   "random half": sorted(values(128, -6, 0), reverse=True)}}
              for p, label in ((CKPT, "FGLA"), (CKPT2, "Vanilla"))]
    assert_readable(embedding_expressivity.plot(models, "encoder"), CKPT, CKPT2)


def test_embedding_similarity_bilingual_plot():
    from fairseq_fusion_tools.analysis import embedding_similarity_bilingual

    results = [{"path": p, "label": label, "all": 0.3, "non_shared": 0.2}
               for p, label in ((CKPT, "SurfaceFusion"), (CKPT2, "Vanilla"))]
    assert_readable(embedding_similarity_bilingual.plot(results), CKPT, CKPT2)


def test_layer_attention_map_plot():
    from fairseq_fusion_tools.analysis import layer_attention_map

    matrix = torch.softmax(torch.randn(6, 7, generator=torch.Generator().manual_seed(1)), -1)
    assert_readable(layer_attention_map.plot(matrix, CKPT), CKPT)


def test_layer_masking_plot():
    """The relative changes are drawn from the unmasked model: its score and length are stated (the user's report: the
    baseline BLEU was nowhere in the figure)."""
    from fairseq_fusion_tools.analysis import layer_masking

    results = [{"masked_layer": n, "score_change": s, "length_change": c}
               for n, s, c in zip(range(7), values(7, -50, 5), values(7, -20, 20))]
    baseline = {"score": 34.517, "length": 12.25, "sentences": 1000}
    fig = layer_masking.plot(results, baseline, "bleu", f"Masking encoder layers of {CKPT} (test)")
    assert_readable(fig, CKPT)
    titles = [ax.get_title() for ax in fig.axes]
    assert "unmasked 34.52" in titles[0] and "unmasked 12.25 words" in titles[1], titles


def test_saved_png_is_the_checked_figure(tmp_path):
    """write_outputs saves the figure as built (constrained layout, title kept): the PNG is not blank or cut."""
    from fairseq_fusion_tools import outputs
    from fairseq_fusion_tools.analysis import lexical_similarity

    result = {side: {ref: values(6) for ref in lexical_similarity.REFERENCES} for side in ("encoder", "decoder")}
    outputs.write_outputs(str(tmp_path / "sim"), {"x": 1}, lexical_similarity.plot(result, f"of {CKPT}"))
    import matplotlib.image

    image = matplotlib.image.imread(os.path.join(tmp_path, "sim.png"))
    assert image.shape[0] > 300 and image.shape[1] > 500 and image[..., :3].std() > 0.05

"""``--fusion-log-internals``: what each technique does inside the network, as fairseq metrics under ``fusion/``
(``fairseq_fusion/modules/internals.py``; across ranks: test_internals_ranks.py).

The flag changes no loss, gradient or parameter and adds no host sync on the CUDA path; each figure is recomputed
here from what the model computes (forward hooks, the model's own output distributions); a short fairseq-train run
writes them to its JSON log and TensorBoard event files, where they move over training.
"""
import glob
import json
import os
import re
import struct

import pytest
import torch
import torch.nn.functional as F
from fairseq.logging import metrics

from fairseq_fusion.modules import internals
from conftest import run_cli, tiny_train_args
from test_training_curve import run as curve
from test_contracts import build, training_sample
from test_host_syncs import SyncCounter, cuda_paths

FLAG = "--fusion-log-internals"
L = 3  # layers per stack in test_contracts' SMALL
# arch -> {pattern of a figure's name under fusion/: how many figures match it}
PROMISED = {
    "transformer_lexical_shortcuts_ff_enc_dec_self": {r"shortcuts/(enc|dec)\d_(key|value)_gate": 4 * L,
                                                      r"shortcuts/encdec\d_(key|value)_gate": 2 * L},
    "transformer_fine_grained_layer_attention": {r"layer_attention/dec\d_entropy": L,
                                                 r"layer_attention/dec\d_on_embed": L},
    "transformer_surface_fusion": {r"surface_fusion/kl_fused_decoder": 1},
    "transformer_phrase": {r"phrases/(enc|dec)\d_entropy": 2 * L, r"layer_attention/dec\d_(entropy|on_embed)": 2 * L},
    "transformer_linear_combination": {r"layer_aggregation/(encoder|decoder)_on_H\d": 2 * (L + 1)},
    "transformer_hierarchical_aggregation": {r"layer_aggregation/(encoder|decoder)_agg\d_x\d": 2 * (2 + 2)},
    "transformer_multilayer_attention": {r"multilayer_attention/(enc|dec)2_x\d": 2 * 2},
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    from conftest import write_dicts

    return write_dicts(tmp_path_factory.mktemp("internals_dicts"), 40)


def training_step(model, task, args):
    """(sync ops, loss, gradients, figures logged) of one training step on the CUDA paths, dropout on: the task's
    step, then what fairseq's trainer does with one rank's figures (taken from the model, their means logged)."""
    criterion = task.build_criterion(args)
    model.train()
    model.zero_grad()
    torch.manual_seed(5)
    with pytest.MonkeyPatch.context() as mp, metrics.aggregate() as agg, SyncCounter() as counter:
        cuda_paths(mp)
        loss, _, logging_output = task.train_step(training_sample(task), model, criterion, Backward(), 0)
        internals.log_means([{**logging_output, **internals.take(model)}])
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    logged = {k[len("fusion/"):]: float(agg[k].avg) for k in agg.keys() if k.startswith("fusion/")}
    return len(counter.segments[0]), loss.detach(), grads, logged


class Backward:
    def backward(self, loss):
        loss.backward()


@pytest.mark.parametrize("arch", list(PROMISED))
def test_flag_changes_no_loss_gradient_or_parameter_adds_no_sync_and_logs_its_figures(arch, data_dir):
    plain, task, args = build(arch, data_dir)
    logging, task_on, args_on = build(arch, data_dir, extra=[FLAG])
    state, state_on = plain.state_dict(), logging.state_dict()
    assert list(state) == list(state_on) and all(torch.equal(state[k], state_on[k]) for k in state)
    assert [n for n, _ in plain.named_buffers()] == [n for n, _ in logging.named_buffers()]
    plain.load_state_dict(state_on, strict=True)
    logging.load_state_dict(state, strict=True)

    syncs, loss, grads, logged = training_step(plain, task, args)
    syncs_on, loss_on, grads_on, logged_on = training_step(logging, task_on, args_on)
    assert syncs_on == syncs, f"host syncs per training step: {syncs_on} with {FLAG}, {syncs} without"
    assert torch.equal(loss_on, loss)
    assert list(grads_on) == list(grads) and all(torch.equal(grads[k], grads_on[k]) for k in grads)
    assert logged == {}
    for pattern, count in PROMISED[arch].items():
        found = [name for name in logged_on if re.fullmatch(pattern, name)]
        assert len(found) == count, (pattern, sorted(logged_on))
    assert all(torch.isfinite(torch.tensor(v)) for v in logged_on.values()), logged_on


def forward_logged(model, sample):
    """The model's output and the figures of that forward, as fairseq's trainer would log them for one rank."""
    net_output = model(**sample["net_input"])
    with metrics.aggregate() as agg:
        internals.log_means([internals.take(model)])
    return net_output, {k[len("fusion/"):]: float(agg[k].avg) for k in agg.keys()}


def test_shortcut_gates_are_the_mean_gates_over_tokens(data_dir):
    """r^K, r^V (the gates' outputs, read by forward hooks) averaged over each attention's unpadded keys."""
    model, task, _ = build("transformer_lexical_shortcuts_ff_enc_dec_self", data_dir, extra=[FLAG])
    model.eval()
    sample = training_sample(task)
    pad = task.source_dictionary.pad()
    keep = {"enc": sample["net_input"]["src_tokens"].ne(pad), "encdec": sample["net_input"]["src_tokens"].ne(pad),
            "dec": sample["net_input"]["prev_output_tokens"].ne(pad)}
    gates, hooks = {}, []
    for side, stack in (("enc", model.encoder), ("dec", model.decoder)):
        for layer in stack.layers:
            for attn, tag in ((layer.self_attn, side), (getattr(layer, "encoder_attn", None), "encdec")):
                if side == "enc" and tag == "encdec" or not hasattr(attn, "k_gate"):
                    continue
                for which in ("key", "value"):
                    name = f"shortcuts/{tag}{layer.layer_idx}_{which}_gate"
                    hooks.append(getattr(attn, f"{which[0]}_gate").register_forward_hook(
                        lambda _m, _i, out, name=name, tag=tag: gates.__setitem__(name, (out, keep[tag]))))
    with torch.no_grad():
        _, logged = forward_logged(model, sample)
    for h in hooks:
        h.remove()
    assert len(gates) == 4 * L + 2 * L
    for name, (r, tokens) in gates.items():  # r: T x B x C, tokens: B x T
        expected = r.mean(-1).t()[tokens].mean()
        assert logged[name] == pytest.approx(float(expected), abs=1e-5), name


def test_layer_attention_figures_are_the_learned_weights_entropy_and_embedding_share(data_dir):
    model, task, _ = build("transformer_fine_grained_layer_attention", data_dir, extra=[FLAG])
    model.train()  # DropConnect on in the forward; the figures are of the learned weights
    with torch.no_grad():
        _, logged = forward_logged(model, training_sample(task))
    w = torch.softmax(model.decoder.encoder_reader.weight.detach(), dim=1)  # decoder layer x encoder layer x D
    for m in range(L):
        ent = -(w[m] * w[m].log()).sum(0).mean()
        assert logged[f"layer_attention/dec{m}_entropy"] == pytest.approx(float(ent), abs=1e-5)
        assert logged[f"layer_attention/dec{m}_on_embed"] == pytest.approx(float(w[m, 0].mean()), abs=1e-6)


def test_surface_fusion_kl_is_that_of_the_models_own_distributions(data_dir):
    """KL(fused || decoder) on the batch's first sentence, from the model's get_normalized_probs."""
    model, task, _ = build("transformer_surface_fusion", data_dir, extra=[FLAG])
    model.eval()
    sample = training_sample(task)
    with torch.no_grad():
        net_output, logged = forward_logged(model, sample)
        fused = F.log_softmax(model.get_normalized_probs(net_output, log_probs=True)[0].float(), dim=-1)
        own = F.log_softmax(net_output[0][0].float(), dim=-1)
    tokens = sample["net_input"]["prev_output_tokens"][0].ne(task.target_dictionary.pad())
    kl = (fused.exp() * (fused - own)).sum(-1)[tokens].mean()
    assert float(kl) > 0 and logged["surface_fusion/kl_fused_decoder"] == pytest.approx(float(kl), rel=1e-4)


def test_compiled_forward_records_the_figures_in_one_graph_and_says_it_compiles(data_dir, monkeypatch, caplog):
    """Under --fusion-compile the figures are written from inside the graph (no break) and logged after it; the
    compiled forward's output is the one without the flag; the first call says it compiles, and how long it took."""
    from fairseq_fusion import compile_training

    model, task, _ = build("transformer_lexical_shortcuts_ff", data_dir, extra=[FLAG])
    plain = build("transformer_lexical_shortcuts_ff", data_dir)[0]
    sample = training_sample(task)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model.eager_forward)(**sample["net_input"])
    assert explained.graph_break_count == 0 and explained.graph_count == 1
    assert len(model.fusion_internals) == 4 * L
    model.fusion_internals.clear()
    eager = forward_logged(model.eval(), sample)[1]
    monkeypatch.setattr(compile_training, "_COMPILED", {})  # this process's first compiled call
    outputs = []
    with caplog.at_level("INFO", logger=compile_training.__name__):
        for m in (plain, model):
            m.compile_backend = "eager"
            torch.manual_seed(3)
            out, logged = forward_logged(m.train(), sample)
            outputs.append(out[0])
    torch._dynamo.reset()
    assert sorted(logged) == sorted(eager) and not model.fusion_internals and not model.fusion_internals_totals
    assert torch.equal(outputs[0], outputs[1])
    said = [r.getMessage() for r in caplog.records if r.name == compile_training.__name__]
    assert len(said) == 2 and "compiling the training forward" in said[0], said
    assert re.search(r"compiled the training forward in [0-9.]+ s", said[1]), said


@pytest.fixture
def fresh_tensorboard_writers():
    """fairseq keeps its TensorBoard writers per tag for the process: an earlier in-process run's writers (another
    --tensorboard-logdir) would take this run's events. Closed (what a process's exit does) and forgotten."""
    from fairseq.logging import progress_bar

    def close():
        progress_bar._close_writers()
        progress_bar._tensorboard_writers.clear()

    close()
    yield close
    close()


def tensorboard_events(folder):
    """Every event of ``folder``'s event files, in order (TFRecord framing read here)."""
    from tensorboardX.proto import event_pb2

    for path in sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*"))):
        data = open(path, "rb").read()
        at = 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at:at + 8])
            yield event_pb2.Event.FromString(data[at + 12:at + 12 + length])
            at += 12 + length + 4


def tensorboard_scalars(folder):
    """{tag: [(step, value)]} of the scalar summaries in ``folder``'s event files."""
    found = {}
    for event in tensorboard_events(folder):
        for value in event.summary.value:
            found.setdefault(value.tag, []).append((event.step, value.simple_value))
    return found


def test_training_run_logs_figures_to_json_and_tensorboard(multi30k_slice, tmp_path, fresh_tensorboard_writers):
    """fairseq-train: every promised figure in each train_inner and valid line of the JSON log and in TensorBoard,
    moving over 4 updates; the trainer names no absent bias as a shared parameter."""
    board = str(tmp_path / "board")
    proc = run_cli(tiny_train_args(multi30k_slice, str(tmp_path / "save"), "transformer_lexical_shortcuts", FLAG,
                                   "--log-format", "json", "--tensorboard-logdir", board, max_update=4))
    fresh_tensorboard_writers()  # what the process's exit does (atexit): the event files written out
    names = [f"fusion/shortcuts/{side}0_{which}_gate" for side in ("enc", "dec") for which in ("key", "value")]
    records = [json.loads(line[line.index("{"):]) for line in proc.stdout.splitlines() if '{"epoch"' in line]
    inner = [r for r in records if "loss" in r]
    valid = [r for r in records if "valid_loss" in r]
    assert len(inner) == 4 and valid, proc.stdout[-2000:]
    for name in names:
        series = [float(r[name]) for r in inner]  # fairseq writes numbers as text
        assert all(0 < v < 1 for v in series) and len(set(series)) > 1, (name, series)
        assert 0 < float(valid[-1]["valid_" + name]) < 1
        board_series = tensorboard_scalars(os.path.join(board, "train_inner"))[name]
        assert [s for s, _ in board_series] == [1, 2, 3, 4]
        assert [v for _, v in board_series] == pytest.approx(series, abs=1e-4)
        assert name in tensorboard_scalars(os.path.join(board, "valid"))

    log = tmp_path / "train.log"  # what `fairseq-train ... | tee train.log` keeps
    log.write_text(proc.stdout)
    drawn = curve([f"{log}=run", "--internals", "--out", str(tmp_path / "curve")])["internals"]["run"]
    assert [p["num_updates"] for p in drawn["train"]] == [1, 2, 3, 4] and drawn["valid"]
    assert all(float(r[name]) == pytest.approx(p[name[len("fusion/"):]]) for r, p in zip(inner, drawn["train"]))
    assert os.path.getsize(tmp_path / "curve.internals.run.png") > 0


def test_internals_plot_keeps_gates_on_the_unit_range():
    from fairseq_fusion_tools.scoring import training_curve

    points = {"train": [{"num_updates": n, "shortcuts/enc0_key_gate": 0.5 + n / 1000,
                         "surface_fusion/kl_fused_decoder": 0.01 * n} for n in (1, 2, 3)], "valid": []}
    fig = training_curve.plot_internals(points, "run")
    limits = {ax.get_title().split(" ")[0]: ax.get_ylim() for ax in fig.axes}
    assert limits["shortcuts"] == (0, 1) and limits["surface_fusion"][0] == 0  # a 0.002 wiggle stays a wiggle


def test_training_log_names_no_absent_bias_as_shared(multi30k_slice, tmp_path):
    """fairseq's trainer filed every bias-free projection's absent bias (None) as one shared parameter; the tied
    embeddings are still reported."""
    proc = run_cli(tiny_train_args(multi30k_slice, str(tmp_path / "save"), "transformer_lexical_shortcuts",
                                   max_update=1))
    shared = [line for line in proc.stdout.splitlines() if "detected shared parameter" in line]
    assert shared and not [line for line in shared if ".bias" in line], shared
    assert all("embed_tokens.weight" in line or "output_projection.weight" in line for line in shared), shared


def test_a_program_driving_fairseqs_trainer_gets_the_figures(data_dir):
    """A user's own loop over fairseq's Trainer: the figures are in the metrics it aggregates, fairseq's own beside."""
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.trainer import Trainer

    model, task, args = build("transformer_fine_grained_layer_attention", data_dir,
                              extra=[FLAG, "--optimizer", "adam", "--lr", "1e-3", "--max-tokens", "1000"])
    cfg = convert_namespace_to_omegaconf(args)
    trainer = Trainer(cfg, task, model, task.build_criterion(cfg.criterion))
    with metrics.aggregate("my_run") as agg:
        for _ in range(2):
            per_update = trainer.train_step([training_sample(task)])
    values = agg.get_smoothed_values()
    assert "loss" in values and agg["fusion/layer_attention/dec0_entropy"].count == 2
    # not in fairseq's per-update aggregator, whose values it reads (.item()) at every update
    assert "loss" in per_update and not [k for k in per_update if k.startswith("fusion")]
    assert sum(k.startswith("fusion/layer_attention/") for k in values) == 2 * L


def test_ctrl_c_writes_out_what_tensorboard_was_given(multi30k_slice, tmp_path):
    """Ctrl-C ends a command-line run with os._exit (one line, status 130), which skips fairseq's exit hook that
    closes its TensorBoard writers: the last intervals' figures were lost in the writer's queue."""
    from test_interruptions import interrupted

    board = str(tmp_path / "board")
    args = tiny_train_args(multi30k_slice, str(tmp_path / "save"), "transformer_lexical_shortcuts", FLAG,
                           "--tensorboard-logdir", board, max_update=100000)
    proc = interrupted(args, r"train_inner \| .*num_updates=3,")
    assert proc.marker_seen and proc.returncode == 130, proc.stdout[-2000:]
    logged = [int(n) for n in re.findall(r"train_inner \| .*num_updates=(\d+),", proc.stdout)]
    steps = [s for s, _ in tensorboard_scalars(os.path.join(board, "train_inner"))["fusion/shortcuts/enc0_key_gate"]]
    assert steps == logged, (steps, logged)  # up to the last interval logged before Ctrl-C


def tensorboard_images(folder):
    """{tag: [(step, H x W array in [0, 1])]} of the image summaries in ``folder``'s event files."""
    import io

    import numpy as np
    from PIL import Image

    found = {}
    for event in tensorboard_events(folder):
        for value in event.summary.value:
            if value.HasField("image"):
                pixels = np.asarray(Image.open(io.BytesIO(value.image.encoded_image_string)).convert("L"))
                found.setdefault(value.tag, []).append((event.step, pixels / 255.0))
    return found


def test_validation_draws_the_layer_attention_map_in_tensorboard(multi30k_slice, tmp_path, fresh_tensorboard_writers):
    """At validation the map (decoder layer x encoder layer) is an image whose cells are the logged weights."""
    board = str(tmp_path / "board")
    run_cli(tiny_train_args(multi30k_slice, str(tmp_path / "save"), "transformer_fine_grained_layer_attention", FLAG,
                            "--tensorboard-logdir", board, max_update=2))
    fresh_tensorboard_writers()
    scalars = tensorboard_scalars(os.path.join(board, "valid"))
    (step, image), = tensorboard_images(os.path.join(board, "valid"))["fusion/layer_attention/map"]
    assert image.shape == (16, 32)  # 1 decoder layer x (word embeddings, encoder layer 1), 16 pixels a cell
    for n in (0, 1):
        (logged_step, weight), = scalars[f"fusion/layer_attention/map_dec0_enc{n}"]
        assert logged_step == step and image[8, 16 * n + 8] == pytest.approx(weight, abs=1 / 255)
    assert "fusion/layer_attention/map" not in tensorboard_images(os.path.join(board, "train_inner"))


def test_the_flag_alone_leaves_layerdrop_pruning_allowed(data_dir):
    """--encoder-layers-to-keep is refused with a technique (they index layers), not with a flag that only reports."""
    from fairseq_fusion.errors import FusionError

    model = build("fusion_transformer", data_dir, extra=[FLAG, "--encoder-layers-to-keep", "0,2"])[0]
    assert len(model.encoder.layers) == 2
    with pytest.raises(FusionError, match="--encoder-layers-to-keep"):
        build("fusion_transformer", data_dir, extra=[FLAG, "--layer-attention", "fine", "--encoder-layers-to-keep", "0,2"])


def test_figures_of_several_forwards_are_their_mean_over_forwards_and_ranks(data_dir):
    """The model's totals add the forwards (micro-batches) until taken; summed logging outputs (what fairseq's
    all_reduce_dict gives: counts as device tensors) and gathered ones (a list) give the same mean."""
    model, task, _ = build("transformer_lexical_shortcuts_ff", data_dir, extra=[FLAG])
    model.eval()
    samples = [training_sample(task, lengths, lengths) for lengths in ((7, 5, 9, 4), (3, 11, 6))]
    with torch.no_grad():
        values = [forward_logged(model, sample)[1] for sample in samples]  # each forward's own, taken at once
        for sample in samples:
            model(**sample["net_input"])
    both = internals.take(model)  # the two forwards' totals
    assert not internals.take(model)
    name = "shortcuts/enc0_key_gate"
    assert both[internals.COUNT_PREFIX + name] == 2 and values[0][name] != values[1][name]
    mean = (values[0][name] + values[1][name]) / 2
    assert float(internals.means([both])[name]) == pytest.approx(mean, abs=1e-6)
    summed = {k: torch.as_tensor(v, dtype=torch.double) for k, v in both.items()}
    assert float(internals.means([summed])[name]) == pytest.approx(mean, abs=1e-6)
    half = {k: v / 2 if k.startswith(internals.PREFIX) else 1 for k, v in both.items()}
    assert float(internals.means([half, half])[name]) == pytest.approx(mean, abs=1e-6)

"""Host syncs per beam step and per training step: no fusion arch needs more than fairseq's transformer.

On CUDA, an op that brings a tensor's values to the host (``.item()``/``bool()``, ``nonzero``, ``masked_select``,
``torch.equal``, a copy to the CPU, ...) waits for every kernel queued before it. The counts here are of the aten
ops that do so on CUDA, observed on CPU with a ``TorchDispatchMode``. Code that decides by device
(``fairseq_fusion/host_sync.py``) is counted on its CUDA path, and that path must give the CPU path's results.
Every registered ``fusion_transformer`` arch (fairseq's registry) and fairseq's ``transformer`` run in the same
process: beam search through fairseq's ``SequenceGenerator`` and a training step (the task's ``train_step``:
forward and backward of the arch's own criterion; the phrase archs with their n-gram segmentation), and SwitchOut's
batch noising (``--task translation_switchout``) on top of a training step.
"""
import pytest
import torch
from fairseq.models import ARCH_MODEL_REGISTRY
from fairseq.sequence_generator import SequenceGenerator
from torch.utils._python_dispatch import TorchDispatchMode

from fairseq_fusion import host_sync
from fairseq_fusion.models import FusionTransformerModel
from test_contracts import build, collate, sentences, training_sample

ARCHS = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel)
REFERENCE = "transformer"
SWITCHOUT = ["--task", "translation_switchout", "--switchout-tau-src", "0.8", "--switchout-tau-tgt", "0.9"]
CASES = [REFERENCE, *ARCHS, "transformer_surface_fusion+switchout"]
# ops that read device memory on the host on CUDA (``.item()``/``bool()``/``int()`` dispatch to _local_scalar_dense)
SYNC_OPS = {"_local_scalar_dense", "item", "is_nonzero", "nonzero", "nonzero_numpy", "argwhere", "equal",
            "masked_select", "unique", "_unique", "_unique2", "unique_dim", "unique_consecutive", "bincount"}
INDEXING = {"index", "index_put", "index_put_", "_index_put_impl_"}  # with a boolean index: a nonzero inside
BEAM, STEPS = 3, 4
# 19 tokens make 5 n-gram phrases, 18 make 6: the phrase archs' CUDA path sizes for 6 (empty slots)
SOURCE_LENGTHS = [19, 6, 3]


def is_sync(name, args, kwargs):
    if name in SYNC_OPS:
        return True
    if name == "repeat_interleave":  # the output size is read on the host unless given
        return isinstance(args[0], torch.Tensor) and kwargs.get("output_size") is None and (len(args) < 4 or args[3] is None)
    if name in INDEXING:
        indices = args[1] if len(args) > 1 else kwargs.get("indices", [])
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)
    if name in ("_to_copy", "copy_"):  # a copy of a non-scalar tensor from the device to the host
        src = args[1] if name == "copy_" else args[0]
        dst_cpu = (args[0].device.type if name == "copy_" else str(kwargs.get("device") or src.device)) == "cpu"
        return src.device.type != "cpu" and dst_cpu and src.numel() > 1
    return False


class SyncCounter(TorchDispatchMode):
    """Sync ops per segment; ``mark()`` starts the next segment."""

    def __init__(self):
        super().__init__()
        self.segments = [[]]

    def mark(self):
        self.segments.append([])

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func._schema.name.split("::")[-1]
        if is_sync(name, args, kwargs):
            self.segments[-1].append(name)
        return func(*args, **kwargs)


def test_counter_sees_each_kind_of_sync():
    x = torch.tensor([0.0, 1.0, 2.0])
    with SyncCounter() as c:
        x.sum().item(), bool(x[1]), x.nonzero(), torch.equal(x, x), x.masked_select(x > 0), x[x > 0], x.unique()
        x.add(1).mul(2).masked_fill(x > 1, 0.0).index_select(0, torch.tensor([2, 0])).sum()  # no sync
    assert sorted(c.segments[0]) == sorted(["_local_scalar_dense"] * 2 + ["nonzero", "equal", "masked_select", "index", "_unique2"])


def model_and_task(case, data_dir):
    arch, extra = (case.split("+")[0], SWITCHOUT) if case.endswith("+switchout") else (case, [])
    model, task, args = build(arch, data_dir, extra=extra)
    k = getattr(args, "multilayer_attention", 0)
    if k >= args.encoder_layers:  # a layer above k, so that multi-layer attention is on
        layers = str(k + 1)
        model, task, args = build(arch, data_dir, extra=[*extra, "--encoder-layers", layers, "--decoder-layers", layers])
    return model, task, args


def beam_step_syncs(model, task):
    """Sync ops of each beam step (decoder call, search, reorder for the next step); all hypotheses
    end at the last step (min_len = max_len), so every case runs the same steps."""
    model.eval()
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=BEAM, max_len_a=0, max_len_b=STEPS,
                                  min_len=STEPS)
    sample = {"net_input": collate(task, sentences(task, SOURCE_LENGTHS))}
    counter = SyncCounter()
    forward_decoder = generator.model.forward_decoder

    def marked(*args, **kwargs):
        counter.mark()
        return forward_decoder(*args, **kwargs)

    generator.model.forward_decoder = marked
    with torch.no_grad(), counter:
        hypos = generator.generate([model], sample)
    return counter.segments, [[(h["tokens"].tolist(), h["score"].item()) for h in sent] for sent in hypos]


class Backward:
    """The optimizer's part of fairseq's train_step."""

    def backward(self, loss):
        loss.backward()


def training_step_syncs(model, task, args):
    criterion = task.build_criterion(args)
    sample = training_sample(task)
    torch.manual_seed(0)
    with SyncCounter() as counter:
        loss, _, _ = task.train_step(sample, model, criterion, Backward(), 0)
    return len(counter.segments[0]), loss.item()


def cuda_paths(mp):
    """The code takes the paths it takes on CUDA (the sync ops are counted the same on the CPU)."""
    mp.setattr(host_sync, "host_reads_are_free", lambda tensor: False)


@pytest.fixture(scope="module")
def counts(data_dir_for_syncs):
    """{case: (per beam step counts, encoder and setup count, training step count)}, on the CUDA paths."""
    result = {}
    with pytest.MonkeyPatch.context() as mp:
        cuda_paths(mp)
        for case in CASES:
            model, task, args = model_and_task(case, data_dir_for_syncs)
            segments, _ = beam_step_syncs(model, task)
            train = training_step_syncs(model, task, args)[0]
            result[case] = ([len(s) for s in segments[1:]], len(segments[0]), train)
    print("\nhost syncs: case, per beam step, before the first step, training step")
    for case, (steps, setup, train) in result.items():
        print(f"{case:48s} {steps} {setup} {train}")
    return result


@pytest.fixture(scope="module")
def data_dir_for_syncs(tmp_path_factory):
    from conftest import write_dicts

    return write_dicts(tmp_path_factory.mktemp("sync_dicts"), 40)


def test_reference_counts_are_what_fairseq_does(counts):
    steps, _, train = counts[REFERENCE]
    assert len(steps) == STEPS + 1 and max(steps) > 0 and train >= 0


@pytest.mark.parametrize("case", CASES[1:])
def test_no_more_syncs_than_fairseqs_transformer(case, counts):
    steps, setup, train = counts[case]
    ref_steps, ref_setup, ref_train = counts[REFERENCE]
    assert len(steps) == len(ref_steps)
    worse = [(i, n, r) for i, (n, r) in enumerate(zip(steps, ref_steps)) if n > r]
    assert not worse, f"beam steps with more syncs than the transformer (step, {case}, transformer): {worse}"
    assert setup <= ref_setup, f"encoder and setup of beam search: {setup} syncs, the transformer {ref_setup}"
    assert train <= ref_train, f"training step: {train} syncs, the transformer {ref_train}"


@pytest.mark.parametrize("arch", ["transformer_surface_fusion", "transformer_phrase", "transformer_multilayer_attention"])
def test_cuda_paths_give_the_cpu_paths_results(arch, data_dir_for_syncs, monkeypatch):
    """The reorders that copy every step, the phrase slots sized from the padded length: the same beams and
    scores, the same training loss (dropout on)."""
    model, task, args = model_and_task(arch, data_dir_for_syncs)
    cpu_syncs, cpu_hypos = beam_step_syncs(model, task)
    cpu_loss = training_step_syncs(model, task, args)[1]
    model.zero_grad()
    cuda_paths(monkeypatch)
    cuda_syncs, cuda_hypos = beam_step_syncs(model, task)
    cuda_loss = training_step_syncs(model, task, args)[1]
    for sent_cpu, sent_cuda in zip(cpu_hypos, cuda_hypos):
        assert [t for t, _ in sent_cpu] == [t for t, _ in sent_cuda]
        assert [s for _, s in sent_cpu] == pytest.approx([s for _, s in sent_cuda], abs=1e-5)
    assert cpu_loss == pytest.approx(cuda_loss, abs=1e-5)
    if arch == "transformer_surface_fusion":  # the copy skip (torch.equal) is the CPU's only
        assert sum(s.count("equal") for s in cpu_syncs) > 0 == sum(s.count("equal") for s in cuda_syncs)

"""TorchScript export, as fairseq's own tests check it for ``transformer`` (fairseq's tests/test_export.py
``test_export_transformer``, tests/test_sequence_generator.py ``TestJitSequenceGenerator``), reproduced in-process
for ``fusion_transformer``: the model built by the task at tiny sizes, scripted, saved and loaded through a buffer, its
outputs compared with the eager model's (fusion's own code) on the same batch; the scripted SequenceGenerator's
hypotheses against the eager one's; and every registered arch either scripts or is refused in one line naming its
technique (``models/torchscript.py``), never a TorchScript compiler error.
"""
import io

import pytest
import torch
from fairseq.sequence_generator import SequenceGenerator

from fairseq_fusion import fusion_options
from fairseq_fusion.errors import PREFIX, FusionError
from fairseq_fusion.models import catalog
from fairseq_fusion.models.fusion_encoder import FusionTransformerEncoder
from fairseq_fusion.models.fusion_layers import FusionDecoderLayer
from conftest import build_model, write_dicts

TINY = [
    "--encoder-layers", "2", "--decoder-layers", "2",
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("export_dicts"), 40)


def build(data_dir, arch="fusion_transformer", *flags):
    criterion = fusion_options.default_criterion(arch)
    smoothing = ["--label-smoothing", "0.1"] if "label_smoothed" in criterion else []
    model, task, _ = build_model(data_dir, arch, *TINY, *smoothing, *flags, criterion=criterion)
    return model.eval(), task


def save_and_load(scripted):
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)
    buffer.seek(0)
    return torch.jit.load(buffer)


def batch(task, lengths=(6, 4, 2)):
    """Left-padded sources ending in eos, and right-padded previous output tokens."""
    d = task.source_dictionary
    g = torch.Generator().manual_seed(0)
    src = torch.full((len(lengths), max(lengths)), d.pad())
    prev = torch.full((len(lengths), 5), d.pad())
    for i, n in enumerate(lengths):
        src[i, -n:] = torch.cat([torch.randint(d.nspecial, len(d), (n - 1,), generator=g), torch.tensor([d.eos()])])
        prev[i, : min(n, 5)] = torch.cat([torch.tensor([d.eos()]), torch.randint(d.nspecial, len(d), (4,), generator=g)])[: min(n, 5)]
    return src, torch.tensor(lengths), prev


def test_export_fusion_transformer(data_dir):
    """fairseq's test_export_transformer: script, save and load; then the loaded module's outputs are the eager
    model's (log-probabilities, attention, encoder output), and scripting left the eager model as it was."""
    model, task = build(data_dir, "fusion_transformer", "--dropout", "0.1")
    src, lengths, prev = batch(task)
    with torch.no_grad():
        eager_out = model(src, lengths, prev)
        eager = model.get_normalized_probs(eager_out, log_probs=True)
        loaded = save_and_load(torch.jit.script(model))
        loaded.eval()
        scripted_out = loaded(src, lengths, prev)
        scripted = loaded.get_normalized_probs(scripted_out, True, None)
        eager_enc = model.encoder.forward_torchscript({"src_tokens": src, "src_lengths": lengths})
        scripted_enc = loaded.encoder(src, lengths)
    torch.testing.assert_close(scripted, eager, rtol=0, atol=1e-5)
    torch.testing.assert_close(scripted_out[1]["attn"][0], eager_out[1]["attn"][0], rtol=0, atol=1e-6)
    torch.testing.assert_close(scripted_enc["encoder_out"][0], eager_enc["encoder_out"][0], rtol=0, atol=1e-6)
    assert type(model.encoder) is FusionTransformerEncoder and type(model.decoder.layers[0]) is FusionDecoderLayer


def test_scripted_sequence_generator_gives_the_eager_hypotheses(data_dir):
    """fairseq's TestJitSequenceGenerator (beam 2, --no-repeat-ngram-size 2, save and load), and the scripted
    generator's hypotheses equal the eager generator's: tokens, scores, positional scores, attention."""
    model, task = build(data_dir)
    src, lengths, _ = batch(task, (7, 5, 3))
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    kwargs = dict(beam_size=2, no_repeat_ngram_size=2, max_len_b=6)
    with torch.no_grad():
        eager = SequenceGenerator([model], task.target_dictionary, **kwargs).forward(sample)
        # a generator of its own: scripting swaps the ensemble's members for their fairseq view in place
        scripted = save_and_load(torch.jit.script(SequenceGenerator([model], task.target_dictionary, **kwargs)))
        hypos = scripted.forward(sample)
    assert len(hypos) == len(eager)
    for mine, theirs in zip(hypos, eager):
        assert len(mine) == len(theirs) == 2
        for h1, h2 in zip(mine, theirs):
            assert torch.equal(h1["tokens"], h2["tokens"])
            assert abs(float(h1["score"]) - float(h2["score"])) < 1e-5
            torch.testing.assert_close(h1["positional_scores"], h2["positional_scores"], rtol=0, atol=1e-5)
            torch.testing.assert_close(h1["attention"], h2["attention"], rtol=0, atol=1e-5)
    technique, _ = build(data_dir, "transformer_surface_fusion")
    with pytest.raises(FusionError, match="--surface-fusion hard does not script"):
        torch.jit.script(SequenceGenerator([technique], task.target_dictionary, **kwargs))


def test_every_arch_scripts_or_is_refused_in_one_line(data_dir):
    """An arch whose preset turns no technique on scripts; every other arch is refused before TorchScript compiles
    anything, in one FusionError line naming each technique switch its preset turns on and the way that runs it."""
    switch_flags = {f.name for g in fusion_options.GROUPS for f in g.flags if f.switch}
    scripted = []
    for arch in catalog.fusion_archs():
        model, _ = build(data_dir, arch, "--encoder-layers", "4", "--decoder-layers", "4")  # K = 3 attends 4 layers
        switches = [catalog.flag_text(k, v) for k, v in catalog.preset_flags(arch).items() if k in switch_flags]
        if not switches:
            torch.jit.script(model)
            scripted.append(arch)
            continue
        with pytest.raises(FusionError) as refusal:
            torch.jit.script(model)
        message = str(refusal.value)
        assert message.startswith(PREFIX + f"torch.jit.script: {arch} with --") and "\n" not in message, message
        assert all(s in message for s in switches) and "eagerly" in message and "torch.compile" in message, message
    assert scripted == ["fusion_transformer", "fusion_transformer_big"], scripted

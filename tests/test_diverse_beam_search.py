"""--diverse-beam-groups: fairseq 0.12's DiverseBeamSearch indexed its per-sentence group overlap by the sentences'
dataset ids and ended in IndexError for every arch (fixed in fairseq_fusion/compat/fairseq_fixes.py)."""
import math

import pytest
import torch
from conftest import build_model, write_dicts
from fairseq import search
from fairseq.sequence_generator import SequenceGenerator

import fairseq_fusion  # noqa: F401  (patches DiverseBeamSearch)

TINY = [
    "--encoder-layers", "1", "--decoder-layers", "1", "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("diverse_dicts"), 30)


def translate(model, task, src, ids=None):
    """Diverse beam search, beam 4 in 2 groups, as fairseq-generate runs it (the sample's ``id`` are dataset ids);
    returns the hypotheses' tokens per sentence and the batch size of every search step."""
    strategy = search.DiverseBeamSearch(task.target_dictionary, num_groups=2, diversity_strength=0.5)
    batch_sizes = []
    step = strategy.step

    def counting_step(*args):
        batch_sizes.append(args[1].size(0))
        return step(*args)

    strategy.step = counting_step
    generator = SequenceGenerator([model], task.target_dictionary, beam_size=4, max_len_a=0, max_len_b=12,
                                  search_strategy=strategy)
    sample = {"net_input": {"src_tokens": src, "src_lengths": torch.full((src.size(0),), src.size(1))}}
    if ids is not None:
        sample["id"] = torch.tensor(ids)
    hypos = generator.generate([model], sample)
    return [[h["tokens"].tolist() for h in sentence] for sentence in hypos], batch_sizes


@pytest.mark.parametrize("arch", ["transformer", "fusion_transformer"])
@torch.no_grad()
def test_batch_with_dataset_ids_equals_each_sentence_alone(data_dir, arch):
    """Sentences 40, 7, 13 of a test set in one batch (fairseq 0.12: IndexError at step 1) translate as each
    sentence alone (one row, where the overlap's row and id agree), also after a sentence finished first."""
    model, task, _ = build_model(data_dir, arch, *TINY)
    model.eval()
    model.decoder.output_projection.weight[task.target_dictionary.eos()] *= 2  # sentences end at different steps
    src = torch.randint(4, 30, (3, 6), generator=torch.Generator().manual_seed(0))
    batched, batch_sizes = translate(model, task, src, ids=[40, 7, 13])
    assert batch_sizes[0] == 3 and min(batch_sizes) < 3  # sentences left the batch while the others went on
    for i in range(3):
        alone, _ = translate(model, task, src[i:i + 1])
        assert batched[i] == alone[0], f"sentence {i}"
    assert all(len(hypos) == 4 for hypos in batched)


@torch.no_grad()
def test_transformer_and_fusion_transformer_give_the_same_diverse_beams(data_dir):
    vanilla, task, _ = build_model(data_dir, "transformer", *TINY)
    fusion, _, _ = build_model(data_dir, "fusion_transformer", *TINY)
    fusion.load_state_dict(vanilla.state_dict(), strict=True)
    vanilla.eval(), fusion.eval()
    src = torch.randint(4, 30, (3, 6), generator=torch.Generator().manual_seed(4))
    assert translate(vanilla, task, src, ids=[5, 9, 2])[0] == translate(fusion, task, src, ids=[5, 9, 2])[0]


def step_lprobs(bsz, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.log_softmax(torch.randn(bsz, 4, 8, generator=g), dim=-1)


def test_step_with_ids_equals_fairseqs_step_with_rows():
    """Three steps of a batch of 3 (dataset ids 40, 7, 13), the middle sentence leaving after step 1, against
    fairseq's own step given the rows, where its indexing is right (fairseq's tests use samples without ids)."""
    fairseq_step = search.DiverseBeamSearch.step.fairseq_step
    ours = search.DiverseBeamSearch(_Dict(), num_groups=2, diversity_strength=0.5)
    theirs = search.DiverseBeamSearch(_Dict(), num_groups=2, diversity_strength=0.5)
    ids, rows = torch.tensor([40, 7, 13]), torch.tensor([0, 1, 2])
    scores = torch.zeros(3, 4, 0)
    for step in range(3):
        if step == 2:  # sentence 7 finished
            ids, rows, scores = ids[[0, 2]], rows[[0, 2]], scores[[0, 2]]
        lprobs = step_lprobs(len(ids), seed=step)
        got = ours.step(step, lprobs, scores, None, ids)
        expected = fairseq_step(theirs, step, lprobs, scores, None, rows)
        for a, b in zip(got, expected):
            assert torch.equal(a, b), f"step {step}"
        scores = torch.cat([scores, got[0].view(len(ids), 4, 1)], dim=2)


def test_second_group_avoids_the_first_groups_tokens():
    """Step 0 by hand: group 0 takes the 2 likeliest tokens (2, 3); with diversity strength 2, group 1 sees them
    2 lower (log .4 - 2, log .3 - 2) and takes 4 and 5 (log .2, log .08), the next likeliest."""
    strategy = search.DiverseBeamSearch(_Dict(), num_groups=2, diversity_strength=2.0)
    probs = torch.tensor([0.01, 0.01, 0.4, 0.3, 0.2, 0.08])
    lprobs = probs.log().expand(1, 4, 6).clone()
    scores, tokens, beams = strategy.step(0, lprobs, None, None, torch.tensor([7]))
    # candidates interleave the groups: group 0's first, group 1's first, group 0's second, group 1's second
    assert tokens.tolist() == [[2, 4, 3, 5]]
    assert beams.tolist() == [[0, 1, 0, 1]]  # group g continues its own beams (g, g + 2)
    expected = [math.log(p) for p in (0.4, 0.2, 0.3, 0.08)]
    assert torch.allclose(scores, torch.tensor([expected]))


class _Dict:
    """What DiverseBeamSearch reads of a dictionary."""

    def pad(self):
        return 1

    def unk(self):
        return 3

    def eos(self):
        return 2

    def __len__(self):
        return 8

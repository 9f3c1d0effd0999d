"""Lexical analyses of Emelin et al. 2019 (probe, POS, frequency bins, gates, similarity):
planted signals and hand-computed values, streaming over several batches, separate source
and target dictionaries. Tiny models (d=16) and synthetic data: fast on 2 CPU cores."""
import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from fairseq import options, tasks
from fairseq.data import LanguagePairDataset

from fairseq_fusion_tools.analysis import lexical_gates, lexical_probe, lexical_similarity
from fairseq_fusion_tools.analysis.lexical_frequency import type_bins
from fairseq_fusion_tools.analysis.lexical_pos import CATEGORIES, PositionCategories, subword_categories, super_category
from fairseq_fusion_tools.analysis.lexical_store import StateStore

TINY = [
    "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
    "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
    "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
    "--encoder-layers", "2", "--decoder-layers", "2",
]
SRC_WORDS, TGT_WORDS = 26, 56  # + 4 special symbols: dictionaries of 30 and 60


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny probes: one thread is faster than several on a shared machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def write_dict(path, n_words, rising):
    """Counts fall with the id (``rising=False``) or rise with it: the two sides' bins differ."""
    with open(path, "w") as f:
        for i in range(n_words):
            f.write(f"w{i} {10 + i if rising else 1000 - i}\n")


@pytest.fixture(scope="module")
def separate_dicts(tmp_path_factory):
    d = tmp_path_factory.mktemp("lex_dicts")
    write_dict(d / "dict.src.txt", SRC_WORDS, rising=False)
    write_dict(d / "dict.tgt.txt", TGT_WORDS, rising=True)
    return str(d)


def tiny_model(data_dir, arch="fusion_transformer", extra=("--lexical-shortcuts",)):
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [data_dir, "--task", "translation", "-s", "src", "-t", "tgt",
                                                "--arch", arch, "--cpu", *TINY, *extra])
    task = tasks.setup_task(args)
    torch.manual_seed(1)
    return task.build_model(args).eval(), task


def add_split(task, split, n_sentences, seed):
    """Random sentences over each side's own vocabulary, set up as ``split`` of the task."""
    g = torch.Generator().manual_seed(seed)
    src_d, tgt_d = task.source_dictionary, task.target_dictionary

    def sent(d):
        n = int(torch.randint(3, 9, (1,), generator=g))
        return torch.cat([torch.randint(d.nspecial, len(d), (n,), generator=g), torch.tensor([d.eos()])])

    src = [sent(src_d) for _ in range(n_sentences)]
    tgt = [sent(tgt_d) for _ in range(n_sentences)]
    task.datasets[split] = LanguagePairDataset(src, np.array([len(s) for s in src]), src_d,
                                               tgt, np.array([len(t) for t in tgt]), tgt_d)
    return src, tgt


# --- probe: planted signals -----------------------------------------------------------------


class FakeDictionary:
    def __init__(self, counts, nspecial=4):
        self.count, self.nspecial = counts, nspecial

    def __len__(self):
        return len(self.count)


def planted_store(directory, n, table, seed, informative):
    """Layer 0: the type's embedding row (no dropout, no noise) for informative types, noise
    for the others; layer 1: noise everywhere. Category: NOUN for informative, VERB else."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, len(table), (n,), generator=g)
    noise = torch.randn(n, table.size(1), generator=g)
    keep = informative[tokens]
    layer0 = torch.where(keep.unsqueeze(1), table[tokens], noise)
    layer1 = torch.randn(n, table.size(1), generator=g)
    cats = np.where(keep.numpy(), CATEGORIES.index("NOUN"), CATEGORIES.index("VERB"))
    store = StateStore(str(directory))
    for chunk in torch.arange(n).split(700):  # several appends, as batches would write them
        store.append("encoder", tokens[chunk], [layer0[chunk], layer1[chunk]], cats[chunk.numpy()])
    store.close()
    return store, tokens, keep


def test_probe_recovers_an_embedding_layer_and_not_noise(tmp_path):
    vocab, dim = 24, 16
    table = torch.randn(vocab, dim, generator=torch.Generator().manual_seed(0))
    informative = torch.arange(vocab) < 14  # types 4..13: the 10 most frequent (counts fall with the id)
    stores = {}
    for name, n, seed in (("train", 6000, 1), ("valid", 1500, 2), ("test", 2000, 3)):
        stores[name], tokens, keep = planted_store(tmp_path / name, n, table, seed, informative)
        if name == "test":
            test_tokens, test_keep = tokens, keep
    counts = [0] * 4 + [1000 - t for t in range(4, vocab)]
    result = lexical_probe.probe(stores, {"encoder": FakeDictionary(counts)}, group_size=1, hidden=64, dropout=0.0,
                                 lr=1e-2, warmup=0, max_epochs=8, patience=2, batch_size=128, chunk_rows=1000,
                                 log=lambda *_: None)["encoder"]
    share_informative = test_keep.float().mean().item()
    # layer 0: every informative position right, the noise positions at chance among the 10 rare types
    assert result["accuracy"][0] == pytest.approx(share_informative + (1 - share_informative) * 0.1, abs=0.06)
    assert result["accuracy"][1] < 0.12  # noise: chance is 1/20
    by_bin = result["accuracy_by_frequency_bin"][0]  # 20 types, 2 per bin: bins 6-10 the informative ones
    assert min(by_bin[5:]) > 0.98 and max(by_bin[:5]) < 0.35
    assert result["accuracy_by_pos"]["NOUN"][0] > 0.98 and result["accuracy_by_pos"]["VERB"][0] < 0.3
    assert result["positions_per_pos"]["NOUN"] == int(test_keep.sum())
    # counts fall with the id: bin of type t (0 = rarest) is (23 - t) // 2
    assert result["positions_per_bin"] == torch.bincount((23 - test_tokens) // 2, minlength=10).tolist()
    assert result["types_per_bin"] == [2] * 10
    assert result["test_positions"] == 2000 and result["train_positions"] == 6000


def test_early_stopping_keeps_the_best_epoch(tmp_path):
    """Noise has nothing to learn: the probe stops after `patience` epochs without a better
    held-out accuracy, and the reported best is the maximum of its history."""
    vocab, dim = 12, 8
    table = torch.randn(vocab, dim)
    stores = {name: planted_store(tmp_path / name, n, table, seed, torch.zeros(vocab, dtype=torch.bool))[0]
              for name, n, seed in (("train", 800, 1), ("valid", 400, 2), ("test", 400, 3))}
    probes, history = lexical_probe.train_group(stores["train"], stores["valid"], "encoder", [1], vocab, hidden=16,
                                                dropout=0.0, lr=1e-2, warmup=0, max_epochs=50, patience=2,
                                                batch_size=64, log=lambda *_: None)
    accs = [h["valid_accuracy"] for h in history[1]]
    best = accs.index(max(accs))
    assert len(accs) < 50 and len(accs) - 1 - best == 2  # stopped two epochs after the best one
    expected_lr, lr, top = [], 1e-2, -1.0  # halved after every epoch that does not beat the best
    for a in accs:
        expected_lr.append(lr)
        top, lr = (a, lr) if a > top else (top, lr / 2)
    assert [h["lr"] for h in history[1]] == pytest.approx(expected_lr)
    stats = lexical_probe.evaluate(probes, stores["valid"], "encoder", vocab)
    assert stats[1]["correct"].sum().item() / 400 == pytest.approx(max(accs))  # the best weights were restored


def test_warmup_is_linear_then_flat():
    assert [lexical_probe.warmup_factor(s, 4) for s in (1, 2, 4, 9)] == [0.25, 0.5, 1.0, 1.0]
    assert lexical_probe.warmup_factor(1, 0) == 1.0


# --- separate dictionaries: each side's labels, counts and bins -----------------------------


def test_each_side_uses_its_own_dictionary(separate_dicts, tmp_path):
    model, task = tiny_model(separate_dicts)
    assert len(task.source_dictionary) == 30 and len(task.target_dictionary) == 60
    src, tgt = add_split(task, "test", 40, seed=5)
    store = StateStore(str(tmp_path / "store"))
    lexical_probe.write_states(model, task, "test", store, max_tokens=60)  # several batches
    read = {side: store.read(side, "tokens", 0, store.size(side), np.int64) for side in ("encoder", "decoder")}
    assert sorted(read["encoder"].tolist()) == sorted(t for s in src for t in s[:-1].tolist())
    assert sorted(read["decoder"].tolist()) == sorted(t for s in tgt for t in s[:-1].tolist())
    assert store.meta["decoder"]["layers"] == 3 and store.meta["decoder"]["dim"] == 16
    # frequency bins: source counts fall with the id, target counts rise with it
    src_types = torch.zeros(30, dtype=torch.bool)
    src_types[torch.tensor(read["encoder"])] = True
    bins = type_bins(src_types, task.source_dictionary.count, 2)
    seen = src_types.nonzero().flatten()
    assert bins[seen].tolist() == [1] * (len(seen) // 2) + [0] * ((len(seen) + 1) // 2)  # low ids = frequent
    tgt_types = torch.zeros(60, dtype=torch.bool)
    tgt_types[torch.tensor(read["decoder"])] = True
    bins = type_bins(tgt_types, task.target_dictionary.count, 2)
    seen = tgt_types.nonzero().flatten()
    assert bins[seen].tolist() == [0] * ((len(seen) + 1) // 2) + [1] * (len(seen) // 2)  # low ids = rare
    # a probe over the target dictionary takes every decoder label (60 classes, ids up to 59)
    stores = {"train": store, "valid": store, "test": store}
    result = lexical_probe.probe(stores, {"encoder": task.source_dictionary, "decoder": task.target_dictionary},
                                 group_size=2, hidden=8, max_epochs=1, warmup=0, log=lambda *_: None)
    assert result["decoder"]["test_positions"] == len(read["decoder"])
    assert sum(result["decoder"]["types_per_bin"]) == int(tgt_types.sum())


def test_states_stop_at_the_position_cap(separate_dicts, tmp_path):
    model, task = tiny_model(separate_dicts)
    add_split(task, "train", 60, seed=6)
    store = lexical_probe.write_states(model, task, "train", StateStore(str(tmp_path / "s")), max_tokens=50,
                                       max_positions=37, sample_seed=3)
    assert store.size("encoder") == 37 and store.size("decoder") == 37
    assert os.path.getsize(tmp_path / "s" / "encoder.layer2") == 37 * 16 * 2  # float16


# --- POS ------------------------------------------------------------------------------------


def test_pos_super_categories():
    table = {"NOUN": ["NOUN", "PROPN", "NN", "NNS", "NNP", "NP", "NE"],
             "VERB": ["VERB", "AUX", "VBD", "VBZ", "MD", "VVFIN", "VAFIN", "VHD"],
             "ADJ-ADV": ["ADJ", "ADV", "JJ", "JJR", "RB", "WRB", "ADJA", "ADJD", "PROAV"],
             "OTHER": ["DET", "DT", "IN", "ART", "APPR", "PUNCT", "$.", "PRP", "CD", "RP"]}
    for cat, tags in table.items():
        assert [super_category(t) for t in tags] == [cat] * len(tags), cat


def test_subwords_take_their_words_tag():
    cats = subword_categories("the ca@@ t s@@ a@@ t quick@@ ly", "DT NN VBD RB", "tags line 1")
    assert [CATEGORIES[c] for c in cats] == ["OTHER", "NOUN", "NOUN", "VERB", "VERB", "VERB", "ADJ-ADV", "ADJ-ADV"]
    with pytest.raises(ValueError, match=r"tags line 7: 3 tags but the BPE line has 4 words"):
        subword_categories("the ca@@ t sat quickly", "DT NN VBD", "tags line 7")


def test_position_categories_follow_each_sides_positions(tmp_path):
    (tmp_path / "t.tags").write_text("DT NN\nVB\n")
    (tmp_path / "t.bpe").write_text("a ca@@ t\nru@@ n\n")
    sizes = np.array([4, 3])  # sub-words + </s>
    noun, other, verb = (CATEGORIES.index(c) for c in ("NOUN", "OTHER", "VERB"))
    enc = PositionCategories(str(tmp_path / "t.tags"), str(tmp_path / "t.bpe"), sizes, "encoder")
    assert enc([0, 0, 0, 0, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2]).tolist() == [other, noun, noun, -1, verb, verb, -1]
    dec = PositionCategories(str(tmp_path / "t.tags"), str(tmp_path / "t.bpe"), sizes, "decoder")
    assert dec([0, 0, 0, 0, 1, 1, 1], [0, 1, 2, 3, 0, 1, 2]).tolist() == [-1, other, noun, noun, -1, verb, verb]
    with pytest.raises(ValueError, match=r"t.bpe line 2: 2 sub-words but the binarized sentence has 4"):
        PositionCategories(str(tmp_path / "t.tags"), str(tmp_path / "t.bpe"), np.array([4, 5]), "encoder")


# --- gates by frequency bin: hand-computed ---------------------------------------------------


def test_gate_statistics_by_frequency_bin_match_hand_values():
    name = "encoder.layers.0.self_attn.k_gate"
    acc = lexical_gates.GateAccumulator([name], {name: 8})
    counts = [0, 0, 0, 0, 40, 30, 20, 10]  # type 7 rarest, type 4 most frequent
    # batch 1: two positions of type 4 (r = 0.92, 0.72 on both features), one of type 7 (0.22, 0.42)
    acc.add(name, torch.tensor([[0.92, 0.92], [0.72, 0.72], [0.22, 0.42]]), torch.tensor([4, 4, 7]))
    # batch 2: type 6 (0.62, 0.62), type 5 (0.12, 0.32)
    acc.add(name, torch.tensor([[0.62, 0.62], [0.12, 0.32]]), torch.tensor([6, 5]))
    r = acc.result({name: counts}, n_bins=2)[name]
    # bins over the 4 types seen: {7, 6} rare (bin 1), {5, 4} frequent (bin 2)
    rare, frequent = [0.22, 0.42, 0.62, 0.62], [0.12, 0.32, 0.92, 0.92, 0.72, 0.72]
    assert r["by_frequency_bin"]["mean"] == pytest.approx([np.mean(rare), np.mean(frequent)])
    assert r["by_frequency_bin"]["std"] == pytest.approx([np.std(rare), np.std(frequent)])
    assert r["by_frequency_bin"]["share_above_0.5"] == pytest.approx([0.5, 4 / 6])
    assert r["positions_per_bin"] == [2, 3]
    everything = rare + frequent
    assert r["mean"] == pytest.approx(np.mean(everything)) and r["std"] == pytest.approx(np.std(everything))
    assert r["values"] == 10
    assert r["histogram"] == pytest.approx((np.histogram(everything, bins=20, range=(0, 1))[0] / 10).tolist())


# --- similarity: the mean over positions, not over batches ---------------------------------


def test_similarity_averages_over_positions_across_batches():
    acc = lexical_similarity.SimilarityAccumulator()
    e = torch.tensor([[1.0, 0.0]])
    # batch 1: one position, cos 0 (layer 1) and -1 (layer 2)
    acc.add({"encoder": {"tokens": torch.tensor([5]), "embed": e, "layers": [e, torch.tensor([[0.0, 2.0]]), -e]}})
    # batch 2: three positions, cos 1 / 1 / 0.6 for layer 1, 0 for layer 2; token embeddings (0, 1)
    layer0 = torch.tensor([[1.0, 0.0], [2.0, 0.0], [1.0, 0.0]])
    layer1 = torch.tensor([[3.0, 0.0], [1.0, 0.0], [3.0, 4.0]])
    layer2 = torch.tensor([[0.0, 1.0]] * 3)
    acc.add({"encoder": {"tokens": torch.tensor([5, 6, 7]), "embed": torch.tensor([[0.0, 1.0]] * 3),
                         "layers": [layer0, layer1, layer2]}})
    r = acc.result()["encoder"]
    assert r["embedding_layer"] == pytest.approx([(0 + 1 + 1 + 0.6) / 4, (-1 + 0 + 0 + 0) / 4])
    assert r["token_embeddings"] == pytest.approx([(0 + 0 + 0 + 0.8) / 4, (-1 + 1 + 1 + 1) / 4])
    assert r["positions"] == 4


def test_streamed_similarity_matches_sentence_by_sentence(separate_dicts):
    """Batched, padded, streamed: the same mean as each sentence run alone (hooks written here)."""
    model, task = tiny_model(separate_dicts, extra=())
    src, tgt = add_split(task, "valid", 12, seed=7)
    streamed = lexical_similarity.stream_similarity(model, task, "valid", max_tokens=30)
    sums, n = torch.zeros(2), 0
    for s, t in zip(src, tgt):
        outs = []
        hooks = [layer.register_forward_hook(lambda m, i, o: outs.append(o[0] if isinstance(o, tuple) else o))
                 for layer in model.encoder.layers]
        with torch.no_grad():
            x = model.encoder.embed_scale * model.encoder.embed_tokens(s[None]) + model.encoder.embed_positions(s[None])
            model.encoder(s[None], src_lengths=torch.tensor([len(s)]))
        for h in hooks:
            h.remove()
        sums += torch.stack([F.cosine_similarity(x[0], o[:, 0], dim=-1).sum() for o in outs])
        n += len(s)
    assert streamed["encoder"]["positions"] == n
    assert streamed["encoder"]["embedding_layer"] == pytest.approx((sums / n).tolist(), abs=1e-5)

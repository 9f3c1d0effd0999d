"""fusion-archs: the README's arch table is generated from the presets' @describe entries, the flags an arch sets
are computed from its preset, and --conflicts finds the refusals and the combinations by building tiny models."""
import contextlib
import io
import json
import os
import re

import pytest
from fairseq import options
from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

from fairseq_fusion import fusion_options
from fairseq_fusion_tools.archs import command
from fairseq_fusion_tools.cli import archs as cli
from fairseq_fusion.models import FusionTransformerModel, catalog
from fairseq_fusion.models.fusion_config import model_actions
from conftest import REPO, write_dicts

TINY = ["--encoder-embed-dim", "8", "--decoder-embed-dim", "8", "--encoder-ffn-embed-dim", "16",
        "--decoder-ffn-embed-dim", "16", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
        "--encoder-layers", "3", "--decoder-layers", "3"]


def run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        command.main(cli.get_parser().parse_args(argv))
    return out.getvalue()


def registered():
    return [a for a, m in ARCH_MODEL_REGISTRY.items() if m is FusionTransformerModel]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("catalog_dicts"), 20)


def cli_args(data_dir, arch, extra=()):
    """The arguments fairseq-train gives the model (fairseq's parser and the arch's preset)."""
    return options.parse_args_and_arch(options.get_training_parser(), [
        data_dir, "--task", "translation", "-s", "src", "-t", "tgt", "--arch", arch, *extra])


def test_readme_table_is_the_generated_one():
    text = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    block = text.split(catalog.README_BEGIN + "\n")[1].split(catalog.README_END)[0]
    assert block.strip() == run(["--format", "markdown"]).strip(), \
        "README's ARCH TABLE differs from the presets' @describe entries: run fusion-archs --readme README.md"


def test_every_registered_arch_has_an_entry():
    missing = [a for a in registered() if a not in catalog.CATALOG]
    assert not missing, f"add @describe(...) above the registration of {missing}"
    assert set(catalog.CATALOG) == set(registered())


def test_an_arch_without_an_entry_says_where_to_add_it(monkeypatch):
    def transformer_undescribed(args):
        ARCH_CONFIG_REGISTRY["fusion_transformer"](args)

    monkeypatch.setitem(ARCH_MODEL_REGISTRY, "transformer_undescribed", FusionTransformerModel)
    monkeypatch.setitem(ARCH_CONFIG_REGISTRY, "transformer_undescribed", transformer_undescribed)
    with pytest.raises(ValueError) as e:
        catalog.readme_table()
    message = str(e.value)
    for part in ("transformer_undescribed", "@describe(", "tests/test_catalog.py"):
        assert part in message, message


def key_flag_settings(text):
    """(--flag, value or True) of every flag the notes name outside parentheses (what the preset sets)."""
    depth, outside = 0, []
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        outside.append(ch if depth == 0 and ch != ")" else " ")
    settings = []
    for span in re.findall(r"`([^`]*)`", "".join(outside)):
        tokens = span.split()
        for i, tok in enumerate(tokens):
            if tok.startswith("--"):
                nxt = tokens[i + 1] if i + 1 < len(tokens) else None
                settings.append((tok, True if nxt is None or nxt.startswith("--") else nxt))
    return settings


def test_key_flags_are_real_flags_that_the_preset_sets():
    actions = {opt: a for a in model_actions().values() for opt in a.option_strings}
    problems = []
    for arch in registered():
        notes = catalog.info(arch).key_flags
        for flag in re.findall(r"--[a-z][-a-z0-9]*", notes):
            if flag not in actions:
                problems.append(f"{arch}: {flag} is not a flag of fusion_transformer")
        args = catalog.preset_args(arch)
        for flag, value in key_flag_settings(notes):
            got = getattr(args, actions[flag].dest)
            same = got == value if isinstance(value, bool) or isinstance(got, str) else float(got) == float(value)
            if not same:
                problems.append(f"{arch}: the notes say {flag} {value}, the preset sets {got!r}")
    assert not problems, "\n".join(problems)


def test_key_flag_parsing():
    notes = "`--a x --b`; as the code: `--c 0.1` (`--d y` for the other reading)"
    assert key_flag_settings(notes) == [("--a", "x"), ("--b", True), ("--c", "0.1")]


# read from the presets: what each changes from fusion_transformer (a value equal to the base's is no change)
EXPECTED_SETS = {
    "fusion_transformer": {},
    "transformer_dense": {"layer_aggregation": "dense"},
    # --surface-fusion-lambda 0.9 is the flag's default, so the base has it too
    "transformer_surface_fusion": {"surface_fusion": "hard", "surface_fusion_tau": 1.0, "surface_fusion_detach": True,
                                   "surface_fusion_embed_dropout": True},
    # fairseq's base_architecture derives the decoder's input/output dims from --decoder-embed-dim
    "transformer_lexical_shortcuts_ff_small": {
        "lexical_shortcuts": True, "lexical_shortcuts_feature_fusion": True, "share_all_embeddings": True,
        "encoder_embed_dim": 256, "encoder_ffn_embed_dim": 1024, "decoder_embed_dim": 256,
        "decoder_ffn_embed_dim": 1024, "decoder_input_dim": 256, "decoder_output_dim": 256},
    # the DropConnect of both mixtures is the base's --dropout, 0.1
    "transformer_phrase": {
        "phrase_representations": True, "phrase_glance": "max", "phrase_attentive": True,
        "phrase_transparent_attention": True, "phrase_segmentation": "ngram", "layer_attention": "coarse",
        "layer_attention_dropconnect": 0.1, "phrase_transparent_dropconnect": 0.1},
}


def test_computed_flags_match_the_presets():
    records = {r["arch"]: r for r in json.loads(run(["--format", "json"]))}
    assert list(records) == registered()
    for arch, expected in EXPECTED_SETS.items():
        assert records[arch]["sets"] == expected, arch
    assert records["transformer_hierarchical_aggregation_big"]["criterion"] == \
        "label_smoothed_cross_entropy_with_diversity"


def test_one_arch_lists_every_technique_flag_with_the_value_fairseq_train_gives(data_dir):
    arch = "transformer_phrase_big"
    shown = json.loads(run([arch, "--format", "json"]))
    given = cli_args(data_dir, arch)
    flags = {f["flag"]: f for g in shown["groups"] for f in g["flags"]}
    registry = [f for g in fusion_options.GROUPS for f in g.flags]
    assert sorted(flags) == sorted(fusion_options.option_name(f.name) for f in registry)
    for f in registry:
        assert flags[fusion_options.option_name(f.name)]["value"] == getattr(given, f.name), f.name
    assert flags["--phrase-transparent-dropconnect"]["value"] == 0.3  # Big's --dropout
    assert flags["--phrase-transparent-dropconnect"]["requires"] == ["--phrase-transparent-attention"]
    assert flags["--surface-fusion-lambda"]["requires"] == ["--surface-fusion hard"]
    on = {g["title"] for g in shown["groups"] if g["on"]}
    assert on == {"source phrase representations (Xu et al. 2020)",
                  "layer attention over encoder layers (Liu et al. 2021, Bapna et al. 2018)"}
    assert shown["groups"][0]["on"] and not shown["groups"][-1]["on"]  # the techniques it turns on first
    text = run([arch])
    assert f"--arch {arch} --help" in " ".join(text.split())


def test_an_unknown_arch_is_one_line_with_the_nearest_names():
    with pytest.raises(SystemExit) as e:
        run(["transformer_phraze"])
    message = str(e.value)
    assert message.startswith("fairseq-fusion: error: transformer_phraze") and "\n" not in message
    assert "transformer_phrase," in message


def test_readme_option_rewrites_only_the_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# head\n\n{catalog.README_BEGIN}\n| stale |\n{catalog.README_END}\n\ntail\n", encoding="utf-8")
    run(["--readme", str(readme)])
    assert readme.read_text(encoding="utf-8") == (
        f"# head\n\n{catalog.README_BEGIN}\n{catalog.readme_table()}\n{catalog.README_END}\n\ntail\n")
    readme.write_text("no markers\n", encoding="utf-8")
    with pytest.raises(SystemExit) as e:
        run(["--readme", str(readme)])
    assert "ARCH TABLE" in str(e.value) and readme.read_text(encoding="utf-8") == "no markers\n"


def test_declared_conflicts_are_what_building_each_pair_finds():
    """The matrix that fusion-archs --conflicts shows comes from the techniques' seam claims; a tiny model built
    with each pair (validate, fairseq's build, every attach) must refuse exactly those pairs, with that message."""
    from fairseq_fusion.models import conflicts

    tried, untried, declared = conflicts.pairs()
    tried_b, untried_b, built = conflicts.pairs(build=True)
    assert (tried, untried) == (tried_b, untried_b) and len(declared) == len(built) >= 90
    for d, b in zip(declared, built):
        assert (d.a, d.b) == (b.a, b.b) and d.refusal == b.refusal, (d, b)
    assert sum(p.refusal is not None for p in declared) >= 3


def test_two_claims_on_one_seam_refuse_each_other_naming_both_flags():
    """An independent reading of the rule: only claims that both extend a seam stack."""
    C = fusion_options.Claim
    R, X, E = fusion_options.REPLACES, fusion_options.REMOVES, fusion_options.EXTENDS
    assert fusion_options.conflict_message(C("decoder.self_attn", R, "--a", why="A"), C("decoder.self_attn", R, "--b")) \
        == "--a and --b both replace decoder self-attention (A): use one of them"
    assert fusion_options.conflict_message(C("decoder.self_attn", X, "--gone"), C("decoder.self_attn", R, "--a", verb="gates",
                                                                                 hint="use --x")) \
        == "--a gates decoder self-attention, which --gone removes; use --x"
    ns = conflicts_args(["--phrase-representations", "--layer-aggregation", "linear"])
    assert fusion_options.claim_conflict(ns) is None  # both extend the plan: they stack
    ns = conflicts_args(["--layer-attention", "fine", "--surface-fusion", "hard", "--multilayer-attention", "2",
                         "--decoder-sublayer-order", "sem-ifm"])
    assert fusion_options.claim_conflict(ns).startswith("--multilayer-attention changes decoder self-attention")


def conflicts_args(flags):
    from fairseq_fusion.models import conflicts

    settings, it = [], iter(flags)
    for flag in it:
        name = flag[2:].replace("-", "_")
        value = True if name == "phrase_representations" else next(it)
        settings.append(conflicts.Setting(name, int(value) if name == "multilayer_attention" else value))
    return conflicts.tiny_args(settings)


def test_conflicts_find_a_refusal_and_the_readme_combination(data_dir):
    shown = json.loads(run(["--conflicts", "--format", "json"]))
    pairs = {frozenset((p["a"], p["b"])): p for p in shown["pairs"]}
    refused = pairs[frozenset(("--multilayer-attention 2", "--lexical-shortcuts"))]
    assert not refused["combine"]
    # the same refusal as fairseq-train's build of the multi-layer attention arch with lexical shortcuts
    with pytest.raises(ValueError) as e:
        FusionTransformerModel.build_model(cli_args(data_dir, "transformer_multilayer_attention",
                                                    ["--lexical-shortcuts", *TINY]), None)
    assert refused["refusal"] in str(e.value)
    # the README's example: hierarchical aggregation with lexical shortcuts and hard SurfaceFusion
    readme = ["--layer-aggregation hierarchical", "--lexical-shortcuts", "--surface-fusion hard"]
    for i, a in enumerate(readme):
        for b in readme[i + 1:]:
            assert pairs[frozenset((a, b))]["combine"], (a, b)
    assert "--init-from-vanilla" in shown["not_tried"]
    assert len(shown["pairs"]) == len(pairs)  # each pair once


def test_markdown_tables_keep_their_columns():
    """A | inside a cell (--layer-aggregation iterative|hierarchical) is escaped, so every row has the header's cells."""
    text = run(["transformer_dense", "--format", "markdown"])
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert any("iterative\\|hierarchical" in row for row in rows)
    assert {len(re.split(r"(?<!\\)\|", row)) for row in rows} == {8}  # 6 cells between 7 bars


def test_recipes_read_the_presets_papers_without_importing_fairseq():
    """recipe_settings.preset_sources (an ast reading of the presets' files, for recipes that must not spend seconds
    importing fairseq to look up a paper) agrees with the catalog the imported presets fill, for every arch; and
    `settings.py paper` does not import fairseq."""
    import subprocess
    import sys

    from fairseq_fusion.models import catalog
    from fairseq_fusion_tools import data_paths, recipe_settings

    assert recipe_settings.preset_sources() == {a: e.source for a, e in catalog.CATALOG.items()}
    code = ("import sys; sys.argv = ['settings.py', 'paper', '--task', 'wmt16_ro_en', '--arch', 'transformer_surface_fusion']; "
            "from fairseq_fusion_tools import recipe_settings; recipe_settings.main(); print('fairseq' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=data_paths.REPO_ROOT).stdout.split()
    assert out[0] == "PAPER=liu" and out[-1] == "False"

"""fairseq-train --arch ARCH --help lists the technique flags under their technique titles (fairseq's own help
shows no model flag at all); without --arch it says how to see them. In-process, through fairseq's parser."""
import contextlib
import io
import re

import pytest
from fairseq import options

from fairseq_fusion.guards import arch_help

from fairseq_fusion import fusion_options


def training_help(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as e:
        options.parse_args_and_arch(options.get_training_parser(), argv)
    assert e.value.code == 0
    return out.getvalue()


def sections(text):
    """{section title: options listed in it} of an argparse help text."""
    found, title = {}, None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            title = line[:-1]
            found[title] = []
        elif title is not None:
            found[title] += re.findall(r"^\s{2}(--[-\w]+)", line)
    return found


def test_help_with_a_fusion_arch_lists_the_technique_flags_under_their_titles():
    listed = sections(training_help(["--arch", "transformer_surface_fusion", "--help"]))
    for group in fusion_options.GROUPS:
        assert group.title in listed, f"no section {group.title!r} in --help"
        assert listed[group.title] == [fusion_options.option_name(f.name) for f in group.flags], group.title
    assert "--encoder-embed-dim" in listed["Model-specific configuration"]  # fairseq's transformer flags
    assert "--max-tokens" in listed["dataset_data_loading"]  # the rest of fairseq's help is still there


def test_help_without_an_arch_says_how_to_see_them():
    text = training_help(["--help"])
    assert "--surface-fusion" not in text
    assert arch_help.NO_ARCH_HINT in " ".join(text.split())


def test_parsing_without_help_is_unchanged(tmp_path):
    from conftest import write_dicts

    parser = options.get_training_parser()
    args = options.parse_args_and_arch(parser, [write_dicts(tmp_path, 10), "--arch", "transformer_surface_fusion",
                                                "--surface-fusion-lambda", "0.8"])
    assert (args.surface_fusion, args.surface_fusion_lambda) == ("hard", 0.8)
    assert "parse_known_args" not in vars(parser) and "format_help" not in vars(parser)


@pytest.mark.parametrize("argv", [["--arch", "transformer_surface_fusoin"], ["-a", "transformer_surface_fusoin"],
                                  ["--arch=transformer_surface_fusoin"]])
def test_a_mistyped_arch_is_one_line_with_the_nearest_names(tmp_path, argv):
    from fairseq_fusion.errors import FusionError

    with pytest.raises(FusionError) as e:
        options.parse_args_and_arch(options.get_training_parser(), [str(tmp_path), *argv])
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("fairseq-fusion: error: --arch transformer_surface_fusoin: no such arch; did you mean "
                              "transformer_surface_fusion,"), message


def test_an_arch_with_no_near_name_is_refused_without_a_guess(tmp_path):
    from fairseq_fusion.errors import FusionError

    with pytest.raises(FusionError, match=r"--arch xyzzy: no such arch \(fusion-archs"):
        options.parse_args_and_arch(options.get_training_parser(), [str(tmp_path), "--arch", "xyzzy"])


@pytest.mark.parametrize("parser_of, argv, expected", [
    ("training", ["--arch", "transformer", "--beam", "5"], "unrecognized arguments: --beam 5;"),
    ("training", ["--arch", "transformer", "--max-tokens", "abc"], "argument --max-tokens: invalid int value: 'abc'"),
    ("training", ["--arch", "transformer", "--optimizer", "adamm"], "argument --optimizer: invalid choice: 'adamm'"),
    ("generation", ["--path", "x.pt", "--bema", "4"], "unrecognized arguments: --bema 4 (did you mean --beam"),
    ("interactive", ["--path", "x.pt", "--max-update", "5"], "unrecognized arguments: --max-update 5;"),
])
def test_argparse_errors_of_fairseqs_parsers_are_one_line(tmp_path, capsys, parser_of, argv, expected):
    """Without the plugin, argparse prints fairseq's 115-line usage above its error line."""
    parser = {"training": options.get_training_parser, "generation": options.get_generation_parser,
              "interactive": lambda: options.get_interactive_generation_parser()}[parser_of]()
    with pytest.raises(SystemExit) as e:
        options.parse_args_and_arch(parser, [str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert e.value.code == 2
    assert err.count("\n") == 1 and err.startswith("fairseq-fusion: error: "), err[:500]
    assert expected in err and "--help lists the options" in err


def test_fusion_archs_names_the_plugin_by_a_path_that_works_from_anywhere(tmp_path):
    """``fusion-archs ARCH`` prints the fairseq-train command to add its flags to: its --user-dir is the plugin's
    absolute folder (what fusion-user-dir prints), not ``fairseq_fusion``, which resolves only in the repository root."""
    import os

    from conftest import run_cli
    from cli_runner import plugin_dir

    for argv in (["fusion-archs", "transformer_surface_fusion"], ["fusion-archs"]):
        text = " ".join(run_cli(argv, cwd=str(tmp_path)).stdout.split())
        named = re.findall(r"--user-dir (\S+) --arch", text)
        assert named and set(named) == {plugin_dir()}, named
        assert os.path.isabs(named[0]) and os.path.isfile(os.path.join(named[0], "__init__.py"))

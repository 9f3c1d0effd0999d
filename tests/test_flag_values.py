"""A technique flag's value outside its declared choices or range is refused in one line naming the flag, by the
registry (``fusion_options.check_values``), whichever way the model is built: fairseq's parser (fairseq-train) and a
model built from a Namespace (what ``--model-overrides``, the hub and checkpoints go through).

The cases are generated from the registry, so a flag added later is covered without editing this file."""
import copy
import re

import pytest
from fairseq import options, tasks

from conftest import write_dicts
from fairseq_fusion import fusion_options
from fairseq_fusion.errors import PREFIX, FusionError

SMALL = ["--encoder-embed-dim", "16", "--decoder-embed-dim", "16", "--encoder-ffn-embed-dim", "32",
         "--decoder-ffn-embed-dim", "32", "--encoder-attention-heads", "2", "--decoder-attention-heads", "2",
         "--encoder-layers", "2", "--decoder-layers", "2"]


def declared_flags():
    return [f for g in fusion_options.GROUPS for f in g.flags if f.choices or f.bounds]


def outside(flag):
    """Values just outside what ``flag`` declares: a misspelt choice; each bound itself when it is excluded, else
    a step beyond it."""
    if flag.choices:
        return [str(flag.choices[0]) + "x"]
    b, step = flag.bounds, 1 if flag.bounds.integer else 0.5
    values = []
    if b.low is not None:
        values.append(b.low if b.low_open else b.low - step)
    if b.high is not None:
        values.append(b.high if b.high_open else b.high + step)
    return [v for v in values if v != flag.default]


def inside(flag):
    """Values ``flag`` declares: every choice; each bound when it is included, else a step inside it."""
    if flag.choices:
        return list(flag.choices)
    b, step = flag.bounds, 1 if flag.bounds.integer else 0.25
    values = []
    if b.low is not None:
        values.append(b.low + step if b.low_open else b.low)
    if b.high is not None:
        values.append(b.high - step if b.high_open else b.high)
    return values


CASES = [(flag, value) for flag in declared_flags() for value in outside(flag)]


def case_id(case):
    flag, value = case
    return f"{flag.name}={value}"


def check_refusal(message, flag, value):
    """One line, the plugin's prefix, the flag and the value; for choices, exactly the declared ones."""
    assert message.startswith(PREFIX) and "\n" not in message, message
    assert f"{fusion_options.option_name(flag.name)} " in message and str(value) in message, message
    if flag.choices:
        listed = re.search(r"expected one of (.*)$", message)
        assert listed and listed.group(1).split(", ") == [str(c) for c in flag.choices], message


def parse(data, *flags):
    return options.parse_args_and_arch(options.get_training_parser(), [
        data, "-s", "src", "-t", "tgt", "--arch", "fusion_transformer", "--cpu", *SMALL, *flags])


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return write_dicts(tmp_path_factory.mktemp("dicts"), 20)


def test_every_flag_with_choices_or_a_range_is_covered():
    named = {flag.name for flag, _ in CASES}
    assert named == {f.name for f in declared_flags()}
    # the flags whose values the modules used to check by hand are all declared
    assert {"layer_aggregation", "multilayer_attention", "surface_fusion_lambda", "surface_fusion_tau",
            "layer_attention_dropconnect", "phrase_transparent_dropconnect", "decoder_sublayer_order"} <= named


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_fairseq_parser_refuses_a_value_outside(data_dir, case):
    flag, value = case
    with pytest.raises(FusionError) as e:
        parse(data_dir, fusion_options.option_name(flag.name), str(value))
    check_refusal(str(e.value), flag, value)


@pytest.mark.parametrize("flag", declared_flags(), ids=lambda f: f.name)
def test_fairseq_parser_takes_every_declared_value(data_dir, flag):
    for value in inside(flag):
        args = parse(data_dir, fusion_options.option_name(flag.name), str(value))
        assert getattr(args, flag.name) == value


@pytest.fixture(scope="module")
def parsed(data_dir):
    args = parse(data_dir)
    return args, tasks.setup_task(args)


@pytest.mark.parametrize("case", CASES + [(f, "x" if f.bounds else 1) for f in declared_flags()], ids=case_id)
def test_model_built_from_a_namespace_refuses_a_value_outside(parsed, case):
    """A Namespace whose value bypassed the parser (--model-overrides, the hub's keyword arguments, a checkpoint's
    args), of the right type or not."""
    flag, value = case
    args, task = parsed
    args = copy.deepcopy(args)
    setattr(args, flag.name, value)
    with pytest.raises(FusionError) as e:
        task.build_model(args)
    check_refusal(str(e.value), flag, value)

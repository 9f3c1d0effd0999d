"""The command-line parsers' shared helpers: the --help description, help texts as sentences, fairseq-generate's
options.
"""
import argparse


def description_of(doc):
    """A command's --help description: the first paragraph of its module docstring, on one line."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def as_sentence(text):
    """``text`` capitalized and ended with a full stop (for help texts of fairseq's own options)."""
    text = " ".join((text or "").split())
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!" else text + "."


def add_generation_args(parser):
    """fairseq-generate's generation options (GenerationConfig) in their own group, help texts as sentences."""
    from fairseq.dataclass.configs import GenerationConfig
    from fairseq.dataclass.utils import gen_parser_from_dataclass

    group = parser.add_argument_group("generation (fairseq-generate's options)")
    gen_parser_from_dataclass(group, GenerationConfig())
    for action in group._group_actions:
        if action.help not in (None, argparse.SUPPRESS):
            action.help = as_sentence(action.help)
    return group

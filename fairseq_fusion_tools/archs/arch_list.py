"""fusion-archs without arguments: every fusion_transformer arch with its paper, equations, the flags its preset sets
and its notes (text, markdown: the README's table, JSON); the text helpers the other views share."""
import json
import shlex
import textwrap

from fairseq_fusion import fusion_options
from .. import data_paths
from fairseq_fusion.models import catalog

HELP_HINT = "fairseq-train DATA --user-dir {user_dir} --arch {arch} --help lists them too, under the same titles."


def user_dir():
    """``--user-dir``'s value that works from any directory: the plugin's absolute folder (``data_paths.PLUGIN_DIR``,
    what ``fusion-user-dir`` prints), quoted for a shell where it needs to be."""
    return shlex.quote(data_paths.PLUGIN_DIR)


def arch_record(arch):
    entry = catalog.info(arch)
    return {"arch": arch, "paper": entry.paper, "equations": entry.equations, "key_flags": entry.key_flags,
            "sets": catalog.preset_flags(arch), "criterion": fusion_options.default_criterion(arch),
            "file": catalog.preset_file(arch)}


def sets_text(flags):
    return " ".join(catalog.flag_text(k, v) for k, v in flags.items()) or "nothing (every technique off)"


def fill(text, first="", rest="", width=110):
    return textwrap.fill(text, width=width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def cell(value):
    """A markdown table cell: a | inside (e.g. --layer-aggregation iterative|hierarchical) escaped."""
    return str(value).replace("|", "\\|")


def wrapped(label, text):
    return fill(text, f"  {label:<11}", " " * 13)


def arch_lines(record):
    lines = [record["arch"], wrapped("paper:", record["paper"]), wrapped("equations:", record["equations"]),
             wrapped("sets:", sets_text(record["sets"])), wrapped("notes:", record["key_flags"])]
    if record["criterion"] != "label_smoothed_cross_entropy":
        lines.append(wrapped("criterion:", record["criterion"]))
    return lines


def list_archs(fmt):
    if fmt == "markdown":
        return catalog.readme_table()
    records = [arch_record(a) for a in catalog.fusion_archs()]
    if fmt == "json":
        return json.dumps(records, indent=1, ensure_ascii=False)
    lines = []
    for record in records:
        lines += arch_lines(record) + [""]
    lines.append(fill("\"sets\" is what the preset changes from fusion_transformer (computed); \"notes\" is the "
                      "README's key-flags column. fusion-archs ARCH lists every technique flag of ARCH; "
                      + HELP_HINT.format(arch="ARCH", user_dir=user_dir())))
    return "\n".join(lines)

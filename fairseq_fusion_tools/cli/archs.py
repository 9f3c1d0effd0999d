"""fusion-archs: the named architectures, the technique flags of each, and which techniques combine.

  fusion-archs                      every fusion_transformer arch: paper, equations, the flags it sets
  fusion-archs ARCH                 every technique flag a user can add to ARCH, grouped by technique
  fusion-archs --conflicts          which techniques combine and which refuse each other, with the reason
  fusion-archs --readme README.md   rewrite the README's architecture table (what --format markdown prints)

The flags an arch sets are computed (its preset against fusion_transformer's); paper, equations and notes are
declared with @describe next to each preset (fairseq_fusion/models/archs_*.py). fairseq-train shows the technique
flags under their technique titles only when it knows the model: fairseq-train --user-dir $(fusion-user-dir) --arch
ARCH --help. The commands it prints name the plugin by its absolute folder, which works from any directory.
"""
import argparse
import difflib
import json
import os
import shlex
import shutil
import tempfile
import textwrap

from fairseq_fusion import fusion_options
from .. import data_paths
from fairseq_fusion_tools.user_files import fail
from fairseq_fusion.models import catalog, conflicts

TYPE_NAMES = {bool: "[BOOL]", int: "INT", float: "FLOAT", str: "STR"}
HELP_HINT = "fairseq-train DATA --user-dir {user_dir} --arch {arch} --help lists them too, under the same titles."


def user_dir():
    """``--user-dir``'s value that works from any directory: the plugin's absolute folder (``data_paths.PLUGIN_DIR``,
    what ``fusion-user-dir`` prints), quoted for a shell where it needs to be."""
    return shlex.quote(data_paths.PLUGIN_DIR)


def get_parser():
    p = argparse.ArgumentParser(prog="fusion-archs", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2])
    p.add_argument("arch", nargs="?", help="A fusion_transformer arch: list every technique flag a user can add "
                                           "to it, with the value the arch sets.")
    p.add_argument("--conflicts", action="store_true",
                   help="Show which pairs of techniques combine and which refuse each other, with the reason "
                        "(the seams they claim; the tests build every pair as a tiny model and find the same).")
    p.add_argument("--format", choices=["text", "markdown", "json"], default="text",
                   help="Output format (default: text). The markdown of the arch list is the README's table.")
    p.add_argument("--readme", metavar="FILE",
                   help="Rewrite the architecture table between the ARCH TABLE markers of FILE (e.g. README.md).")
    return p


# --- the arch list --------------------------------------------------------------------------------------

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


# --- one arch's technique flags -------------------------------------------------------------------------

def flag_records(arch):
    args = catalog.preset_args(arch)
    groups = []
    for group in fusion_options.GROUPS:
        flags = [{
            "flag": fusion_options.option_name(f.name), "help": f.help, "choices": f.choices, "default": f.default,
            "value": getattr(args, f.name, None), "switch": f.switch, "type": TYPE_NAMES.get(f.type, "STR"),
            "requires": [fusion_options._describe(r) for r in f.requires],
        } for f in group.flags]
        on = any(f.switch and getattr(args, f.name, None) not in (None, f.default) for f in group.flags)
        groups.append({"title": group.title, "on": on, "flags": flags})
    return sorted(groups, key=lambda g: not g["on"])


def above(arch):
    """The arch whose row "as above" / "same" in ``arch``'s entry refers to (the one registered before it)."""
    archs = catalog.fusion_archs()
    i = archs.index(arch)
    return archs[i - 1] if i > 0 else None


def show_arch(arch, fmt):
    record, groups = arch_record(arch), flag_records(arch)
    if fmt == "json":
        return json.dumps({**record, "above": above(arch), "groups": groups}, indent=1, ensure_ascii=False)
    intro = (f"Technique flags of {arch}: add any to fairseq-train DATA --user-dir {user_dir()} --arch {arch}. "
             f"\"value\" is what {arch} sets, \"default\" the flag's off value, \"needs\" the technique "
             f"the flag configures; the techniques {arch} turns on come first. " + HELP_HINT.format(arch=arch, user_dir=user_dir()))
    refers = any(t.startswith(("as above", "same")) for t in (record["equations"], record["key_flags"], record["paper"]))
    if fmt == "markdown":
        lines = [f"## `{arch}`", "", f"- paper: {record['paper']}", f"- equations: {record['equations']}",
                 f"- sets: {sets_text(record['sets'])}", f"- notes: {record['key_flags']}"]
        if refers:
            lines.append(f"- above: `{above(arch)}`")
        lines += ["", intro]
        for g in groups:
            lines += ["", f"### {g['title']} ({'on' if g['on'] else 'off'})", "",
                      "| flag | value | default | choices | needs | help |", "|---|---|---|---|---|---|"]
            for f in g["flags"]:
                needs = "switch" if f["switch"] else " or ".join(f"`{r}`" for r in f["requires"])
                choices = ", ".join(map(str, f["choices"])) if f["choices"] else ""
                cells = [f"`{f['flag']}`", f["value"], f["default"], choices, needs, f["help"]]
                lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
        return "\n".join(lines)
    lines = [f"{arch} ({record['file']})"] + arch_lines(record)[1:]
    if refers:
        lines.append(wrapped("above:", f"\"as above\" / \"same\" refer to {above(arch)}"))
    lines += ["", fill(intro)]
    for g in groups:
        lines += ["", f"{g['title']}: {'on' if g['on'] else 'off'}"]
        for f in g["flags"]:
            name = f["flag"] + " " + ("{" + ",".join(map(str, f["choices"])) + "}" if f["choices"] else f["type"])
            needs = "switch" if f["switch"] else "needs " + " or ".join(f["requires"])
            lines.append(f"  {name}   value: {f['value']}   default: {f['default']}   {needs}")
            lines.append(fill(f["help"], " " * 6, " " * 6))
    return "\n".join(lines)


# --- which techniques combine ---------------------------------------------------------------------------

def show_conflicts(fmt):
    tried, untried, pairs = conflicts.pairs()
    refused = [p for p in pairs if p.refusal]
    if fmt == "json":
        return json.dumps({
            "tiny_model": conflicts.TINY, "settings": [s.text() for s in tried],
            "not_tried": [catalog.flag_text(n, True) for n in untried],
            "pairs": [{"a": p.a.text(), "b": p.b.text(), "combine": p.refusal is None, "refusal": p.refusal}
                      for p in pairs],
        }, indent=1, ensure_ascii=False)
    refuses = {s: [] for s in tried}
    for p in refused:
        refuses[p.a].append(p.b.text())
        refuses[p.b].append(p.a.text())
    t = conflicts.TINY
    head = (f"Every pair of technique settings (a switch with a value a preset gives it), judged by the seams the "
            f"techniques claim (two claims on one seam refuse each other unless both extend it; the tests build each "
            f"pair as a tiny fusion_transformer, d={t['encoder_embed_dim']}, FFN {t['encoder_ffn_embed_dim']}, "
            f"{t['encoder_layers']}+{t['decoder_layers']} layers, and find the same): {len(pairs)} pairs, "
            f"{len(refused)} refused, {len(pairs) - len(refused)} combine.")
    combines = {s: "all but " + ", ".join(refuses[s]) if refuses[s] else "all" for s in tried}
    not_tried = f"Not tried (no preset turns it on): {', '.join(catalog.flag_text(n, True) for n in untried)}."
    if fmt == "markdown":
        lines = [head, "", "| refused | with | why |", "|---|---|---|"]
        lines += [f"| `{p.a.text()}` | `{p.b.text()}` | {cell(p.refusal)} |" for p in refused]
        lines += ["", "| setting | combines with the other settings |", "|---|---|"]
        lines += [f"| `{s.text()}` | {combines[s]} |" for s in tried]
        return "\n".join(lines + (["", not_tried] if untried else []))
    lines = [fill(head), "", "Refused:"]
    for p in refused:
        lines += [f"  {p.a.text()} + {p.b.text()}", fill(p.refusal, " " * 6, " " * 6)]
    lines += ["", "Combines with the other settings:"]
    lines += [fill(combines[s], f"  {s.text()}: ", " " * 6) for s in tried]
    return "\n".join(lines + (["", not_tried] if untried else []))


# --- the README block -----------------------------------------------------------------------------------

def update_readme(path, block):
    """Replace what stands between the ARCH TABLE markers of ``path`` with ``block`` (a whole new file, or nothing)."""
    if not os.path.isfile(path):
        fail(f"--readme {path}: no such file")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    begin, end = catalog.README_BEGIN, catalog.README_END
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        fail(f"--readme {path}: expected one '{begin}' line followed by one '{end}' line")
    head, rest = text.split(begin)
    tail = rest.split(end)[1]
    folder = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder, delete=False, suffix=".tmp") as f:
        try:
            f.write(head + begin + "\n" + block + "\n" + end + tail)
        except BaseException:
            os.unlink(f.name)
            raise
    shutil.copymode(path, f.name)  # the temporary file is private (0600)
    os.replace(f.name, path)


def unknown_arch(arch):
    archs = catalog.fusion_archs()
    nearest = difflib.get_close_matches(arch, archs, n=3, cutoff=0.0)
    fail(f"{arch}: not a fusion_transformer arch; nearest: {', '.join(nearest)} (fusion-archs lists all {len(archs)})")


def main(args):
    if args.readme and (args.arch or args.conflicts):
        fail("--readme writes the arch list: give it without ARCH and --conflicts")
    if args.arch and args.conflicts:
        fail("ARCH and --conflicts: give one of them")
    if args.arch and args.arch not in catalog.fusion_archs():
        unknown_arch(args.arch)
    if args.readme:
        update_readme(args.readme, catalog.readme_table())
        print(f"fusion-archs: wrote the table of {len(catalog.fusion_archs())} archs into {args.readme}")
    elif args.conflicts:
        print(show_conflicts(args.format))
    elif args.arch:
        print(show_arch(args.arch, args.format))
    else:
        print(list_archs(args.format))


def cli_main():
    main(get_parser().parse_args())


if __name__ == "__main__":
    cli_main()

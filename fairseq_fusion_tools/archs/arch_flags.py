"""fusion-archs ARCH: every technique flag a user can add to ARCH, grouped by technique, with the value the arch
sets.
"""
import json

from fairseq_fusion import fusion_options
from .arch_list import HELP_HINT, arch_lines, arch_record, cell, fill, sets_text, user_dir, wrapped
from fairseq_fusion.models import catalog

TYPE_NAMES = {bool: "[BOOL]", int: "INT", float: "FLOAT", str: "STR"}


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

"""fusion-archs --conflicts: which pairs of techniques combine and which refuse each other, with the reason."""
import json

from .arch_list import cell, fill
from fairseq_fusion.models import catalog, conflicts

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

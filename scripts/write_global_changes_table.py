"""Rewrite ARCHITECTURE.md's table of the plugin's changes to fairseq (``fairseq_fusion.global_changes.table()``,
between its two markers; tests/test_global_changes.py checks the two agree). Usage: python scripts/write_global_changes_table.py"""
import os

from fairseq_fusion import global_changes

BEGIN, END = "<!-- global changes: global_changes.table() -->\n", "<!-- end of global changes -->\n"
PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ARCHITECTURE.md")

with open(PATH, encoding="utf-8") as f:
    text = f.read()
start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
with open(PATH, "w", encoding="utf-8") as f:
    f.write(text[:start] + global_changes.table() + text[end:])
print(f"{PATH}: the table of {len(global_changes.CHANGES) + len(global_changes.TOOLS)} changes written")

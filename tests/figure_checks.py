"""Checks of a matplotlib figure as it is saved: its title names the inputs, and no two texts overlap.

`overlapping_texts(fig)` renders the figure and compares the window extents (pixels) of every visible text: titles,
suptitle, axis labels, tick labels, offset texts, legend texts and titles, colorbar labels, texts drawn in the axes.
"""
import itertools

import matplotlib

matplotlib.use("Agg")
from matplotlib.text import Text  # noqa: E402


def _shown(text):
    return isinstance(text, Text) and text.get_visible() and text.get_text().strip() != ""


def visible_texts(fig):
    """Every text the saved figure shows (tick labels only of the ticks in view)."""
    texts = [fig._suptitle, fig._supxlabel, fig._supylabel, *fig.texts]
    for legend in fig.legends:
        texts += [legend.get_title(), *legend.get_texts()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [ax.title, ax._left_title, ax._right_title, *ax.texts]
        if ax.axison:
            for axis in (ax.xaxis, ax.yaxis):
                texts += [axis.label, axis.get_offset_text()]
                for tick in axis._update_ticks():  # the ticks drawn: those in view
                    texts += [tick.label1, tick.label2] if tick.get_visible() else []
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            texts += [legend.get_title(), *legend.get_texts()]
    unique = {id(t): t for t in texts if _shown(t)}  # the suptitle is also one of fig.texts
    return list(unique.values())


def overlapping_texts(fig, tolerance=1.0):
    """Pairs ``(text a, text b)`` of visible texts whose rendered boxes overlap by more than ``tolerance`` pixels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in visible_texts(fig)]
    found = []
    for (ta, a), (tb, b) in itertools.combinations(boxes, 2):
        dx = min(a.x1, b.x1) - max(a.x0, b.x0)
        dy = min(a.y1, b.y1) - max(a.y0, b.y0)
        if dx > tolerance and dy > tolerance:
            found.append((ta, tb))
    return found


def assert_readable(fig, *names):
    """The figure's title (suptitle, or the title of its only axes) names each of ``names``; no texts overlap."""
    titles = [fig._suptitle.get_text() if fig._suptitle is not None else ""]
    titles += [ax.get_title() for ax in fig.axes]
    title = " ".join(titles)
    missing = [n for n in names if n not in title.replace("\n", " ") and n not in title.replace("\n", "")]  # wrapped
    assert not missing, f"the figure's titles {titles} do not name {missing}"
    overlaps = overlapping_texts(fig)
    assert not overlaps, f"{len(overlaps)} overlapping texts, e.g. {overlaps[:5]}"

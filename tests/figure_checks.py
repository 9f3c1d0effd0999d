"""Checks of a matplotlib figure as it is saved: its title names the inputs, no two texts overlap; read back from its
artists: overlaid lines told apart (`assert_distinct_lines`), whole-number layer ticks (`assert_integer_ticks`), the
colour a region shows (`rendered_colour`).

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


def legend_handles(fig):
    """label -> handle of every legend entry of the figure (figure legends and the axes' legends)."""
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    return {text.get_text(): handle for legend in legends for handle, text in zip(legend.legend_handles, legend.get_texts())}


def _style(line):
    return matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()


def assert_distinct_lines(fig, labels):
    """Each of ``labels`` (the overlaid checkpoints) has a legend entry of its own (colour, line style), the pair no
    other label has, and every line drawn with that label has its legend entry's colour and line style."""
    handles = legend_handles(fig)
    missing = [label for label in labels if label not in handles]
    assert not missing, f"no legend entry for {missing}; entries: {list(handles)}"
    styles = {label: _style(handles[label]) for label in labels}
    assert len(set(styles.values())) == len(labels), f"legend entries share a colour and line style: {styles}"
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_label() in styles:
                assert _style(line) == styles[line.get_label()], f"{line.get_label()}: drawn {_style(line)}, legend {styles[line.get_label()]}"


def layer_axes(fig):
    """The axes whose x axis counts layers: those labelled "... layer ...", and the panels that share their x axis."""
    labelled = [ax for ax in fig.axes if ax.axison and "layer" in ax.get_xlabel()]
    return list({id(s): s for ax in labelled for s in ax.get_shared_x_axes().get_siblings(ax)}.values())


def shown_tick_labels(ax, axis="x", draw=True):
    """The tick labels drawn on ``axis`` (ticks in view). ``draw=False``: the figure was drawn as it stands (one draw
    lays out every panel; reading ticks marks it stale, so a draw per panel would redo the layout each time)."""
    if draw:
        ax.figure.canvas.draw()
    return [tick.label1.get_text() for tick in getattr(ax, axis + "axis")._update_ticks() if tick.get_visible()]


def assert_integer_ticks(ax, axis="x", words=("emb",), name="", draw=True):
    """Every tick label of ``axis`` is a whole number (or one of ``words``: the embedding layer)."""
    import re

    labels = shown_tick_labels(ax, axis, draw)
    assert labels, f"no ticks on the {axis} axis of {ax.get_title()!r}"
    bad = [t for t in labels if not re.fullmatch(r"[−-]?\d+", t) and t not in words]
    assert not bad, f"{name} {ax.get_xlabel() or ax.get_title()!r}: tick labels {labels} are not whole numbers"


def rendered_colour(ax, x0, y0, x1, y1):
    """The mean RGB colour the saved figure shows in the data rectangle (x0, y0)-(x1, y1) of ``ax``."""
    import numpy as np

    fig = ax.figure
    fig.canvas.draw()
    image = np.asarray(fig.canvas.buffer_rgba())[..., :3] / 255.0
    (px0, py0), (px1, py1) = ax.transData.transform([(x0, y0), (x1, y1)])
    height = image.shape[0]
    rows = slice(int(height - max(py0, py1)), int(height - min(py0, py1)))
    cols = slice(int(min(px0, px1)), int(max(px0, px1)))
    return image[rows, cols].reshape(-1, 3).mean(0)

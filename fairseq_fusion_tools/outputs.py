"""What every tool's results share: its ``--out`` claimed (OUT.lock), OUT.json and OUT.png written atomically, and the
figures' common parts (the layout, the title, overlaid checkpoints told apart, integer axes, the heatmap with its n/a
cells). Shared by the scorers, the analyses and the comparison; imports neither torch nor fairseq.
"""
import numpy as np

from . import atomic_files


def locked(args):
    """Claim the command's ``--out`` (OUT.lock, held until the process exits): a second command
    writing the same OUT while this one runs is refused. Every analysis command's ``cli_main`` calls
    this on its parsed arguments; returns them."""
    if getattr(args, "out", None):
        atomic_files.claim(args.out + ".lock", f"--out {args.out}")
    return args


def write_outputs(out_prefix: str, data: dict, fig=None):
    """Write OUT.json (and OUT.png when a matplotlib figure is given), each atomically; returns the paths."""
    paths = [out_prefix + ".json"]
    atomic_files.write_json(paths[0], data)
    if fig is not None:
        paths.append(out_prefix + ".png")
        import matplotlib.pyplot as plt

        try:
            atomic_files.save_figure(fig, paths[1], dpi=120, bbox_inches="tight")
        finally:
            plt.close(fig)
    for p in paths:
        print(f"| wrote {p}")
    return paths


def new_figure(*args, **kwargs):
    """``plt.subplots`` with matplotlib's constrained layout (titles, labels and legends kept apart)."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)  # fairseq's root logger is verbose
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kwargs.setdefault("layout", "constrained")
    return plt.subplots(*args, **kwargs)


def figure_title(fig, title, **kwargs):
    """The figure's suptitle (what it shows, of which checkpoints or inputs), wrapped to the figure's width."""
    import textwrap

    width = max(40, int(fig.get_figwidth() * 120 / kwargs.get("fontsize", 10)))
    fig.suptitle("\n".join(textwrap.wrap(title, width, break_on_hyphens=False)), **kwargs)
    return fig


NARROW = 0.05  # a y axis spanning less than this is marked: noise of 0.002 drawn over the whole height looks like structure


def mark_narrow_range(ax, minimum=NARROW):
    """Where the y axis spans less than ``minimum`` (matplotlib zooms to the data), say so in its label with the span;
    returns whether it did. Call after the data and any shared limits are set."""
    lo, hi = ax.get_ylim()
    if hi - lo >= minimum:
        return False
    ax.set_ylabel(f"{ax.get_ylabel()}\n(axis spans only {hi - lo:.2g})".strip())
    return True


def share_range(axes):
    """One y range for panels whose values compare (the union of theirs), so a panel is not zoomed alone."""
    axes = [ax for ax in axes if ax.get_visible() and ax.axison]
    if not axes:
        return None
    limits = [ax.get_ylim() for ax in axes]
    lo, hi = min(l for l, _ in limits), max(h for _, h in limits)
    for ax in axes:
        ax.set_ylim(lo, hi)
    return lo, hi


LINESTYLES = ("-", "--", ":", "-.")


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def checkpoint_styles(n):
    """Line properties that tell ``n`` overlaid checkpoints apart, in colour and in black and white: each its own
    colour, line style and marker (matplotlib's ten colours; (colour, line style) repeats only after 20)."""
    return [{"color": f"C{i % 10}", "linestyle": LINESTYLES[i % len(LINESTYLES)], "marker": MARKERS[i % len(MARKERS)]}
            for i in range(n)]


def integer_axis(ax, axis="x"):
    """Ticks at whole numbers only (a layer, a bin): matplotlib's default puts 1.25, 1.5 between two layers."""
    from matplotlib.ticker import MaxNLocator

    getattr(ax, axis + "axis").set_major_locator(MaxNLocator(integer=True))
    return ax


NA_COLOUR = "lightgrey"


def heatmap(ax, grid, cmap, vmin=None, vmax=None, fmt="{:.3f}", dark_above=None, **imshow_kwargs):
    """``grid`` (rows x columns, NaN = n/a) drawn with its values written in the cells; an n/a cell is grey, hatched
    and labelled "n/a", apart from every value's colour (imshow would leave it blank: the colour of 0 in most maps).
    Values above ``dark_above`` are written in white. Returns the image (for a colorbar)."""
    import matplotlib
    from matplotlib.patches import Rectangle

    grid = np.asarray(grid, dtype=float)
    cmap = matplotlib.colormaps[cmap].with_extremes(bad=NA_COLOUR)
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", **imshow_kwargs)
    for (row, col), value in np.ndenumerate(grid):
        if np.isnan(value):
            ax.add_patch(Rectangle((col - 0.5, row - 0.5), 1, 1, fill=False, hatch="//", edgecolor="grey", linewidth=0,
                                   gid="n/a"))
            ax.text(col, row, "n/a", ha="center", va="center", color="dimgrey", fontsize=9)
        elif fmt:
            dark = dark_above is not None and value > dark_above
            ax.text(col, row, fmt.format(value), ha="center", va="center", color="white" if dark else "black", fontsize=9)
    return image

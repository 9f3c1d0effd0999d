"""``--fusion-log-internals`` in TensorBoard: at each validation, the layer-attention weights as an image.

fairseq's TensorBoard writer takes scalars only; the validation scalars ``fusion/layer_attention/map_dec{m}_enc{n}``
(decoder layer m's weight on encoder layer n, logged at validation) are drawn as one grayscale image beside them:
a row per attending decoder layer (top: the lowest), a column per encoder layer (left: the word embeddings), each
cell 16 pixels, brightness = the weight on an absolute scale (white = 1), so two validations compare.
"""
import re

import numpy as np

MAP = re.compile(r"^fusion/layer_attention/map_dec(\d+)_enc(\d+)$")
IMAGE_TAG = "fusion/layer_attention/map"
CELL = 16  # pixels per weight


def layer_map(stats):
    """The weights of ``stats``' map scalars as a decoder layer x encoder layer array, or None without any."""
    cells = {}
    for key, value in stats.items():
        found = MAP.match(key)
        if found:
            cells[int(found.group(1)), int(found.group(2))] = float(value)
    if not cells:
        return None
    rows, cols = sorted({r for r, _ in cells}), sorted({c for _, c in cells})
    return np.array([[cells.get((r, c), 0.0) for c in cols] for r in rows], dtype=np.float32)


def _with_layer_maps(log_to_tensorboard):
    """fairseq's ``TensorboardProgressBarWrapper._log_to_tensorboard``, then the map's image where the stats hold it."""
    def wrapper(self, stats, tag=None, step=None):
        log_to_tensorboard(self, stats, tag, step)
        grid = layer_map(stats)
        writer = self._writer(tag or "") if grid is not None else None
        if writer is None:
            return
        pixels = np.kron(np.clip(grid, 0, 1), np.ones((CELL, CELL), dtype=np.float32))
        writer.add_image(IMAGE_TAG, pixels[None], stats["num_updates"] if step is None else step)
        writer.flush()

    wrapper.patched_by_fairseq_fusion = True
    return wrapper

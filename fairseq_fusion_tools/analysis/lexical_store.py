"""Sub-word positions of one split on disk, for probes that must not hold a corpus in RAM.

Per side: ``tokens`` (int64), ``category`` (int8 POS category, -1 when untagged) and one
float16 N x C file per layer (``layer{i}``), appended batch by batch. Reading goes through
ordinary file reads of contiguous chunks (no memory map, so pages read do not stay in the
process' resident memory); training shuffles the chunk order and the rows within a chunk.
"""
import os
import shutil
from typing import Iterator, List, Sequence

import numpy as np
import torch

from .. import atomic_files


class StateStore:
    def __init__(self, directory):
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self.meta = {}  # side -> {"n": rows, "dim": C, "layers": L + 1}
        self._files = {}

    def _path(self, side, name):
        return os.path.join(self.dir, f"{side}.{name}")

    def _write(self, side, name, array):
        key = (side, name)
        if key not in self._files:
            self._files[key] = open(self._path(side, name), "wb")
        self._files[key].write(np.ascontiguousarray(array).tobytes())

    def append(self, side, tokens, layers: Sequence[torch.Tensor], category=None):
        n = int(tokens.numel())
        if n == 0:
            return
        m = self.meta.setdefault(side, {"n": 0, "dim": int(layers[0].size(-1)), "layers": len(layers)})
        self._write(side, "tokens", tokens.cpu().numpy().astype(np.int64))
        cat = np.full(n, -1, dtype=np.int8) if category is None else np.asarray(category, dtype=np.int8)
        self._write(side, "category", cat)
        for i, x in enumerate(layers):
            self._write(side, f"layer{i}", x.detach().to("cpu", torch.float16).numpy())
        m["n"] += n

    def close(self):
        for f in self._files.values():
            f.close()
        self._files = {}
        atomic_files.write_json(os.path.join(self.dir, "meta.json"), self.meta, indent=None)

    def size(self, side):
        return self.meta.get(side, {}).get("n", 0)

    def read(self, side, name, start, rows, dtype, width=1):
        count = rows * width
        a = np.fromfile(self._path(side, name), dtype=dtype, count=count, offset=start * width * np.dtype(dtype).itemsize)
        return a.reshape(rows, width) if width > 1 else a

    def chunks(self, side, layers: List[int], chunk_rows=16384, shuffle_seed=None) -> Iterator:
        """(tokens, categories, [float32 N x C per layer]) per chunk of rows; chunks and the rows
        within each chunk in a random order when ``shuffle_seed`` is given."""
        n, dim = self.size(side), self.meta[side]["dim"]
        starts = list(range(0, n, chunk_rows))
        g = np.random.default_rng(shuffle_seed)
        if shuffle_seed is not None:
            g.shuffle(starts)
        for start in starts:
            rows = min(chunk_rows, n - start)
            perm = g.permutation(rows) if shuffle_seed is not None else slice(None)
            tokens = torch.from_numpy(self.read(side, "tokens", start, rows, np.int64)[perm])
            cats = torch.from_numpy(self.read(side, "category", start, rows, np.int8)[perm].astype(np.int64))
            xs = [torch.from_numpy(self.read(side, f"layer{i}", start, rows, np.float16, dim)[perm].astype(np.float32))
                  for i in layers]
            yield tokens, cats, xs
            del tokens, cats, xs  # free this chunk before reading the next

    def remove(self):
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

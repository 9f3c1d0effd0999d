"""fusion-average-checkpoints's run: the newest N checkpoints of a folder, or the files given, averaged parameter by
parameter and written atomically.
"""
import collections
import os
import re

import torch

from .. import atomic_files, path_roles
from fairseq_fusion.guards import checkpoint_files
from fairseq_fusion.compat import checkpoint_safety
from fairseq_fusion.errors import FusionError
from fairseq_fusion_tools.user_files import fail


def last_n_checkpoints(path, n, upper_bound=None, kind="epoch"):
    """The newest ``n`` checkpoint files in directory ``path`` (checkpointN.pt or checkpoint_E_U.pt)."""
    pattern = re.compile(r"checkpoint(\d+)\.pt$" if kind == "epoch" else r"checkpoint_\d+_(\d+)\.pt$")
    found = []
    for name in os.listdir(path):
        m = pattern.match(name)
        if m and (upper_bound is None or int(m.group(1)) <= upper_bound):
            found.append((int(m.group(1)), os.path.join(path, name)))
    if len(found) < n:
        raise FusionError(f"found {len(found)} {kind} checkpoints in {path}, expected at least {n}")
    return [p for _, p in sorted(found, reverse=True)[:n]]


def average_checkpoints(paths):
    if not paths:
        raise FusionError("no checkpoints to average")
    checkpoint_safety.allow_fairseq_checkpoint_globals()
    sums, dtypes, keys, new_state = collections.OrderedDict(), {}, None, None
    for path in paths:
        state = checkpoint_files.read_checkpoint(torch.load, path, map_location="cpu", fairseq=True)
        params = state["model"]
        if keys is None:
            keys = list(params.keys())
        elif set(params) != set(keys):
            diff = sorted(set(params).symmetric_difference(keys))[:5]
            raise FusionError(f"{path} has other parameters than {paths[0]} (e.g. {diff}): not the same model")
        for k in keys:
            p = params[k]
            if k in sums and sums[k].shape != p.shape:
                raise FusionError(f"{path}: {k} has shape {tuple(p.shape)}, {paths[0]} has {tuple(sums[k].shape)}")
            dtypes[k] = p.dtype
            sums[k] = sums[k] + p.double() if k in sums else p.double().clone()
        new_state = state
    new_state["model"] = collections.OrderedDict((k, (v / len(paths)).to(dtypes[k])) for k, v in sums.items())
    return new_state


def write_average(paths, output):
    """The average of ``paths`` saved to ``output`` (replaced only once it is complete)."""
    state = average_checkpoints(paths)
    with atomic_files.replacing(output) as tmp:
        torch.save(state, tmp)


def main(args):
    paths = args.inputs
    n = args.num_update_checkpoints or args.num_epoch_checkpoints
    if n is not None:
        if len(paths) != 1 or not os.path.isdir(paths[0]):
            fail("--num-*-checkpoints needs exactly one directory in --inputs")
        kind = "update" if args.num_update_checkpoints else "epoch"
        paths = last_n_checkpoints(paths[0], n, args.checkpoint_upper_bound, kind)
        path_roles.read_from("--inputs", paths)  # --output one of them: refused before the averaging
    print("| averaging " + ", ".join(paths), flush=True)
    write_average(paths, args.output)
    print(f"| wrote {args.output}")

"""``--fusion-compile [BACKEND]``: the training forward of every ``fusion_transformer`` arch through ``torch.compile``.

A model option (``FusionTransformerModel.add_args``), so fairseq-train, fairseq-hydra-train (``model.fusion_compile``)
and every arch take it. The model's ``forward`` in training mode (``model.train()``: fairseq's ``train_step``) runs
``FusionTransformerModel.eager_forward`` compiled with dynamic shapes (``dynamic=True``: the batch and both lengths
are symbolic, so a new batch shape reuses the graph); everything else stays eager: validation (``model.eval()``),
generation (fairseq's generator calls the encoder and decoder, never ``forward``), the hub and the tools. Nothing is
wrapped: the compiled function is the class's, called with the model, so the module tree, parameter names and state
dicts are those of an eager model (no ``_orig_mod.`` prefix) and checkpoints load both ways; resuming may switch it on
or off (``resume_check``: it changes training, not the model).

Random numbers (dropout): inductor draws its own in its kernels by default (``--fusion-compile-random fused``: the
same distribution, reproducible from fairseq's per-update seed, other masks than eager's); ``--fusion-compile-random
eager`` makes it call torch's eager random ops (inductor's ``fallback_random``): eager's masks, so the eager run's
losses up to float rounding, at the cost of unfused random ops. The tracing backends always use eager's.

Activation checkpointing (the layers' non-reentrant checkpoint) is traced into the graph. ``BACKEND`` is one of
torch.compile's backends (default ``inductor``; ``aot_eager`` or ``eager`` trace without
generating code, the same numbers as eager: what the tests run on the CPU). The encoder and decoder of every arch
compile into one graph: what sizes tensors from data (the phrase segmentation) is computed before it by the encoder's
``eager_input_hooks`` (``docs/compile.md``).
"""
import contextlib
import functools
import logging
import time

from .errors import FusionError

logger = logging.getLogger(__name__)

OPTION = "--fusion-compile"
DEST = "fusion_compile"
DEFAULT_BACKEND = "inductor"
RANDOM_OPTION = "--fusion-compile-random"
RANDOM_DEST = "fusion_compile_random"
RANDOM_CHOICES = ("fused", "eager")
_COMPILED = {}  # (function, backend, random) -> compiled function (one per process, shared by the models)


def add_args(parser):
    parser.add_argument(
        OPTION, nargs="?", const=DEFAULT_BACKEND, default=None, metavar="BACKEND",
        help="compile the training forward with torch.compile, dynamic shapes (BACKEND: default inductor; aot_eager "
             "or eager trace only); validation, generation and checkpoints stay eager (docs/compile.md)")
    parser.add_argument(
        RANDOM_OPTION, choices=RANDOM_CHOICES, default=RANDOM_CHOICES[0],
        help="inductor's random numbers (dropout): fused (default: drawn in its kernels, other masks than eager's) or "
             "eager (torch's eager random ops: eager's masks and losses, unfused)")


def backend(args):
    """The backend ``args`` asks for, or None (off); an unknown backend is refused in one line. Fills in
    ``--fusion-compile-random``'s default where the args lack it (fairseq-hydra-train, older checkpoints)."""
    if getattr(args, RANDOM_DEST, None) is None:
        setattr(args, RANDOM_DEST, RANDOM_CHOICES[0])
    value = getattr(args, DEST, None)
    if value in (None, False, "", "none", "off", "false"):
        if random_mode(args) != RANDOM_CHOICES[0]:
            raise FusionError(f"{RANDOM_OPTION} {random_mode(args)}: only with {OPTION} (an eager run draws eager's "
                              "random numbers anyway)")
        return None
    if value is True or value in ("true", "on"):
        value = DEFAULT_BACKEND
    known = known_backends()
    if value not in known:
        raise FusionError(f"{OPTION} {value!r}: expected a torch.compile backend, one of {', '.join(sorted(known))}")
    return value


def known_backends():
    """The names ``torch.compile(backend=...)`` takes here."""
    import torch

    return torch._dynamo.list_backends(exclude_tags=())


def random_mode(args):
    """``--fusion-compile-random``: "fused" or "eager" (argparse checks the value)."""
    return getattr(args, RANDOM_DEST, None) or RANDOM_CHOICES[0]


def compiled(function, name, random="fused"):
    """``function`` (``FusionTransformerModel.eager_forward``) compiled for backend ``name``, once per process;
    ``random`` "eager": inductor calls torch's eager random ops (the tracing backends always do). Each size of the
    inputs is its own symbol: dynamo's duck sizing would equate two sizes that happen to be equal in the first batch
    (a target length and the phrase count, say) and recompile when a later batch tells them apart. The modules' float
    attributes (dropout probabilities, embedding scales) are constants: under ``dynamic=True`` dynamo makes each a
    symbol, specializes it on its first use, and then traces and compiles the whole forward a second time
    ("Restarting analysis due to ... _tensorify_python_scalars"), twice the compile time."""
    key = (function, name, random)
    if key not in _COMPILED:
        import torch
        from torch.fx.experimental import _config as fx_config

        options = {"fallback_random": True} if name == "inductor" and random == "eager" else None
        graph = torch.compile(function, dynamic=True, backend=name, options=options)

        first = [True]
        # torch < 2.5 has no dynamic floats (and no such option)
        floats = {"specialize_float": True} if hasattr(torch._dynamo.config, "specialize_float") else {}

        @contextlib.contextmanager
        def settings():
            with fx_config.patch(use_duck_shape=False), torch._dynamo.config.patch(**floats):
                yield

        @functools.wraps(function)
        def run(*args, **kwargs):
            if first[0]:  # the first call traces and compiles: a minute or more of silence otherwise
                first[0] = False
                logger.info(f"{OPTION} {name}: compiling the training forward (the first update waits for it)")
                start = time.perf_counter()
                with settings():
                    out = graph(*args, **kwargs)
                logger.info(f"{OPTION} {name}: compiled the training forward in {time.perf_counter() - start:.1f} s")
                return out
            with settings():
                return graph(*args, **kwargs)

        _COMPILED[key] = run
    return _COMPILED[key]


def is_compiling():
    import torch

    return torch.compiler.is_compiling()


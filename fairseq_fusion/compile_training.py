"""``--fusion-compile [BACKEND]``: the training forward of every ``fusion_transformer`` arch through ``torch.compile``.

A model option (``FusionTransformerModel.add_args``), so fairseq-train, fairseq-hydra-train (``model.fusion_compile``)
and every arch take it. The model's ``forward`` in training mode (``model.train()``: fairseq's ``train_step``) runs
``FusionTransformerModel.eager_forward`` compiled with dynamic shapes (``dynamic=True``: the batch and both lengths
are symbolic, so a new batch shape reuses the graph); everything else stays eager: validation (``model.eval()``),
generation (fairseq's generator calls the encoder and decoder, never ``forward``), the hub and the tools. Nothing is
wrapped: the compiled function is the class's, called with the model, so the module tree, parameter names and state
dicts are those of an eager model (no ``_orig_mod.`` prefix) and checkpoints load both ways; resuming may switch it on
or off (``resume_check``: it changes training, not the model).

Activation checkpointing (the layers' non-reentrant checkpoint) is traced into the graph. ``BACKEND`` is one of
torch.compile's backends (default ``inductor``; ``aot_eager`` or ``eager`` trace without
generating code, the same numbers as eager: what the tests run on the CPU). The encoder and decoder of every arch
compile into one graph: what sizes tensors from data (the phrase segmentation) is computed before it by the encoder's
``eager_input_hooks`` (``docs/compile.md``).
"""
from .errors import FusionError

OPTION = "--fusion-compile"
DEST = "fusion_compile"
DEFAULT_BACKEND = "inductor"
_COMPILED = {}  # (function, backend) -> compiled function (one per process, shared by the models)


def add_args(parser):
    parser.add_argument(
        OPTION, nargs="?", const=DEFAULT_BACKEND, default=None, metavar="BACKEND",
        help="compile the training forward with torch.compile, dynamic shapes (BACKEND: default inductor; aot_eager "
             "or eager trace only); validation, generation and checkpoints stay eager (docs/compile.md)")


def backend(args):
    """The backend ``args`` asks for, or None (off); an unknown backend is refused in one line."""
    value = getattr(args, DEST, None)
    if value in (None, False, "", "none", "off", "false"):
        return None
    if value is True or value in ("true", "on"):
        value = DEFAULT_BACKEND
    import torch

    known = torch._dynamo.list_backends(exclude_tags=())
    if value not in known:
        raise FusionError(f"{OPTION} {value!r}: expected a torch.compile backend, one of {', '.join(sorted(known))}")
    return value


def compiled(function, name):
    """``function`` (``FusionTransformerModel.eager_forward``) compiled for backend ``name``, once per process."""
    if (function, name) not in _COMPILED:
        import torch

        _COMPILED[function, name] = torch.compile(function, dynamic=True, backend=name)
    return _COMPILED[function, name]


def is_compiling():
    import torch

    return torch.compiler.is_compiling()


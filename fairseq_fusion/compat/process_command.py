"""Which command this process runs: a console script of fairseq's that loads the plugin with ``--user-dir``, or a
``fusion-*`` one, named by its program (``sys.argv[0]``) or by the module ``python -m`` ran. Read by the wiring (is
this a command-line run?) and by the command-line run's Ctrl-C line (which command stopped, a training or not)."""
import os
import sys

# fairseq's console scripts whose runs load the plugin with --user-dir, and their modules (python -m)
FAIRSEQ_COMMANDS = {"fairseq-train": "fairseq_cli.train", "fairseq-generate": "fairseq_cli.generate",
                    "fairseq-interactive": "fairseq_cli.interactive", "fairseq-validate": "fairseq_cli.validate",
                    "fairseq-hydra-train": "fairseq_cli.hydra_train", "fairseq-preprocess": "fairseq_cli.preprocess",
                    "fairseq-eval-lm": "fairseq_cli.eval_lm"}
TRAINING = ("fairseq-train", "fairseq-hydra-train")
# the fusion-* commands that need neither torch nor fairseq (the scorers, the training curve, the data fetch): their
# processes leave both unimported, as where neither is installed (compat/stack.py), and start 3-4 s sooner
TORCH_FREE = ("fusion-aer", "fusion-bleu-by-length", "fusion-fetch-data", "fusion-score-bleu", "fusion-score-m2",
              "fusion-score-rouge", "fusion-significance", "fusion-training-curve")


def command_name(argv=None, main_module=None):
    """The command this process runs (``fairseq-train``, ``fusion-archs``, ...); None in a program of the user's own.
    ``argv`` and ``main_module`` default to this process's ``sys.argv`` and ``__main__``."""
    argv = sys.argv if argv is None else argv
    main_module = sys.modules.get("__main__") if main_module is None else main_module
    prog = os.path.basename(argv[0]) if argv and argv[0] else ""
    if prog in FAIRSEQ_COMMANDS or prog.startswith("fusion-"):
        return prog
    spec = getattr(main_module, "__spec__", None)
    module = spec.name if spec is not None else ""
    for command, command_module in FAIRSEQ_COMMANDS.items():
        if module == command_module:
            return command
    if module.startswith("fairseq_fusion_tools.cli."):
        return "fusion-" + module.rsplit(".", 1)[1].replace("_", "-")
    return None

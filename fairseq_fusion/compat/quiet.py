"""Notices of fairseq's internals that a user of the plugin cannot act on, filtered one by one.

Each filter names the exact message (and, where the warning's location is fixed, its module);
nothing is silenced by category or globally, so every other warning still shows. Installed when
the plugin is imported: for ``fusion-*`` commands before fairseq is, for fairseq's commands with
``--user-dir`` before they build their config (fairseq-hydra-train composes its config before it
loads the plugin: hydra's own launch notices there stay).
"""
import logging
import warnings

# (category, message regex matched at the start, module regex or "" for any location): why
WARNINGS = [
    # fairseq 0.12's train step calls the deprecated spelling on every step (fairseq_task.py)
    (FutureWarning, r"`torch\.cuda\.amp\.autocast\(args\.\.\.\)` is deprecated", r"fairseq\."),
    # fairseq's iterators always ask for pinned memory; on a CPU-only machine torch says it is unused
    (UserWarning, r"'pin_memory' argument is set as true but no accelerator is found", r"torch\.utils\.data\.dataloader"),
    # fairseq's MultiheadAttention passes a bool padding mask with a float future mask to torch's attention
    (UserWarning, r"Support for mismatched key_padding_mask and attn_mask is deprecated", r"torch\.nn\.functional"),
    # fairseq's argparse -> config conversion (every fairseq command, every checkpoint load) uses hydra's old API
    (UserWarning, r"hydra\.experimental\.(initialize|compose)\(\) is no longer experimental", r"hydra\."),
    (UserWarning, r"\nThe version_base parameter is not specified", r"hydra\."),
    (UserWarning, r"\nThe strict flag in the compose API is deprecated", r"hydra\."),
    (UserWarning, r"In 'config': Usage of deprecated keyword in package header '# @package _group_'", r"hydra\."),
    # fairseq's NanDetector (the re-run of a diverged training step) registers torch's deprecated non-full backward
    # hooks, once per module; the step's one line follows (guards/stop_conditions.py)
    (FutureWarning, r"Using non-full backward hooks on a Module that does not return a single Tensor",
     r"torch\.nn\.modules\.module"),
    # fairseq's config.yaml shares its name with fairseq's schema; hydra attributes this to whichever frame
    # called fairseq's conversion (fairseq, a test, a fusion-* tool), so it is matched by its message alone
    (UserWarning, r"\n'config' is validated against ConfigStore schema with the same name", ""),
]

# (logger, message substring): fairseq.tasks imports its speech tasks, which log this on every import when
# tensorboardX is missing (pyproject.toml declares it; fairseq's own commands import fairseq.tasks before the plugin)
LOG_MESSAGES = [("fairseq.tasks.text_to_speech", "Please install tensorboardX")]


class DropMessage(logging.Filter):
    def __init__(self, text):
        super().__init__()
        self.text = text

    def filter(self, record):
        return self.text not in record.getMessage()


def install():
    filter_warnings()
    filter_log_messages()


def filter_warnings():
    for category, message, module in WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category, module=module)


def filter_log_messages():
    for name, text in LOG_MESSAGES:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropMessage) and f.text == text for f in logger.filters):
            logger.addFilter(DropMessage(text))

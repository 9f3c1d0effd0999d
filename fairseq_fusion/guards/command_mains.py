"""fairseq's command functions that several checks concern, each wrapped once (``global_changes.py``).

- ``distributed_utils.call_main``: a missing batch size (``entry_checks``) and a refusal in a spawned rank
  (``save_dir_lock``) as one line;
- fairseq-generate's ``main``: its batch and search settings, ``--results-path`` written whole (``command_paths``)
  and the input's warnings (``input_checks``);
- fairseq-interactive's ``main``: the same, with its ``--input`` file and line reader;
- fairseq-preprocess's ``main``: its options' domains (``option_domains``; fairseq-train's, -generate's, -interactive's
  and -validate's are checked where ``parse_args_and_arch`` returns, fairseq-hydra-train's configuration where
  ``save_dir_lock`` sees it whole).
"""
import functools
import sys

from . import command_paths, entry_checks, input_checks, option_checks, save_dir_lock
from ..compat.cli_hooks import wrap_main

MARKER = "patched_by_fairseq_fusion"


def checked_call_main(call_main):
    @functools.wraps(call_main)
    def wrapper(cfg, main, **kwargs):
        try:
            return call_main(cfg, main, **kwargs)
        except Exception as e:
            refusal = entry_checks.batch_size_refusal(e) or save_dir_lock.spawned_refusal(e)
            if refusal is not None:
                raise refusal from None
            raise

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _generate(main, cfg):
    return command_paths._generate_checked(lambda c: input_checks._generate_reported(main, c), cfg)


def _interactive(main, cfg):
    return command_paths._interactive_checked(lambda c: input_checks._interactive_reported(main, c), cfg)


def patch_generate(module):
    wrap_main(module, MARKER, _generate)


def patch_interactive(module):
    wrap_main(module, MARKER, _interactive)
    module.buffered_read = input_checks.read_lines


def patch_preprocess(module):
    """fairseq-preprocess's ``main(args)``: the options' domains first."""
    if getattr(module.main, MARKER, False):
        return
    main = module.main

    @functools.wraps(main)
    def checked(args):
        option_checks.check_namespace(args, argv=sys.argv[1:])
        return main(args)

    setattr(checked, MARKER, True)
    module.main = checked

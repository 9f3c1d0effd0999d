"""The folders and files fairseq's commands write or read, refused in one line naming the flag when unusable.

fairseq raises ``NotADirectoryError``, ``PermissionError`` or ``FileNotFoundError`` tracebacks for them, or a bare
``FileNotFoundError("Dataset not found: SPLIT (DATA)")`` that names no flag:

- ``--save-dir`` (fairseq-train: ``checkpoint_utils.verify_checkpoint_directory``) under a regular file or not
  writable;
- ``--results-path`` (fairseq-generate) under a regular file; its ``generate-SUBSET.txt`` is written whole, when the
  run has finished (a refused or failed run leaves an earlier one as it was);
- ``--input`` (fairseq-interactive) missing, a folder, or no text (``text_files.check_text``: empty, blank-only,
  NUL bytes, gzip);
- a split a translation data folder lacks (``--train-subset``, ``--valid-subset``, ``--gen-subset``), or has
  one file of its ``.idx`` / ``.bin`` pair of (``data_folders.check_split``);
- a ``--restore-file`` that does not exist (fairseq trains from scratch without a word), a missing
  ``--finetune-from-model`` or both given (fairseq's ``ValueError`` tracebacks);
- fairseq-preprocess's binarized splits (``SPLIT.SRC-TGT.LANG.bin`` / ``.idx`` in ``--destdir``, alignments too): each
  written under a temporary name and renamed into place when whole, so an interrupted or failed run leaves no cut
  ``.bin`` beside an ``.idx`` (nor over an earlier run's split), and no workers' part files.

And ``--user-dir`` naming this plugin's folder by another path (a link to it, ``..`` in it) in a process that has
imported the plugin already (a notebook, the hub, fairseq's ``main`` called in-process): the plugin, not the
"not globally unique" ``ImportError`` fairseq raises because it compares the spelling of the path.
"""
import errno
import functools
import glob
import os
import shutil
import tempfile

from . import data_folders
from .text_files import TextFileError, check_text
from ..errors import FusionError


def file_above(path):
    """``path`` itself or the nearest folder above it that exists and is not a folder, or None."""
    p = os.path.abspath(path)
    while p != os.path.dirname(p):
        if os.path.exists(p):
            return p if not os.path.isdir(p) else None
        p = os.path.dirname(p)
    return None


def check_output_folder(path, flag):
    """A folder a command creates and writes in: neither a file nor under one."""
    if path and file_above(path):
        raise FusionError(f"{flag} {path}: {file_above(path)} is a file; expected a folder")


def check_input_file(path, flag):
    if not path or path == "-":
        return
    if os.path.isdir(path):
        raise FusionError(f"{flag} {path}: is a folder; expected a text file (or - for stdin)")
    if not os.path.exists(path):
        raise FusionError(f"{flag} {path}: no such file; expected a text file (or - for stdin)")
    try:  # its lines that are not UTF-8 are warnings of the line reader (input_checks.read_lines)
        check_text(path, utf8=False, plain=True, lone_cr=False)
    except TextFileError as e:
        raise FusionError(f"{flag} {path}: {e.what}") from None


def translation_splits(folder, source, target):
    """The splits of a binarized translation folder (SPLIT.SRC-TGT.SRC.idx, either pair order)."""
    ends = (f".{source}-{target}.{source}.idx", f".{target}-{source}.{source}.idx")
    return sorted({name.split(".")[0] for name in os.listdir(folder) if name.endswith(ends)})


def _checked_save_dir(verify_checkpoint_directory):
    @functools.wraps(verify_checkpoint_directory)
    def wrapper(save_dir):
        check_output_folder(save_dir, "--save-dir")
        try:
            return verify_checkpoint_directory(save_dir)
        except OSError as e:
            if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            raise FusionError(f"--save-dir {save_dir}: cannot write in it ({e.strerror}); expected a folder this "
                              "user can write in") from None

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _checked_restore(load_checkpoint):
    @functools.wraps(load_checkpoint)
    def wrapper(cfg, trainer, **kwargs):
        finetune, last = cfg.finetune_from_model, os.path.join(cfg.save_dir, "checkpoint_last.pt")
        if cfg.restore_file != "checkpoint_last.pt":
            if finetune:
                raise FusionError(f"--restore-file {cfg.restore_file} and --finetune-from-model {finetune}: give "
                                  "one (--finetune-from-model resets the optimizer, meters and data loader itself)")
            path = cfg.restore_file.replace(".pt", (trainer.checkpoint_suffix or "") + ".pt")
            if not os.path.isfile(path):
                raise FusionError(f"--restore-file {path}: no such file; expected the checkpoint to start from "
                                  f"(without --restore-file, fairseq-train resumes {last} if it exists, else starts "
                                  "fresh)")
        elif finetune and not os.path.exists(last) and not os.path.isfile(finetune):
            raise FusionError(f"--finetune-from-model {finetune}: no such file; expected the checkpoint to fine-tune")
        return load_checkpoint(cfg, trainer, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _named_split(load_dataset):
    @functools.wraps(load_dataset)
    def wrapper(self, split, *args, **kwargs):
        try:
            return load_dataset(self, split, *args, **kwargs)
        except FileNotFoundError as e:
            if not str(e).startswith("Dataset not found: "):
                raise
            from fairseq import utils

            folder = utils.split_paths(self.cfg.data)[0]
            data_folders.check_split_pair(folder, split, self.cfg.source_lang, self.cfg.target_lang)  # one file of two
            found = translation_splits(folder, self.cfg.source_lang, self.cfg.target_lang)
            raise FusionError(
                f"split {split!r}: no such split of {self.cfg.source_lang}-{self.cfg.target_lang} in data folder "
                f"{folder}; it has {', '.join(found) or 'none'} (--train-subset, --valid-subset, --gen-subset)"
            ) from None

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _plugin_by_any_path(import_user_module):
    plugin = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # fairseq_fusion/, above guards/

    @functools.wraps(import_user_module)
    def wrapper(args):
        user_dir = getattr(args, "user_dir", None)
        if user_dir is not None and os.path.realpath(user_dir) == plugin:
            return None  # this plugin, imported already
        return import_user_module(args)

    return wrapper


def _generate_checked(main, cfg):
    from .entry_checks import checked_search

    return checked_search(cfg, lambda: _results_checked(main, cfg))


def _results_checked(main, cfg):
    results = cfg.common_eval.results_path
    check_output_folder(results, "--results-path")
    return main(cfg) if results is None else _written_when_finished(main, cfg, results)


def _written_when_finished(main, cfg, results):
    """fairseq-generate opens (and empties) RESULTS/generate-SUBSET.txt before it loads the model, so a refused or
    failed run left an empty or cut file, over an earlier run's. fairseq's main writes into a temporary folder inside
    RESULTS instead; the file is moved into place when it has finished (a folder it made is removed on a failure)."""
    made = not os.path.isdir(results)
    os.makedirs(results, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=".generate-", dir=results)
    name = f"generate-{cfg.dataset.gen_subset}.txt"
    cfg.common_eval.results_path = scratch
    try:
        out = main(cfg)
        os.replace(os.path.join(scratch, name), os.path.join(results, name))
        return out
    finally:
        cfg.common_eval.results_path = results
        shutil.rmtree(scratch, ignore_errors=True)
        if made and not os.listdir(results):
            os.rmdir(results)


def _interactive_checked(main, cfg):
    from .entry_checks import checked_search

    def run():
        check_input_file(cfg.interactive.input, "--input")
        return main(cfg)

    return checked_search(cfg, run)


def _binarized_whole(multiprocess_dataset):
    """``FileBinarizer.multiprocess_dataset`` (fairseq-preprocess, one split and language) into
    ``.OUTPUT.partial`` beside ``OUTPUT``: its ``.bin`` and ``.idx`` (and its workers' part files, PREFIX1.bin, ...)
    are written there and renamed to ``OUTPUT.bin`` / ``OUTPUT.idx`` when whole (Ctrl-C held back between the two
    renames); on any error or Ctrl-C its workers are stopped and its files removed, and an earlier split of that name
    stays as it was."""
    from .command_output import interrupts_held

    @functools.wraps(multiprocess_dataset)
    def wrapper(cls, input_file, dataset_impl, binarizer, output_prefix, *args, **kwargs):
        folder, name = os.path.split(output_prefix)
        partial = os.path.join(folder, f".{name}.partial")
        try:
            summary = multiprocess_dataset(cls, input_file, dataset_impl, binarizer, partial, *args, **kwargs)
            with interrupts_held(f"writing {output_prefix}.bin and .idx"):
                for ext in ("bin", "idx"):  # the index last: a reader that finds it finds its data
                    if os.path.exists(f"{partial}.{ext}"):
                        os.replace(f"{partial}.{ext}", f"{output_prefix}.{ext}")
            return summary
        except BaseException:
            _stop_pool_workers()  # a worker still binarizing would write its part file after the removal below
            raise
        finally:
            for leftover in glob.glob(glob.escape(partial) + "*"):
                if os.path.isfile(leftover):
                    os.remove(leftover)

    wrapper.patched_by_fairseq_fusion = True
    return classmethod(wrapper)


def _stop_pool_workers():
    import multiprocessing

    workers = [p for p in multiprocessing.active_children() if "PoolWorker" in p.name]
    for worker in workers:
        worker.terminate()
    for worker in workers:
        worker.join(5)

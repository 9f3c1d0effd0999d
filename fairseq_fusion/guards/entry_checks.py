"""What users pass fairseq's entry points, checked before fairseq trips over it with a traceback.

Each check raises ``FusionError`` (one line, ``errors.py``) naming the file or option and what was
expected: a checkpoint that is missing, empty, truncated or corrupt (``checkpoint_files.py``); a
``--model-overrides`` key that is no option (with the nearest names); a data folder that does not exist or lacks its
dictionaries; a sentence longer than the model's positions (how to skip it); a sentence longer than ``--max-tokens``
(the smallest value that batches it); neither ``--max-tokens`` nor ``--batch-size`` in fairseq-train; a resume of a checkpoint
of another model (``resume_check.py``, wrapping ``Trainer.load_checkpoint``). They wrap fairseq's own functions
narrowly, as ``fairseq_fixes`` does, and leave every other exception (a real bug) with its traceback.
A checkpoint used with other dictionaries of the same size than it was trained with is refused in one line naming
the dictionary file (``dictionary_check.py``; the fingerprints are read here, compared once the task is set up).
A checkpoint loaded for another language direction than the run's (``-s``/``-t``, the hub's ``source_lang``, the
data folder's) is a warning (``errors.warn``) naming both.
"""
import difflib
import functools
import os
import re

from . import data_folders, dictionary_check, option_checks, vocabulary_sizes
from .checkpoint_files import check_checkpoint_file, is_local, read_checkpoint
from .command_output import LAST_SAVED, interrupts_held
from ..errors import FusionError, warn


def known_option_names():
    """Every option name fairseq and the plugin know: fairseq's config groups, every registered
    dataclass (tasks, models, criterions, tokenizers, BPE, ...), and the fusion model's flags."""
    import argparse
    from dataclasses import fields, is_dataclass

    from fairseq.dataclass.configs import FairseqConfig
    from fairseq.models import MODEL_DATACLASS_REGISTRY
    from fairseq.registry import REGISTRIES
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    from ..models.fusion_transformer import FusionTransformerModel

    names = {"data", "arch", "_name", "task", "criterion", "optimizer", "lr_scheduler", "tokenizer", "bpe", "scoring"}
    dataclasses = [f.type for f in fields(FairseqConfig) if is_dataclass(f.type)]
    dataclasses += list(MODEL_DATACLASS_REGISTRY.values()) + list(TASK_DATACLASS_REGISTRY.values())
    for registry in REGISTRIES.values():
        dataclasses += list(registry["dataclass_registry"].values())
    for dc in dataclasses:
        names.update(f.name for f in fields(dc))
    parser = argparse.ArgumentParser(add_help=False)
    FusionTransformerModel.add_args(parser)
    names.update(a.dest for a in parser._actions)
    return names


def _is_fusion_state(state):
    from fairseq.models import ARCH_MODEL_REGISTRY

    from ..models.fusion_transformer import FusionTransformerModel

    args = state.get("args")
    cfg = state.get("cfg")
    arch = getattr(args, "arch", None)
    if arch is None and cfg is not None and cfg.get("model") is not None:
        model = cfg["model"]
        arch = getattr(model, "arch", None) or getattr(model, "_name", None)
    model_cls = ARCH_MODEL_REGISTRY.get(arch)
    return isinstance(model_cls, type) and issubclass(model_cls, FusionTransformerModel)


def check_overrides(arg_overrides, path):
    """Refuse a ``--model-overrides`` key that no option has (it would be ignored silently)."""
    known = known_option_names()
    unknown = sorted(k for k in arg_overrides if k not in known)
    if unknown:
        key = unknown[0]
        near = difflib.get_close_matches(key, sorted(known), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise FusionError(f"--model-overrides key {key!r} (checkpoint {path}) is not an option of fairseq or "
                          f"fairseq-fusion, so it would be ignored{hint}")


LANGUAGE_KEYS = ("source_lang", "target_lang")
# checkpoint path -> (source, target) languages it was trained on, before any override (the hub's source_lang=...)
CHECKPOINT_DIRECTIONS = {}
# checkpoint path -> the fingerprints of the dictionaries it was trained with, or None (dictionary_check.py)
CHECKPOINT_DICTIONARIES = {}


def checkpoint_direction(state):
    """The (source, target) languages a loaded checkpoint was trained on, or None: its task's ``-s``/``-t``, else
    (trained without them) the pair fairseq-train inferred from its data folder's file names, if it still exists."""
    from fairseq import utils
    from fairseq.data.data_utils import infer_language_pair

    cfg, args = state.get("cfg"), state.get("args")
    task = cfg.get("task") if cfg is not None else args
    found = tuple(getattr(task, k, None) for k in LANGUAGE_KEYS)
    data = getattr(task, "data", None)
    if not all(found) and isinstance(data, str) and os.path.isdir(utils.split_paths(data)[0]):
        found = tuple(infer_language_pair(utils.split_paths(data)[0]))
    return found if all(found) else None


def _override_languages(state, overrides):
    """What fairseq's loader does with overrides, for the languages alone (after their checkpoint values are read)."""
    from fairseq.dataclass.utils import overwrite_args_by_name

    if state.get("args") is not None:
        for key, value in overrides.items():
            setattr(state["args"], key, value)
    if state.get("cfg") is not None:
        overwrite_args_by_name(state["cfg"], overrides)


def _checked_load(load_checkpoint_to_cpu):
    @functools.wraps(load_checkpoint_to_cpu)
    def wrapper(path, arg_overrides=None, load_on_all_ranks=False):
        languages = {k: v for k, v in (arg_overrides or {}).items() if k in LANGUAGE_KEYS}
        others = None if arg_overrides is None else {k: v for k, v in arg_overrides.items() if k not in languages}
        state = read_checkpoint(load_checkpoint_to_cpu, path, others, load_on_all_ranks, fairseq=True)
        CHECKPOINT_DIRECTIONS[path] = checkpoint_direction(state)
        CHECKPOINT_DICTIONARIES[path] = dictionary_check.saved_fingerprints(state)
        if languages:
            _override_languages(state, languages)
        if arg_overrides and _is_fusion_state(state):
            check_overrides(arg_overrides, path)
        return state

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def warn_direction(path, task):
    """A warning when ``task`` translates another direction than the checkpoint at ``path`` was trained for."""
    trained = CHECKPOINT_DIRECTIONS.get(path)
    given = tuple(getattr(getattr(task, "cfg", None), k, None) for k in LANGUAGE_KEYS)
    if trained is None or not all(given) or given == trained:
        return
    warn(f"checkpoint {path} was trained to translate {trained[0]} into {trained[1]}, but the languages given "
         f"(-s/-t, source_lang/target_lang, or the data folder's) are {given[0]} into {given[1]}: the model reads its "
         f"input as {trained[0]} and writes {trained[1]}")


def _checked_ensemble(load_model_ensemble_and_task):
    @functools.wraps(load_model_ensemble_and_task)
    def wrapper(filenames, *args, **kwargs):
        plain = kwargs.get("suffix", "") == "" and kwargs.get("num_shards", 1) == 1 and kwargs.get("state") is None
        if plain:
            for filename in filenames:
                check_checkpoint_file(filename)
        ensemble, cfg, task = load_model_ensemble_and_task(filenames, *args, **kwargs)
        if plain:
            for filename in filenames:
                if filename in CHECKPOINT_DICTIONARIES:
                    dictionary_check.check(filename, CHECKPOINT_DICTIONARIES[filename], task)
                warn_direction(filename, task)
        return ensemble, cfg, task

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def record_languages(trainer):
    """The languages the task inferred from the data folder (training without -s/-t) into the config the checkpoint
    saves, so that loading it knows its direction (fairseq keeps them only in the task's own copy)."""
    saved, used = getattr(trainer.cfg, "task", None), getattr(trainer.task, "cfg", None)
    for key in LANGUAGE_KEYS:
        if saved is not None and getattr(saved, key, "") is None and getattr(used, key, None):
            setattr(saved, key, getattr(used, key))


def _recorded_save(save_checkpoint):
    """fairseq's save with Ctrl-C held back until it has finished: its checkpoint and the copies it makes of it
    (``checkpoint_last.pt``, ``checkpoint_best.pt``: ``shutil`` copies, not atomic) are written whole, and the Ctrl-C
    line names the update they hold."""
    @functools.wraps(save_checkpoint)
    def wrapper(cfg, trainer, epoch_itr, val_loss):
        record_languages(trainer)
        with interrupts_held("the checkpoint being saved"):
            result = save_checkpoint(cfg, trainer, epoch_itr, val_loss)
            _record_last(cfg, trainer)
        return result

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _record_last(cfg, trainer):
    last = os.path.join(cfg.save_dir, "checkpoint_last.pt")
    if os.path.exists(last):
        LAST_SAVED.update(save_dir=cfg.save_dir, path=last, num_updates=trainer.get_num_updates())


def check_data_folder(data, source_lang=None, target_lang=None):
    """The first folder of a task's ``data`` exists and holds the dictionaries fairseq will read, each one it can read
    (``data_folders.check_dictionary``)."""
    from fairseq import utils

    paths = utils.split_paths(data) if isinstance(data, str) else []
    if not paths or not is_local(paths[0]):
        return
    folder = paths[0]
    expected = "a binarized data folder (fusion-prepare-text or fairseq-preprocess) with dict.SRC.txt and dict.TGT.txt"
    if not os.path.isdir(folder):
        raise FusionError(f"data folder {folder}: no such directory; expected {expected}")
    if source_lang is None or target_lang is None:
        if not any(f.startswith("dict.") and f.endswith(".txt") for f in os.listdir(folder)):
            raise FusionError(f"data folder {folder}: no dict.*.txt in it; expected {expected}")
        from fairseq.data.data_utils import infer_language_pair

        source_lang, target_lang = infer_language_pair(folder)
        if source_lang is None:  # fairseq: "Could not infer language pair" (a bare Exception)
            raise FusionError(f"data folder {folder}: no binarized split (SPLIT.SRC-TGT.SRC.bin) to tell the "
                              "languages from: give them (-s SRC -t TGT; the hub: source_lang=, target_lang=)")
    for lang in (source_lang, target_lang):
        dict_file = os.path.join(folder, f"dict.{lang}.txt")
        if not os.path.exists(dict_file):
            raise FusionError(f"data folder {folder}: no {os.path.basename(dict_file)} for language {lang!r}; "
                              f"expected {expected}")
        data_folders.check_dictionary(dict_file)


def _checked_setup_task(setup_task):
    @functools.wraps(setup_task)
    def wrapper(cls, cfg, **kwargs):
        check_data_folder(getattr(cfg, "data", None), getattr(cfg, "source_lang", None), getattr(cfg, "target_lang", None))
        task = setup_task(cls, cfg, **kwargs)
        vocabulary_sizes.record_dictionary_files(task)
        return task

    wrapper.patched_by_fairseq_fusion = True
    return classmethod(wrapper)


SKIP_HINT = ("add --skip-invalid-size-inputs-valid-test to skip such sentences (fairseq logs how many) and process "
             "the rest, or split the long line")


class OversizeError(FusionError):
    """A sentence longer than the model's positions; ``named`` words it with the number a user counts (the
    entry point's reports do, ``input_checks``), else fairseq's dataset index."""

    def __init__(self, index, what):
        self.index, self.what = index, what
        super().__init__(self.message(f"sentence #{index}"))

    def message(self, name):
        return f"{name} {self.what}: {SKIP_HINT}"

    def named(self, name):
        return FusionError(self.message(name))


def _named_oversize(filter_indices_by_size):
    @functools.wraps(filter_indices_by_size)
    def wrapper(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        try:
            return filter_indices_by_size(self, indices, dataset, max_positions, ignore_invalid_inputs)
        except Exception as e:  # fairseq raises a bare Exception for a sentence over max_positions
            if not str(e).startswith("Size of sample #"):
                raise
            plain = re.sub(r"np\.\w+\(([^)]*)\)", r"\1", str(e))
            found = re.match(r"Size of sample #(\d+) is invalid \(=(.*)\) since max_positions=(.*?), skip", plain)
            if not found:
                raise FusionError(f"{plain.split(', skip this')[0]}: {SKIP_HINT}") from None
            raise OversizeError(int(found.group(1)), f"has {found.group(2)} tokens, over max_positions={found.group(3)}") \
                from None

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


class MaxTokensError(FusionError):
    """A sentence of a split that is batched whole (validation, generation) longer than ``--max-tokens``: fairseq's
    ``batch_by_size`` asserts (a 35-line traceback). The message names the longest sentence and the smallest value
    that batches it; ``--skip-invalid-size-inputs-valid-test`` skips only sentences over the model's positions."""


MAX_TOKENS_ASSERTION = "Sentences lengths should not exceed max_tokens"


BATCHED_WHOLE = ("every sentence of a split that is validated or translated must fit in one batch; fairseq-train "
                 "skips the training sentences that do not, --skip-invalid-size-inputs-valid-test only those over the "
                 "model's positions")


def too_many_tokens(task, dataset, max_tokens, max_positions=None, name_line=None, indices=None, why=BATCHED_WHOLE):
    """The ``MaxTokensError`` of ``dataset`` (its ``indices``, default all that fairseq's filter by ``max_positions``
    keeps) batched with ``max_tokens``. ``name_line(index)``: how the user counts the sentence at dataset index
    ``index`` (None: line of its split); ``why``: the rule, said after the value that works."""
    import numpy as np

    if indices is None:
        indices = np.arange(len(dataset), dtype=np.int64)
        if max_positions is not None:
            indices, _ = dataset.filter_indices_by_size(indices, max_positions)
    indices = np.asarray(indices, dtype=np.int64)
    if hasattr(dataset, "num_tokens_vec"):
        tokens = np.asarray(dataset.num_tokens_vec(indices))
    else:
        tokens = np.array([dataset.num_tokens(i) for i in indices])
    at = int(np.argmax(tokens))
    index, length = int(indices[at]), int(tokens[at])
    over = int((tokens > max_tokens).sum())
    split = next((k for k, d in getattr(task, "datasets", {}).items() if d is dataset), None)
    name = name_line(index) if name_line is not None else None
    if name is None:
        name = f"line {index + 1} of {split}" if split else f"sentence #{index}"
    sides = ""
    src, tgt = getattr(dataset, "src_sizes", None), getattr(dataset, "tgt_sizes", None)
    if src is not None and tgt is not None:
        sides = f" (source {int(src[index])}, target {int(tgt[index])}, </s> included)"
    where = f"{over} sentence{'s' if over > 1 else ''} of {split or 'the input'}"
    return MaxTokensError(
        f"--max-tokens {max_tokens} is less than the longest sentence, {name}: {length} tokens{sides}; "
        f"{where} {'is' if over == 1 else 'are'} longer: give --max-tokens {length} or more ({why})")


BATCH_SIZE_ASSERTION = "Must specify batch size either with --max-tokens or --batch-size"
NO_BATCH_SIZE = ("no batch size: give --max-tokens N (the tokens of a batch, e.g. 4096) or --batch-size N (its "
                 "sentences); fairseq-hydra-train: dataset.max_tokens or dataset.batch_size")


BATCH_LIMITS = ("max_tokens", "batch_size", "max_tokens_valid", "batch_size_valid")


def check_batch_limits(dataset):
    """--max-tokens / --batch-size (and their -valid twins) of 0 or less: fairseq ends in an IndexError (tokens),
    ignores the limit (a batch size of 0) or allocates the whole split at once (a negative one). Their domains are
    ``option_domains``'s."""
    option_checks.check({name: getattr(dataset, name, None) for name in BATCH_LIMITS})


def _named(name, hub):
    return f"{name}=" if hub else "--" + name.replace("_", "-") + " "


def check_generation(generation, hub=False):
    """--beam and --nbest that fairseq's search meets with a traceback (0 or less: a reshape error, a negative
    dimension, a ZeroDivisionError) or with fewer hypotheses than asked (--nbest over --beam); ``hub``: named as the
    hub's keyword arguments (``beam=``)."""
    option_checks.check({"beam": generation.beam, "nbest": generation.nbest},
                         label=lambda name: _named(name, hub).strip())
    beam, nbest = int(generation.beam), int(generation.nbest)
    b, n = _named("beam", hub), _named("nbest", hub)
    if nbest > beam:
        raise FusionError(f"{n}{nbest} with {b}{beam}: the search keeps {beam} hypotheses; give {n}{beam} "
                          f"or less, or a wider {b.strip()}")


MIN_LEN_ASSERTION = "min_len cannot be larger than max_len, please adjust these!"


def named_length_limits(run, generation, hub=False):
    """``run()``, with fairseq's assertion on an output length window that is empty for a sentence as one line."""
    try:
        return run()
    except AssertionError as e:
        if str(e) != MIN_LEN_ASSERTION:
            raise
        m, a, b = (_named(k, hub) for k in ("min_len", "max_len_a", "max_len_b"))
        raise FusionError(f"{m}{generation.min_len} is more than {a}{generation.max_len_a} x the source length + "
                          f"{b}{generation.max_len_b} allows for a sentence: lower {m.strip()} or raise the maximum") from None


def checked_search(cfg, run):
    """``run()`` of fairseq-generate or -interactive (``command_paths``), its batch limits and search settings checked
    first and an empty output length window named."""
    check_batch_limits(cfg.dataset)
    check_generation(cfg.generation)
    return named_length_limits(run, cfg.generation)


def check_batch_size(cfg):
    """The same line where the plugin loads inside fairseq-train's ``main`` (``save_dir_lock._locking_defaults``):
    fairseq-hydra-train calls ``call_main`` before it loads the plugin, so only this check reaches its runs."""
    check_batch_limits(cfg.dataset)
    if cfg.dataset.max_tokens is None and cfg.dataset.batch_size is None:
        raise FusionError(NO_BATCH_SIZE)


def batch_size_refusal(error):
    """fairseq-train's (and fairseq-validate's) ``assert`` on a missing batch size, at the top of their ``main``,
    before anything is written, as one line naming both flags; None for any other error."""
    if isinstance(error, AssertionError) and str(error) == BATCH_SIZE_ASSERTION:
        return FusionError(NO_BATCH_SIZE)
    return None

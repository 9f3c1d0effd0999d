"""Every change the plugin makes to fairseq, torch and Python, with its scope, in the order applied.

Scopes (ARCHITECTURE.md, "What loading the plugin changes"):

- ``import``: made when the plugin is imported, because the plugin's own models need it to load (the checkpoint
  allow-list) or because it is how fairseq loads the plugin (``--user-dir``);
- ``fix``: a fix of a fairseq bug, made at import for the whole process, only where the function it replaces is the
  one it was written against (``sources``: the SHA-256 of ``inspect.getsource``, first 12 digits, of each fairseq
  version it was checked on); ``FUSION_FAIRSEQ_FIXES=off`` turns every fix off;
- ``plugin``: a check wrapped around a fairseq function at import that acts only on the plugin's own models
  (``covers`` names the guard that tells them from fairseq's), and on every model inside a command-line run;
- ``command``: a process-wide setting or a check for every model, made only in a command-line run
  (``command_line.configure``: fairseq's commands with ``--user-dir``, the ``fusion-*`` commands, or a program that
  asks for them).

Every wrap of a fairseq function checks ``sources`` first: where the installed function differs, the change is
skipped with one warning naming it. ``fairseq_fusion/__init__.py`` applies the ``import``, ``fix`` and ``plugin``
changes; ``command_line.configure`` the ``command`` ones. ARCHITECTURE.md's table is ``table()``'s rendering.
The ``fusion-*`` commands' own package, ``fairseq_fusion_tools/cli/__init__.py``, makes three more (``TOOLS``).
"""
import functools
import hashlib
import importlib
import inspect
import logging
import os
import pkgutil
from dataclasses import dataclass

logger = logging.getLogger(__name__)
SCOPES = ("import", "fix", "plugin", "command")
FIXES_ENV = "FUSION_FAIRSEQ_FIXES"

# the fairseq versions a source hash was read from
INSTALLED = "ve-fairseq 0.12.3 (fairseq main ecbf110e, 2024-10-18)"
MAIN = "fairseq main 3d262bb (2025-09-30)"
TAG = "fairseq v0.12.3 tag"


@dataclass(frozen=True)
class Change:
    target: str  # the dotted name of what changes
    reason: str
    scope: str  # one of SCOPES
    test: str  # tests/FILE.py::TEST that covers it
    # "module.function": called with no argument; "wrap module.factory [raw|func]": target = factory(target), given
    # as the class holds it (raw) or the classmethod's function (func); "on-import module.patch": patch(target's module)
    how: str
    sources: tuple = ()  # source hashes of the replaced function this change was written against; () = not a wrap
    covers: str = ""  # scope "plugin": "module.function(*args, **kwargs)" -> whether the call concerns a plugin model
    when: str = ""  # a condition under which it changes nothing; "" = always
    also: tuple = ()  # other names the same function changes
    upstream: str = ""  # scope "fix": whether fairseq's main branch still needs it
    then: str = ""  # a function of this module called after each call of the wrapped one


def src(*hashes):
    """One source hash per name the change replaces (``target``, then ``also``); "a|b": either version."""
    return tuple(hashes)


CHANGES = [
    # what the plugin's models need to load, and how fairseq loads the plugin
    Change("torch.serialization.get_safe_globals", "fairseq checkpoints load under torch >= 2.6's weights_only "
           "(fairseq 0.12 alone cannot load its own)", "import",
           "tests/test_compat.py::test_omegaconf_containers_load_with_weights_only",
           "compat.checkpoint_safety.allow_fairseq_checkpoint_globals", when="torch < 2.4"),
    Change("fairseq.utils.import_user_module", "--user-dir naming this plugin by another path (a link, `..`): the "
           "plugin, not fairseq's 'not globally unique' ImportError; a fairseq command that loads it configures its "
           "command-line run", "import", "tests/test_refusals.py::test_user_dir_by_another_path_is_the_imported_plugin",
           "wrap guards.command_paths._plugin_by_any_path", sources=src("1ef749793f66"), then="configure_if_command"),
    # fairseq bugs that change what users measure (compat/fairseq_fixes.py, compat/distributed_cpu.py)
    Change("fairseq.models.distributed_fairseq_model.DistributedDataParallel", "fairseq bug: --ddp-backend "
           "pytorch_ddp on CPU passes device_ids, which torch refuses", "fix",
           "tests/test_distributed_resume.py::test_two_cpu_ranks_end_with_same_parameters",
           "compat.distributed_cpu.patch_fairseq_ddp", sources=src("caa68bcad9ad"),
           upstream="still needed on " + MAIN),
    Change("fairseq.data.data_utils.batch_by_size", "fairseq bug: the last batch is dropped when its size is not a "
           "multiple of --required-batch-size-multiple", "fix", "tests/test_foundation.py::test_batches_cover_every_"
           "sentence_with_a_batch_size_multiple", "wrap compat.fairseq_fixes._keep_last_batch",
           sources=src("10c0b48b4735"), upstream="still needed on " + MAIN + "; the v0.12.3 tag has no such bug"),
    Change("fairseq.ngram_repeat_block.NGramRepeatBlock._no_repeat_ngram", "fairseq bug: --no-repeat-ngram-size "
           "blocks nothing without the CUDA extension", "fix", "tests/test_foundation.py::test_no_repeat_ngram_blocks_"
           "repeats_of_the_generated_tokens", "wrap compat.fairseq_fixes._generated_tokens_only",
           sources=src("f01a2117e525"), upstream="still needed on " + MAIN),
    Change("fairseq.optim.fp16_optimizer.FP16Optimizer.build_optimizer", "fairseq bug: --bf16 on a GPU keeps its "
           "fp32 master copy per parameter (per-parameter Adam), where --fp16 flattens it", "fix",
           "tests/test_gpu_speed.py::test_bf16_master_copy_is_flat_on_cuda_with_fairseqs_updates",
           "wrap compat.fairseq_fixes._flat_bf16_on_cuda raw", sources=src("c7ff6d890b7d"),
           upstream="still needed on " + MAIN),
    Change("fairseq.search.DiverseBeamSearch.step", "fairseq bug: --diverse-beam-groups ends in IndexError", "fix",
           "tests/test_diverse_beam_search.py::test_batch_with_dataset_ids_equals_each_sentence_alone",
           "wrap compat.fairseq_fixes._overlap_rows_not_ids", sources=src("fc9ed905f12c"),
           upstream="still needed on " + MAIN + "; the v0.12.3 tag has no such bug"),
    Change("fairseq.models.transformer.transformer_legacy.TransformerModel.build_model", "fairseq bug: "
           "--encoder-layers-to-keep / --decoder-layers-to-keep end in AttributeError (a list split as a string)",
           "fix", "tests/test_fairseq_options.py::test_layers_to_keep_on_the_command_line_build_and_load",
           "wrap compat.fairseq_fixes._layers_to_keep_as_text func", sources=src("4a5ca927fbd1"),
           upstream="still needed on " + MAIN),
    Change("fairseq.checkpoint_utils.prune_state_dict", "fairseq bug: a model trained with --encoder-layers-to-keep "
           "is pruned again when loaded (Missing key(s))", "fix", "tests/test_fairseq_options.py::test_layers_to_keep_"
           "on_the_command_line_build_and_load", "wrap compat.fairseq_fixes._prune_unpruned_only",
           sources=src("dd36601b5249"), upstream="still needed on " + MAIN),
    Change("fairseq.trainer._catalog_shared_params", "fairseq bug: the trainer logs a false 'detected shared "
           "parameter' line for every bias-free projection (their absent biases, None, filed as one parameter)",
           "fix", "tests/test_internals.py::test_training_log_names_no_absent_bias_as_shared",
           "wrap compat.fairseq_fixes._real_parameters_only", sources=src("de2da18cb6df"),
           upstream="still needed on " + MAIN + " (the same function)"),
    # checks of the plugin's own models, wherever they run (every model's inside a command-line run)
    Change("fairseq.models.fairseq_model.BaseFairseqModel.load_state_dict", "a checkpoint of another dictionary "
           "size: one line naming the dictionary (fairseq's ends in torch's size mismatch)", "plugin",
           "tests/test_dictionary_check.py::test_fairseqs_transformer_names_another_dictionary_size",
           "wrap guards.vocabulary_sizes._sizes_checked_first", sources=src("479d9b4d634b"),
           covers="guards.plugin_models.model_is_plugin"),
    Change("fairseq.trainer.Trainer.save_checkpoint", "records a fingerprint of the task's dictionaries (extra_state)",
           "plugin", "tests/test_dictionary_check.py::test_generate_refuses_another_dictionary_of_the_same_size",
           "wrap guards.dictionary_check._recorded_dictionaries", sources=src("46b39d54a4f7|c87eac9856eb"),
           covers="guards.plugin_models.trainer_is_plugin"),
    Change("fairseq.trainer.Trainer.load_checkpoint", "resuming another model: one line naming what differs",
           "plugin", "tests/test_resume_check.py::test_resuming_another_model_is_refused_and_changes_nothing",
           "wrap guards.resume_check.checked_load_checkpoint", sources=src("128800d64185"),
           covers="guards.plugin_models.trainer_is_plugin"),
    Change("fairseq.trainer.Trainer._aggregate_logging_outputs", "--fusion-log-internals: the figures join the "
           "logging outputs fairseq sums or gathers across ranks (a training update under LayerDrop keeps rank 0's)",
           "plugin", "tests/test_internals_ranks.py::test_two_ranks_log_the_mean_of_each_ranks_figures",
           "wrap compat.trainer_figures._figures_reduced", sources=src("525e3237868e"),
           covers="guards.plugin_models.trainer_is_plugin"),
    Change("fairseq.trainer.Trainer._reduce_and_log_stats", "--fusion-log-internals: each figure's mean logged "
           "before fairseq's per-update aggregator, which reads every value at each update", "plugin",
           "tests/test_internals.py::test_a_program_driving_fairseqs_trainer_gets_the_figures",
           "wrap compat.trainer_figures._figures_logged", sources=src("6fc951a5f2cd"),
           covers="guards.plugin_models.trainer_is_plugin"),
    Change("fairseq.hub_utils.from_pretrained", "the hub's model folder, checkpoint file, data folder and bpe= / "
           "tokenizer= names: one line each (fairseq went on with None, read a file as an archive, or ended in "
           "KeyError)", "plugin", "tests/test_refusals.py::test_hub_names_a_bad_data_folder_bpe_or_language_pair",
           "wrap guards.hub_checks._checked_from_pretrained", sources=src("d88bb772ba0b"),
           covers="guards.plugin_models.hub_loads_plugin_model"),
    Change("fairseq.tasks.FairseqTask.inference_step", "an empty source's translation is left empty", "plugin",
           "tests/test_input_warnings.py::test_generate_leaves_empty_sources_empty_and_says_which",
           "wrap guards.input_checks._empty_source_empty_translation", sources=src("23b553e9b2aa"),
           covers="guards.plugin_models.translates_with_plugin_models"),
    Change("fairseq.tasks.FairseqTask.get_batch_iterator", "sees the input for the warnings, names an over-long "
           "line and one longer than --max-tokens", "plugin", "tests/test_input_warnings.py::test_interactive_over_"
           "long_line_is_refused_by_its_input_line_number", "wrap guards.input_checks._inspected_batches",
           sources=src("f92ef89258f5|e0830ab25dcb"), covers="guards.plugin_models.input_is_reported"),
    Change("fairseq.hub_utils.GeneratorHubInterface.sample", "the hub warns of empty and undecodable sentences",
           "plugin", "tests/test_input_warnings.py::test_hub_warns_of_empty_and_undecodable_sentences_and_leaves_"
           "empty_ones_empty", "wrap guards.input_checks._hub_sample", sources=src("ccad54a12f0b"),
           covers="guards.plugin_models.hub_is_plugin"),
    Change("fairseq.hub_utils.GeneratorHubInterface.generate", "the hub leaves an empty sentence's output empty; "
           "a beam=, nbest= or length window fairseq's search cannot run: one line", "plugin",
           "tests/test_input_warnings.py::test_hub_warns_of_empty_and_undecodable_sentences_and_leaves_empty_ones_"
           "empty", "wrap guards.input_checks._hub_generate", sources=src("1dac4338c808"),
           covers="guards.plugin_models.hub_is_plugin"),
    # a command-line run: how it reports, and what it checks for every model
    Change("sys.excepthook", "a refusal (FusionError) prints one line, not a traceback; Ctrl-C one line and exit "
           "status 130", "command", "tests/test_refusals.py::test_fairseq_train_names_a_missing_data_folder",
           "guards.command_output.install_excepthook"),
    Change("os.register_at_fork", "the processes a command-line run forks (fairseq-preprocess's workers) end on "
           "Ctrl-C without a traceback of their own", "command",
           "tests/test_interruptions.py::test_ctrl_c_in_fairseq_preprocess_with_workers_is_one_line_and_leaves_no_"
           "half_written_file", "guards.command_output.quiet_children"),
    Change("warnings.showwarning", "a FusionWarning prints as one line `fairseq-fusion: warning: ...`", "command",
           "tests/test_input_warnings.py::test_generate_leaves_empty_sources_empty_and_says_which",
           "guards.command_output.install_warnings"),
    Change("warnings.filters", "fairseq's internal notices a user cannot act on, one message each (quiet.py)",
           "command", "tests/test_quiet.py::test_filters_are_narrow", "compat.quiet.filter_warnings"),
    Change("logging.getLogger('fairseq.tasks.text_to_speech').filters", "the tensorboardX notice of fairseq's "
           "speech tasks, logged on every import", "command", "tests/test_quiet.py::test_tensorboardx_notice_is_"
           "fairseqs_and_filtered", "compat.quiet.filter_log_messages"),
    Change("torch.backends.cuda.cudnn_sdp_enabled", "cuDNN attention plans anew for every batch shape (200-250 ms "
           "a step); off for every model of the run, so comparisons with fairseq's transformer stay fair (the "
           "plugin's models turn it off around their own forward everywhere)", "command",
           "tests/test_gpu_speed.py::test_a_command_line_run_turns_cudnn_attention_off",
           "compat.attention_backends.turn_off", when="FUSION_CUDNN_ATTENTION=1"),
    Change("torch.set_num_threads", "on a CPU shared with other work, torch's threads wait for each other at every "
           "operator (2 cores beside a second training: 1926 words/s with 2 threads, 2871 with 1): one fewer per busy "
           "core, said at WARNING", "command", "tests/test_cpu_threads.py::test_a_busy_core_takes_one_thread_away",
           "compat.cpu_threads.fit_to_free_cores",
           when="CUDA, a thread variable set, FUSION_CPU_THREADS=off, torch's count chosen, no other work"),
    Change("atexit.register", "a DDP rank's process group destroyed at exit: fairseq leaves it up, and gloo's threads "
           "then end the rank in std::terminate (SIGABRT) after its last line", "command",
           "tests/test_save_dir_lock.py::test_a_command_line_run_destroys_its_process_group_at_exit",
           "compat.process_group_exit.destroy_at_exit"),
    Change("sys.meta_path", "patches fairseq_cli's command modules whenever they are imported (cli_hooks.py)",
           "command", "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "compat.cli_hooks.install"),
    Change("fairseq.logging.progress_bar.TensorboardProgressBarWrapper._log_to_tensorboard", "--fusion-log-internals: "
           "the layer-attention weights as an image at each validation (fairseq's writer takes scalars only)",
           "command", "tests/test_internals.py::test_validation_draws_the_layer_attention_map_in_tensorboard",
           "wrap compat.tensorboard_images._with_layer_maps", sources=src("c5d3cb0e0155")),
    Change("fairseq.checkpoint_utils.load_checkpoint_to_cpu", "a missing, cut or corrupt checkpoint and unknown "
           "--model-overrides keys: one line", "command", "tests/test_checkpoint_files.py::test_fairseq_generate_"
           "refuses_a_checkpoint_cut_short", "wrap guards.entry_checks._checked_load", sources=src("96f7d33cde8e|178584bf4c01")),
    Change("fairseq.checkpoint_utils.load_model_ensemble_and_task", "warns of a checkpoint loaded for another "
           "language direction", "command", "tests/test_input_warnings.py::test_interactive_other_direction_than_the_"
           "checkpoint_warns", "wrap guards.entry_checks._checked_ensemble", sources=src("13d16e9ecb84|ec3c89ea1146")),
    Change("fairseq.checkpoint_utils.save_checkpoint", "records the languages trained and the last checkpoint saved "
           "(Ctrl-C message); Ctrl-C waits until the checkpoint and its copies are written whole", "command", "tests/test_input_warnings.py::test_interactive_other_direction_than_the_"
           "checkpoint_warns", "wrap guards.entry_checks._recorded_save", sources=src("61513534b9b3|6d723b0b350a")),
    Change("fairseq.tasks.translation.TranslationTask.setup_task", "a missing data folder or dictionary: one line",
           "command", "tests/test_refusals.py::test_fairseq_train_names_a_missing_data_folder",
           "wrap guards.entry_checks._checked_setup_task func", sources=src("6dab2d63f558")),
    Change("fairseq.tasks.FairseqTask.filter_indices_by_size", "a sentence over max_positions: one line naming it",
           "command", "tests/test_raw_text.py::test_interactive_refuses_an_over_long_line_in_one_line",
           "wrap guards.entry_checks._named_oversize", sources=src("064d9e381d9a")),
    Change("fairseq.distributed.utils.call_main", "fairseq-train without --max-tokens or --batch-size, and a refusal "
           "in a rank torch.multiprocessing.spawn started: one line", "command",
           "tests/test_save_dir_lock.py::test_a_refusal_in_a_spawned_rank_is_its_one_line",
           "wrap guards.command_mains.checked_call_main", sources=src("c2a32fa44fa2|55c8935b169a")),
    Change("fairseq.checkpoint_utils.verify_checkpoint_directory", "an unusable --save-dir: one line naming the flag",
           "command", "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "wrap guards.command_paths._checked_save_dir", sources=src("413f93d9a158")),
    Change("fairseq.checkpoint_utils.load_checkpoint", "a missing --restore-file: one line naming the flag",
           "command", "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "wrap guards.command_paths._checked_restore", sources=src("08e4fa03a2ab|67d83ee6ab6c")),
    Change("fairseq.trainer.Trainer.train_step", "divergence (NaN/Inf gradients, fp16's minimum loss scale): one "
           "line naming the update and the likely flags, not FloatingPointError or the StopIteration of fairseq's "
           "NanDetector", "command", "tests/test_interruptions.py::test_divergence_is_one_line_naming_the_update_and_"
           "the_flags", "wrap guards.stop_conditions._named_divergence", sources=src("8cbf0406b1fe")),
    Change("fairseq.models.fairseq_model.BaseFairseqModel.prepare_for_inference_", "--retain-dropout-modules "
           "names no dropout module of the model answers to (fairseq keeps dropout off there, or on where the name is "
           "part of the text), and the names without --retain-dropout: one line", "command",
           "tests/test_interruptions.py::test_retain_dropout_modules_naming_no_module_is_one_line",
           "wrap guards.module_names._checked_prepare", sources=src("76486e271371")),
    Change("fairseq.binarizer.FileBinarizer.multiprocess_dataset", "fairseq-preprocess's splits written whole: an "
           "interrupted or failed run leaves no cut .bin or .idx, nor one over an earlier split", "command",
           "tests/test_interruptions.py::test_ctrl_c_in_fairseq_preprocess_with_workers_is_one_line_and_leaves_no_"
           "half_written_file", "wrap guards.command_paths._binarized_whole func", sources=src("6eace681e747")),
    Change("fairseq.tasks.translation.TranslationTask.load_dataset", "a missing split: one line naming it", "command",
           "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "wrap guards.command_paths._named_split", sources=src("ef508aa258b6")),
    Change("fairseq_cli.train.add_defaults", "a training locks its --save-dir until it ends: a second one into it is "
           "one line naming the holder (a missing batch size and a budget no limit of fairseq's reads are refused "
           "there first)", "command",
           "tests/test_save_dir_lock.py::test_a_second_training_into_a_held_folder_is_one_line_and_touches_nothing",
           "on-import guards.save_dir_lock.patch_train", sources=src("b0757f9630c2", "2a1b822cd8f5|60ff9dfe7b8c"), also=("fairseq_cli.train.main",)),
    Change("fairseq_cli.generate.main", "an unusable --results-path: one line; its file written whole when the run "
           "has finished; empty source lines: a warning with their numbers", "command",
           "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "on-import guards.command_mains.patch_generate", sources=src("5e0c41175830")),
    Change("fairseq_cli.interactive.main", "a missing --input file: one line; empty, non-UTF-8 or unknown-word lines: "
           "warnings with line numbers", "command", "tests/test_input_warnings.py::test_interactive_empty_and_non_utf8_"
           "lines_warn_once_each_with_their_numbers", "on-import guards.command_mains.patch_interactive",
           sources=src("9d87c54cae78", "3b4339322a26"), also=("fairseq_cli.interactive.buffered_read",)),
    Change("fairseq_cli.preprocess.main", "fairseq-preprocess's options in their domains, or one line naming the "
           "first outside (option_checks.py)", "command",
           "tests/test_option_domains.py::test_each_entry_point_refuses_a_value_outside_its_domain_in_one_line",
           "on-import guards.command_mains.patch_preprocess", sources=src("3daeb2430920")),
    Change("fairseq.options.parse_args_and_arch", "--arch ARCH --help lists the technique flags; a mistyped arch "
           "is one line; every option's value in its domain, or one line naming it (option_checks.py)", "command",
           "tests/test_arch_help.py::test_help_with_a_fusion_arch_lists_the_technique_flags_under_their_titles",
           "wrap guards.arch_help._with_arch_help", sources=src("535ef0431681")),
    Change("fairseq_cli.preprocess._build_dictionary", "fairseq-preprocess's input files (--trainpref, --validpref, "
           "--testpref, --alignfile, --srcdict, --tgtdict) checked before the first is read: an empty, blank-only, "
           "binary, non-UTF-8 or cut gzip file is one line naming the flag and the file", "command",
           "tests/test_input_classes.py::test_bad_input_is_one_line_naming_the_file",
           "on-import guards.preprocess_inputs.patch_preprocess", sources=src("cec45d7ef57c", "bee7cf1fb914"),
           also=("fairseq_cli.preprocess._make_all",)),
    Change("fairseq.data.data_utils.load_indexed_dataset", "a split's .idx / .bin pair that is cut, empty, of "
           "another run or not an index: one line naming the file (fairseq's mmap errors, EOFError or max() of an "
           "empty sequence)", "command", "tests/test_input_classes.py::test_bad_input_is_one_line_naming_the_file",
           "wrap guards.data_folders._checked_indexed_dataset", sources=src("6842811f5bb0")),
]

TOOLS = [
    Change("sys.excepthook", "fusion-*: a missing torch or fairseq, or a bad file the command line named: one line",
           "command", "tests/test_packaging.py::test_missing_torch_hook_leaves_other_missing_modules_alone",
           "fairseq_fusion_tools.cli"),
    Change("argparse.ArgumentParser.parse_known_args", "fusion-*: remembers the files the command line named, and "
           "refuses an output that would lose an input, a running training's folder or a folder the command did not "
           "make", "command", "tests/test_no_loss.py::test_an_output_never_replaces_what_the_user_gave",
           "fairseq_fusion_tools.cli"),
    Change("argparse.ArgumentParser.error", "fusion-*: argparse's error line with the prefix of every refusal",
           "command", "tests/test_mistakes.py::test_mistake_is_one_line", "fairseq_fusion_tools.cli"),
]

_IN_COMMAND_LINE = []  # what the command-line run changed, once it is configured (command_line.configure)
SKIPPED = []  # the changes skipped because fairseq's function is not the one they were written against

def in_command_line():
    """Whether this process is a command-line run of the plugin (``command_line.configure`` has run)."""
    return bool(_IN_COMMAND_LINE)


def configure_if_command():
    """The command-line run's changes where this process is one of the commands (``compat/process_command.py``)."""
    from .compat.process_command import command_name

    if not _IN_COMMAND_LINE and command_name():
        apply_in_command_line()


def fixes_enabled(environ=None):
    value = (os.environ if environ is None else environ).get(FIXES_ENV, "on").strip().lower()
    return value not in ("off", "0", "no", "false")


def owner_and_name(target):
    """``fairseq.trainer.Trainer.load_checkpoint`` -> (the class Trainer, "load_checkpoint")."""
    owner, name = target.rsplit(".", 1)
    return pkgutil.resolve_name(owner), name


def source_hash(function):
    """The first 12 hex digits of the SHA-256 of ``function``'s source (a classmethod or staticmethod: its function)."""
    function = getattr(function, "__func__", function)
    function = inspect.unwrap(function) if not getattr(function, "patched_by_fairseq_fusion", False) else function
    try:
        text = inspect.getsource(function)
    except (OSError, TypeError):
        return "no source"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def written_for(change, name, function):
    """Whether ``function`` (fairseq's, about to be replaced) is one ``change`` was written against; else one warning."""
    if not change.sources:
        return True
    index = ((change.target,) + change.also).index(name)
    expected = change.sources[index] if index < len(change.sources) else change.sources[0]
    found = source_hash(function)
    if found in expected.split("|"):
        return True
    SKIPPED.append(name)
    logger.warning(f"fairseq-fusion: {name} is not the fairseq function this plugin's change was written for "
                   f"(source {found}, expected {expected}): '{change.reason}' is not applied")
    return False


def _plugin(dotted):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(f"fairseq_fusion.{module}"), name)


def _gated(original, guarded, covers):
    """``guarded`` where the call concerns a plugin model (``covers``) or the process is a command-line run, else
    fairseq's ``original`` untouched."""
    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        if _IN_COMMAND_LINE or covers(*args, **kwargs):
            return guarded(*args, **kwargs)
        return original(*args, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _followed_by(function, then):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        result = function(*args, **kwargs)
        then()
        return result

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _wrap(change, factory, unwrap):
    owner, name = owner_and_name(change.target)
    if getattr(getattr(owner, name), "patched_by_fairseq_fusion", False):  # imported twice (tests, the hub)
        return False
    current = {"raw": lambda: vars(owner)[name], "func": lambda: getattr(owner, name).__func__,
               "": lambda: getattr(owner, name)}[unwrap]()
    if not written_for(change, change.target, current):
        return False
    replacement = factory(current)
    if change.covers:
        replacement = _gated(current, replacement, _plugin(change.covers))
    if change.then:
        replacement = _followed_by(replacement, globals()[change.then])
    setattr(owner, name, replacement)
    return True


def _on_import(change, patch):
    """``patch(module)``, once each patched function of the module is found to be the one it was written for."""
    def checked(module):
        names = (change.target,) + change.also
        if any(getattr(getattr(module, n.rsplit(".", 1)[1]), "patched_by_fairseq_fusion", False) for n in names):
            return  # patched already (the module imported again)
        if all(written_for(change, n, getattr(module, n.rsplit(".", 1)[1])) for n in names):
            patch(module)

    return checked


def _apply(change):
    kind, function, *unwrap = change.how.split() if " " in change.how else ["call", change.how]
    if kind == "wrap":
        return _wrap(change, _plugin(function), "".join(unwrap))
    if kind == "on-import":
        from .compat.cli_hooks import when_imported

        when_imported(change.target.rsplit(".", 1)[0])(_on_import(change, _plugin(function)))
        return True
    if change.scope == "fix" and change.sources:  # a fix made by a call: checked against the function it fixes
        if not written_for(change, change.target, pkgutil.resolve_name(FIX_SOURCES[change.target])):
            return False
    return _plugin(function)() is not False


# a fix that replaces no function itself: the fairseq function whose code it was written against
FIX_SOURCES = {"fairseq.models.distributed_fairseq_model.DistributedDataParallel":
               "fairseq.models.distributed_fairseq_model.DistributedFairseqModel"}


def apply_at_import():
    """The changes of scopes ``import``, ``fix`` (unless ``FUSION_FAIRSEQ_FIXES=off``) and ``plugin``."""
    for change in CHANGES:
        if change.scope == "fix" and not fixes_enabled():
            continue
        if change.scope in ("import", "fix", "plugin"):
            _apply(change)


def _needs_stack(change):
    return change.target.split(".")[0] in ("torch", "fairseq", "fairseq_cli") or " " in change.how


def apply_in_command_line():
    """The changes of scope ``command``, once per process; returns the names of what they changed."""
    if not _IN_COMMAND_LINE:
        from .compat import stack

        _IN_COMMAND_LINE.append("command-line run")
        without_stack = not stack.loaded()  # the scorers run without torch and fairseq: Python's settings only
        for change in CHANGES:
            if change.scope != "command" or (without_stack and _needs_stack(change)):
                continue
            if _apply(change):
                _IN_COMMAND_LINE.extend((change.target,) + change.also)
    return _IN_COMMAND_LINE[1:]


def table():
    """ARCHITECTURE.md's "Global changes" table (tests/test_global_changes.py keeps it equal)."""
    rows = ["| What changes | Why | Scope | fairseq | Made by | Not when | Test |", "|---|---|---|---|---|---|---|"]
    for change in CHANGES + TOOLS:
        what = ", ".join(f"`{name}`" for name in (change.target,) + change.also)
        by = change.how.split(" ")[1] if " " in change.how else change.how
        checked = "any" if not change.sources else "source-checked"
        rows.append(f"| {what} | {change.reason} | {change.scope} | {checked} | `{by}` | {change.when or '-'} | "
                    f"`{change.test}` |")
    return "\n".join(rows) + "\n"

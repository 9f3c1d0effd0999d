"""Every change the plugin makes to fairseq, torch and Python when it is imported, in the order applied.

``fairseq_fusion/__init__.py`` applies these and nothing else (``apply``); ARCHITECTURE.md's table "Global
changes" is ``table()``'s rendering (tests/test_global_changes.py checks both, and that importing the plugin
changes nothing this list does not name). A change is made by the function its ``how`` names, in the module
that explains it; the list imports none of them, so it loads without torch (stage "python").

The ``fusion-*`` commands' own package, ``fairseq_fusion_tools/cli/__init__.py``, makes three more changes
(``TOOLS``): listed here, applied there, since importing this list would load the plugin.
"""
import importlib
import pkgutil
from dataclasses import dataclass

STAGES = ("python", "fairseq", "registered")  # before the torch check; with torch and fairseq; after our archs


@dataclass(frozen=True)
class Change:
    target: str  # the dotted name of what changes
    reason: str
    fairseq: str  # the fairseq versions it applies to
    test: str  # tests/FILE.py::TEST that covers it
    # "module.function": called with no argument; "wrap module.factory [raw|func]": target = factory(target), given
    # as the class holds it (raw) or the classmethod's function (func); "on-import module.patch": patch(target's module)
    how: str
    stage: str = "fairseq"
    when: str = ""  # a condition under which it changes nothing; "" = always
    also: tuple = ()  # other names the same function changes


ALL = "all"
BUGS = "0.12.0-0.12.3"

CHANGES = [
    Change("sys.excepthook", "a refusal (FusionError) and Ctrl-C print one line, not a traceback", ALL,
           "tests/test_refusals.py::test_fairseq_train_names_a_missing_data_folder", "errors.install_excepthook",
           stage="python"),
    Change("warnings.showwarning", "a FusionWarning prints as one line `fairseq-fusion: warning: ...`", ALL,
           "tests/test_input_warnings.py::test_generate_leaves_empty_sources_empty_and_says_which",
           "errors.install_warnings", stage="python"),
    Change("warnings.filters", "fairseq's internal notices a user cannot act on, one message each (quiet.py)", ALL,
           "tests/test_quiet.py::test_filters_are_narrow", "compat.quiet.filter_warnings", stage="python"),
    Change("logging.getLogger('fairseq.tasks.text_to_speech').filters", "the tensorboardX notice of fairseq's "
           "speech tasks, logged on every import", ALL, "tests/test_quiet.py::test_tensorboardx_notice_is_fairseqs_and_"
           "filtered", "compat.quiet.filter_log_messages", stage="python"),
    Change("torch.backends.cuda.cudnn_sdp_enabled", "cuDNN attention plans anew for every batch shape (200-250 ms "
           "a step)", ALL, "tests/test_gpu_speed.py::test_plugin_import_turns_cudnn_attention_off",
           "compat.attention_backends.configure", when="FUSION_CUDNN_ATTENTION=1"),
    Change("torch.set_num_threads", "on a CPU shared with other work, torch's threads wait for each other at every "
           "operator (2 cores beside a second training: 1926 words/s with 2 threads, 2871 with 1): one fewer per busy "
           "core", ALL, "tests/test_cpu_threads.py::test_a_busy_core_takes_one_thread_away",
           "compat.cpu_threads.fit_to_free_cores", when="CUDA, OMP_NUM_THREADS or MKL_NUM_THREADS set, no other work"),
    Change("torch.serialization.get_safe_globals", "fairseq checkpoints load under torch >= 2.6's weights_only",
           ALL, "tests/test_compat.py::test_omegaconf_containers_load_with_weights_only",
           "compat.checkpoint_safety.allow_fairseq_checkpoint_globals", when="torch < 2.4"),
    Change("fairseq.models.distributed_fairseq_model.DistributedDataParallel", "--ddp-backend pytorch_ddp on CPU: "
           "no device_ids", ALL, "tests/test_distributed_resume.py::test_two_cpu_ranks_end_with_same_parameters",
           "compat.distributed_cpu.patch_fairseq_ddp"),
    # fairseq bugs that change what users measure (fairseq_fixes.py)
    Change("fairseq.data.data_utils.batch_by_size", "fairseq bug: the last batch is dropped when its size is not a "
           "multiple of --required-batch-size-multiple", BUGS, "tests/test_foundation.py::test_batches_cover_every_"
           "sentence_with_a_batch_size_multiple", "wrap compat.fairseq_fixes._keep_last_batch"),
    Change("fairseq.ngram_repeat_block.NGramRepeatBlock._no_repeat_ngram", "fairseq bug: --no-repeat-ngram-size "
           "blocks nothing without the CUDA extension", BUGS, "tests/test_foundation.py::test_no_repeat_ngram_blocks_"
           "repeats_of_the_generated_tokens", "wrap compat.fairseq_fixes._generated_tokens_only"),
    Change("fairseq.optim.fp16_optimizer.FP16Optimizer.build_optimizer", "--bf16 on a GPU: the fp32 master copy "
           "flat, as --fp16's (per-parameter Adam otherwise)", BUGS, "tests/test_gpu_speed.py::test_bf16_master_copy_"
           "is_flat_on_cuda_with_fairseqs_updates", "wrap compat.fairseq_fixes._flat_bf16_on_cuda raw"),
    Change("fairseq.search.DiverseBeamSearch.step", "fairseq bug: --diverse-beam-groups ends in IndexError",
           BUGS + " and main", "tests/test_diverse_beam_search.py::test_batch_with_dataset_ids_equals_each_sentence_"
           "alone", "wrap compat.fairseq_fixes._overlap_rows_not_ids"),
    Change("fairseq.models.transformer.transformer_legacy.TransformerModel.build_model", "fairseq bug: "
           "--encoder-layers-to-keep / --decoder-layers-to-keep end in AttributeError (a list split as a string)",
           BUGS, "tests/test_fairseq_options.py::test_layers_to_keep_on_the_command_line_build_and_load",
           "wrap compat.fairseq_fixes._layers_to_keep_as_text func"),
    Change("fairseq.checkpoint_utils.prune_state_dict", "fairseq bug: a model trained with --encoder-layers-to-keep "
           "is pruned again when loaded (Missing key(s))", BUGS, "tests/test_fairseq_options.py::test_layers_to_keep_"
           "on_the_command_line_build_and_load", "wrap compat.fairseq_fixes._prune_unpruned_only"),
    # bad input as one line (entry_checks.py, resume_check.py, command_paths.py)
    Change("fairseq.checkpoint_utils.load_checkpoint_to_cpu", "a missing, cut or corrupt checkpoint and unknown "
           "--model-overrides keys: one line", ALL, "tests/test_checkpoint_files.py::test_fairseq_generate_refuses_a_"
           "checkpoint_cut_short", "wrap guards.entry_checks._checked_load"),
    Change("fairseq.models.fairseq_model.BaseFairseqModel.load_state_dict", "a checkpoint of another dictionary "
           "size: one line naming the dictionary, for every arch (fairseq's own ended in torch's size mismatch)", ALL,
           "tests/test_dictionary_check.py::test_fairseqs_transformer_names_another_dictionary_size",
           "wrap guards.vocabulary_sizes._sizes_checked_first"),
    Change("fairseq.hub_utils.from_pretrained", "the hub's model folder, checkpoint file, data folder and bpe= / "
           "tokenizer= names: one line each, for every model (fairseq went on with None, read a file as an archive, "
           "or ended in KeyError)", ALL, "tests/test_refusals.py::test_hub_names_a_bad_data_folder_bpe_or_language_pair",
           "wrap guards.hub_checks._checked_from_pretrained"),
    Change("fairseq.checkpoint_utils.load_model_ensemble_and_task", "warns of a checkpoint loaded for another "
           "language direction", ALL, "tests/test_input_warnings.py::test_interactive_other_direction_than_the_"
           "checkpoint_warns", "wrap guards.entry_checks._checked_ensemble"),
    Change("fairseq.checkpoint_utils.save_checkpoint", "records the languages trained and the last checkpoint saved "
           "(Ctrl-C message)", ALL, "tests/test_input_warnings.py::test_interactive_other_direction_than_the_checkpoint"
           "_warns", "wrap guards.entry_checks._recorded_save"),
    Change("fairseq.trainer.Trainer.save_checkpoint", "records a fingerprint of the task's dictionaries (extra_state)",
           ALL, "tests/test_dictionary_check.py::test_generate_refuses_another_dictionary_of_the_same_size",
           "wrap guards.dictionary_check._recorded_dictionaries"),
    Change("fairseq.trainer.Trainer.load_checkpoint", "resuming another model: one line naming what differs", ALL,
           "tests/test_resume_check.py::test_resuming_another_model_is_refused_and_changes_nothing",
           "wrap guards.resume_check.checked_load_checkpoint"),
    Change("fairseq.tasks.translation.TranslationTask.setup_task", "a missing data folder or dictionary: one line",
           ALL, "tests/test_refusals.py::test_fairseq_train_names_a_missing_data_folder",
           "wrap guards.entry_checks._checked_setup_task func"),
    Change("fairseq.tasks.FairseqTask.filter_indices_by_size", "a sentence over max_positions: one line naming it",
           ALL, "tests/test_raw_text.py::test_interactive_refuses_an_over_long_line_in_one_line",
           "wrap guards.entry_checks._named_oversize"),
    Change("fairseq.distributed.utils.call_main", "fairseq-train without --max-tokens or --batch-size: one line "
           "naming both", ALL, "tests/test_refusals.py::test_fairseq_train_without_a_batch_size_names_both_flags",
           "wrap guards.entry_checks._named_batch_size"),
    Change("fairseq.checkpoint_utils.verify_checkpoint_directory", "an unusable --save-dir: one line naming the flag",
           ALL, "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "wrap guards.command_paths._checked_save_dir"),
    Change("fairseq.checkpoint_utils.load_checkpoint", "a missing --restore-file: one line naming the flag", ALL,
           "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "wrap guards.command_paths._checked_restore"),
    Change("fairseq.tasks.translation.TranslationTask.load_dataset", "a missing split: one line naming it", ALL,
           "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "wrap guards.command_paths._named_split"),
    Change("fairseq.utils.import_user_module", "--user-dir naming the imported plugin by another path (a link, "
           "`..`): the plugin, not fairseq's 'not globally unique' ImportError", ALL,
           "tests/test_refusals.py::test_user_dir_by_another_path_is_the_imported_plugin",
           "wrap guards.command_paths._plugin_by_any_path"),
    Change("sys.meta_path", "patches fairseq_cli's command modules whenever they are imported (cli_hooks.py)", ALL,
           "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split", "compat.cli_hooks.install"),
    Change("fairseq_cli.train.add_defaults", "a training locks its --save-dir until it ends: a second one into it is "
           "one line naming the holder (a missing batch size is refused there first: fairseq-hydra-train)", ALL, "tests/test_save_dir_lock.py::test_a_second_training_into_a_held_folder_"
           "is_one_line_and_touches_nothing", "on-import guards.save_dir_lock.patch_train", also=("fairseq_cli.train.main",)),
    Change("fairseq.distributed.utils.call_main", "a refusal in a rank torch.multiprocessing.spawn started: its one "
           "line, not spawn's traceback", ALL, "tests/test_save_dir_lock.py::test_a_refusal_in_a_spawned_rank_is_its_"
           "one_line", "wrap guards.save_dir_lock._spawned_refusal"),
    Change("fairseq_cli.generate.main", "an unusable --results-path: one line naming the flag; its file written whole "
           "when the run has finished (fairseq empties it first)", ALL,
           "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "on-import guards.command_paths.patch_generate"),
    Change("fairseq_cli.interactive.main", "a missing --input file: one line naming the flag", ALL,
           "tests/test_refusals.py::test_fairseq_commands_name_an_unusable_folder_file_or_split",
           "on-import guards.command_paths.patch_interactive"),
    # input that translates into a made-up output: warnings (input_checks.py)
    Change("fairseq.tasks.FairseqTask.inference_step", "an empty source's translation is left empty", ALL,
           "tests/test_input_warnings.py::test_generate_leaves_empty_sources_empty_and_says_which",
           "wrap guards.input_checks._empty_source_empty_translation"),
    Change("fairseq.tasks.FairseqTask.get_batch_iterator", "sees the input for the warnings, names an over-long "
           "line and one longer than --max-tokens", ALL, "tests/test_input_warnings.py::test_interactive_over_long_line_is_refused_by_its_input_line_"
           "number", "wrap guards.input_checks._inspected_batches"),
    Change("fairseq.hub_utils.GeneratorHubInterface.sample", "the hub warns of empty and undecodable sentences", ALL,
           "tests/test_input_warnings.py::test_hub_warns_of_empty_and_undecodable_sentences_and_leaves_empty_ones_"
           "empty", "wrap guards.input_checks._hub_sample"),
    Change("fairseq.hub_utils.GeneratorHubInterface.generate", "the hub leaves an empty sentence's output empty; "
           "a beam=, nbest= or length window fairseq's search cannot run: one line",
           ALL, "tests/test_input_warnings.py::test_hub_warns_of_empty_and_undecodable_sentences_and_leaves_empty_"
           "ones_empty", "wrap guards.input_checks._hub_generate"),
    Change("fairseq_cli.interactive.main", "empty, non-UTF-8 or unknown-word lines: warnings with line numbers", ALL,
           "tests/test_input_warnings.py::test_interactive_empty_and_non_utf8_lines_warn_once_each_with_their_numbers",
           "on-import guards.input_checks.patch_interactive", also=("fairseq_cli.interactive.buffered_read",)),
    Change("fairseq_cli.generate.main", "empty source lines: a warning with their numbers", ALL,
           "tests/test_input_warnings.py::test_generate_leaves_empty_sources_empty_and_says_which",
           "on-import guards.input_checks.patch_generate"),
    Change("fairseq.options.parse_args_and_arch", "--arch ARCH --help lists the technique flags; a mistyped arch "
           "is one line", ALL, "tests/test_arch_help.py::test_help_with_a_fusion_arch_lists_the_technique_flags_under_"
           "their_titles", "guards.arch_help.install", stage="registered"),
]

TOOLS = [
    Change("sys.excepthook", "fusion-*: a missing torch or fairseq, or a bad file the command line named: one line",
           ALL, "tests/test_packaging.py::test_missing_torch_hook_leaves_other_missing_modules_alone",
           "fairseq_fusion_tools.cli", stage="fusion-*"),
    Change("argparse.ArgumentParser.parse_known_args", "fusion-*: remembers the files the command line named",
           ALL, "tests/test_mistakes.py::test_mistake_is_one_line", "fairseq_fusion_tools.cli", stage="fusion-*"),
    Change("argparse.ArgumentParser.error", "fusion-*: argparse's error line with the prefix of every refusal", ALL,
           "tests/test_mistakes.py::test_mistake_is_one_line", "fairseq_fusion_tools.cli", stage="fusion-*"),
]


def owner_and_name(target):
    """``fairseq.trainer.Trainer.load_checkpoint`` -> (the class Trainer, "load_checkpoint")."""
    owner, name = target.rsplit(".", 1)
    return pkgutil.resolve_name(owner), name


def _plugin(dotted):
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(f"fairseq_fusion.{module}"), name)


def _wrap(target, factory, unwrap):
    owner, name = owner_and_name(target)
    if getattr(getattr(owner, name), "patched_by_fairseq_fusion", False):  # imported twice (tests, the hub)
        return
    current = {"raw": lambda: vars(owner)[name], "func": lambda: getattr(owner, name).__func__,
               "": lambda: getattr(owner, name)}[unwrap]()
    setattr(owner, name, factory(current))


def apply(stage):
    """Make the changes of one stage, in the list's order."""
    from .cli_hooks import when_imported

    for change in CHANGES:
        if change.stage != stage:
            continue
        kind, function, *unwrap = change.how.split() if " " in change.how else ["call", change.how]
        if kind == "wrap":
            _wrap(change.target, _plugin(function), "".join(unwrap))
        elif kind == "on-import":
            when_imported(change.target.rsplit(".", 1)[0])(_plugin(function))
        else:
            _plugin(function)()


def table():
    """ARCHITECTURE.md's "Global changes" table (tests/test_global_changes.py keeps it equal)."""
    rows = ["| What changes | Why | fairseq | Made by | Not when | Test |", "|---|---|---|---|---|---|"]
    for change in CHANGES + TOOLS:
        what = ", ".join(f"`{name}`" for name in (change.target,) + change.also)
        by = change.how.split(" ")[1] if " " in change.how else change.how
        rows.append(f"| {what} | {change.reason} | {change.fairseq} | `{by}` | {change.when or '-'} | "
                    f"`{change.test}` |")
    return "\n".join(rows) + "\n"

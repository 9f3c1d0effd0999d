"""The domain of every numeric, list and path option of fairseq's parsers, the plugin's and the ``fusion-*`` commands'
(``option_domains.py`` says what a domain is, ``option_checks.py`` where it is checked). Only what no type or choice says is written
here; the plugin's model flags have theirs in ``fusion_options`` (``Flag.bounds``, ``Flag.choices``), the ``fusion-*``
commands' path options their role in ``fairseq_fusion_tools/path_roles.py``.

fairseq's own meanings are kept and said (docs/usage.md, "Option domains"): ``--max-update 0``, ``--max-epoch 0`` and
``--stop-time-hours 0`` are no limit; -1 turns ``--patience``, ``--sampling-topk``, ``--diverse-beam-groups`` and the
``--keep-*`` counts off; fairseq reads 0 there the same way.
"""
import os
import re

from .option_domains import (
    INPUT_FILE, INPUT_FOLDER, INPUT_PREFIX, OUTPUT_FILE, OUTPUT_FOLDER, TEXT, By, Each, Number, Path)

# shapes
ANY = Number()
ANY_INT = Number(integer=True)
NON_NEGATIVE = Number(0)
POSITIVE = Number(0, low_open=True)
COUNT = Number(0, integer=True, what="a count")  # 0 included
AT_LEAST_ONE = Number(1, integer=True, what="an integer")
PROBABILITY = Number(0, 1, high_open=True, what="a probability")  # 1 would drop or smooth everything
FRACTION = Number(0, 1, what="a fraction")
OFF = {"-1": "off"}
NO_LIMIT = {"0": "no limit"}
# the fusion-* commands' budgets (a 0 minutes' budget of fusion-compare would hand fairseq-train --stop-time-hours 0)
NO_NO_LIMIT = "the budget has no 'no limit' value"
SEED = Number(0, 2 ** 32 - 1, integer=True, what="a seed")  # numpy's seeds

# by name pattern, in order; BY_NAME and BY_COMMAND come first
RULES = [
    (re.compile(r".*(dropout|dropconnect|layerdrop)$|^quant_noise_(pq|scalar)$").match, PROBABILITY),
    (re.compile(r".*_eps$").match, POSITIVE),
    (re.compile(r".*(_weight|_lambda|_alpha)$").match, NON_NEGATIVE),
    (re.compile(r"^(encoder|decoder)_(embed_dim|ffn_embed_dim|attention_heads|output_dim)$").match, AT_LEAST_ONE),
    (re.compile(r"^(encoder|decoder)_layers$").match, COUNT),
    (re.compile(r"^max_(source|target)_positions$").match, AT_LEAST_ONE),
    (re.compile(r"^(keep_last_epochs|keep_interval_updates|keep_best_checkpoints)$").match,
     AT_LEAST_ONE.meaning(**{"-1": "keep every one", "0": "keep every one, as fairseq reads it"})),
    (re.compile(r"^max_tokens(_valid)?$").match, Number(1, integer=True, what="a number of tokens per batch")),
    (re.compile(r"^batch_size(_valid)?$").match, Number(1, integer=True, what="a number of sentences per batch")),
]

WARMUP = By("lr_scheduler", {"inverse_sqrt": AT_LEAST_ONE}, COUNT)  # inverse_sqrt divides by it

BY_NAME = {
    # optimization and its budgets
    "lr": Each(POSITIVE), "update_freq": Each(AT_LEAST_ONE),
    "max_update": Number(0, integer=True, what="a number of updates").meaning(**NO_LIMIT),
    "max_epoch": Number(0, integer=True, what="a number of epochs").meaning(**NO_LIMIT),
    "stop_time_hours": Number(0, what="a number of hours").meaning(**NO_LIMIT), "stop_min_lr": NON_NEGATIVE.meaning(**OFF),
    "clip_norm": NON_NEGATIVE, "clip_threshold": POSITIVE, "weight_decay": NON_NEGATIVE,
    "label_smoothing": PROBABILITY, "momentum": PROBABILITY, "slowmo_momentum": PROBABILITY,
    "adam_betas": Each(PROBABILITY, 2), "adamax_betas": Each(PROBABILITY, 2), "lamb_betas": Each(PROBABILITY, 2),
    "adafactor_eps": Each(POSITIVE, 2), "adadelta_rho": FRACTION, "decay_rate": Number(high=0, high_open=True),
    "beta1": PROBABILITY,
    # learning-rate schedulers
    "warmup_updates": WARMUP, "warmup_init_lr": NON_NEGATIVE.meaning(**{"-1": "the scheduler's default"}),
    "warmup_steps": COUNT, "hold_steps": COUNT, "decay_steps": COUNT, "total_num_update": AT_LEAST_ONE,
    "end_learning_rate": NON_NEGATIVE, "power": NON_NEGATIVE, "min_lr": NON_NEGATIVE,
    "lr_shrink": Number(0, 1, low_open=True), "lr_threshold": NON_NEGATIVE, "lr_patience": COUNT,
    "lr_decay": POSITIVE, "lr_deacy_period": AT_LEAST_ONE, "t_mult": POSITIVE,
    "lr_period_updates": POSITIVE.meaning(**{"-1": "the scheduler's default"}),
    "init_lr_scale": NON_NEGATIVE, "final_lr_scale": NON_NEGATIVE, "phase_ratio": Each(FRACTION, 3),
    "force_anneal": AT_LEAST_ONE,
    # checkpoints, validation, logging
    "save_interval": AT_LEAST_ONE, "save_interval_updates": COUNT.meaning(**{"0": "off"}),
    "validate_interval": AT_LEAST_ONE, "validate_interval_updates": COUNT.meaning(**{"0": "off"}),
    "validate_after_updates": COUNT, "keep_interval_updates_pattern": AT_LEAST_ONE.meaning(**OFF),
    "patience": AT_LEAST_ONE.meaning(**{"-1": "off", "0": "off, as fairseq reads it"}),
    "log_interval": AT_LEAST_ONE, "max_valid_steps": AT_LEAST_ONE, "checkpoint_shard_count": AT_LEAST_ONE,
    "heartbeat_timeout": AT_LEAST_ONE.meaning(**OFF), "empty_cache_freq": COUNT.meaning(**{"0": "off"}),
    "seed": SEED, "fixed_validation_seed": SEED,
    # batches and data
    "num_workers": COUNT, "data_buffer_size": COUNT, "required_batch_size_multiple": AT_LEAST_ONE,
    "required_seq_len_multiple": AT_LEAST_ONE, "num_batch_buckets": COUNT, "curriculum": COUNT,
    "num_shards": AT_LEAST_ONE, "shard_id": COUNT, "upsample_primary": AT_LEAST_ONE.meaning(**{"-1": "no upsampling"}),
    "pad": COUNT, "eos": COUNT, "unk": COUNT, "ignore_prefix_size": COUNT,
    "buffer_size": COUNT.meaning(), "all_gather_list_size": AT_LEAST_ONE,
    # precision and distribution
    "fp16_init_scale": AT_LEAST_ONE, "amp_init_scale": AT_LEAST_ONE, "fp16_scale_window": AT_LEAST_ONE,
    "amp_scale_window": AT_LEAST_ONE, "amp_batch_retries": COUNT, "fp16_scale_tolerance": FRACTION,
    "min_loss_scale": POSITIVE, "threshold_loss_scale": POSITIVE,
    "distributed_world_size": AT_LEAST_ONE, "distributed_num_procs": AT_LEAST_ONE, "distributed_rank": COUNT,
    "device_id": COUNT, "nprocs_per_node": AT_LEAST_ONE, "model_parallel_size": AT_LEAST_ONE,
    "distributed_port": Number(1, 65535, integer=True, what="a port").meaning(**{"-1": "unset"}),
    "bucket_cap_mb": AT_LEAST_ONE, "localsgd_frequency": AT_LEAST_ONE, "pipeline_chunks": COUNT,
    "min_params_to_wrap": COUNT, "ema_decay": FRACTION, "ema_start_update": COUNT, "ema_update_freq": AT_LEAST_ONE,
    # models (fairseq's transformer and the archs the plugin's build on)
    "adaptive_softmax_cutoff": Each(AT_LEAST_ONE), "adaptive_softmax_factor": POSITIVE,
    "encoder_layers_to_keep": Each(COUNT), "decoder_layers_to_keep": Each(COUNT), "quant_noise_pq_block_size": COUNT,
    "base_layers": COUNT, "base_shuffle": COUNT, "base_sublayers": AT_LEAST_ONE, "fusion_options_version": AT_LEAST_ONE,
    # generation
    "beam": Number(1, integer=True, what="a number of hypotheses the search keeps"), "beam_mt": COUNT.meaning(),
    "nbest": Number(1, integer=True, what="a number of hypotheses printed per sentence"), "max_len_a": NON_NEGATIVE,
    "max_len_b": COUNT, "max_len_a_mt": NON_NEGATIVE, "max_len_b_mt": COUNT, "min_len": COUNT,
    "lenpen": ANY, "lenpen_mt": ANY, "unkpen": ANY, "temperature": POSITIVE, "lm_weight": ANY,
    "no_repeat_ngram_size": COUNT, "prefix_size": COUNT, "sampling_topk": AT_LEAST_ONE.meaning(**OFF),
    "sampling_topp": Number(0, 1, low_open=True, what="a probability").meaning(**OFF),
    "diverse_beam_groups": AT_LEAST_ONE.meaning(**OFF), "diverse_beam_strength": ANY,
    "diversity_rate": NON_NEGATIVE.meaning(**OFF), "iter_decode_eos_penalty": NON_NEGATIVE,
    "iter_decode_max_iter": COUNT, "iter_decode_with_beam": AT_LEAST_ONE,
    # criterions (the plugin's and fairseq's, with the weights of RULES)
    "diversity_lambda": NON_NEGATIVE, "guided_attention_loss_sigma": POSITIVE, "latency_update_after": COUNT,
    "wer_word_score": ANY, "wer_sil_weight": ANY,
    # tasks
    "switchout_tau_src": NON_NEGATIVE, "switchout_tau_tgt": NON_NEGATIVE, "sentencepiece_alpha": NON_NEGATIVE,
    # fairseq-preprocess
    "workers": AT_LEAST_ONE.meaning(**{"0": "one process, as fairseq reads it"}), "thresholdsrc": COUNT, "thresholdtgt": COUNT, "padding_factor": AT_LEAST_ONE,
    "nwordssrc": AT_LEAST_ONE.meaning(**{"-1": "every word", "0": "every word, as fairseq reads it"}),
    "nwordstgt": AT_LEAST_ONE.meaning(**{"-1": "every word", "0": "every word, as fairseq reads it"}),

    # paths fairseq's commands read
    "data": Path(INPUT_FOLDER, os.pathsep, checked_by="entry_checks (setup_task), after the task's own defaults"),
    "path": Path(INPUT_FILE, os.pathsep, checked_by="checkpoint_files, as each checkpoint is read"),
    "restore_file": Path(INPUT_FILE, means=(("checkpoint_last.pt", "the last checkpoint of --save-dir, if any"),),
                         checked_by="command_paths (a missing one: fairseq would start fresh)"),
    "finetune_from_model": Path(INPUT_FILE, checked_by="command_paths, when the training starts (a plan may name a "
                                "checkpoint still to come)"), "continue_once": Path(INPUT_FILE), "ema_seed_model": Path(INPUT_FILE),
    "lm_path": Path(INPUT_FILE), "encoder_embed_path": Path(INPUT_FILE), "decoder_embed_path": Path(INPUT_FILE),
    "quantization_config_path": Path(INPUT_FILE), "srcdict": Path(INPUT_FILE), "tgtdict": Path(INPUT_FILE),
    "alignfile": Path(INPUT_FILE),
    "input": Path(INPUT_FILE, means=(("-", "standard input"),), checked_by="command_paths (fairseq-interactive)"),
    "replace_unk": Path(INPUT_FILE, means=(("@@ ", "without an alignment dictionary"),)),
    "bpe_codes": Path(INPUT_FILE), "bpe_vocab": Path(INPUT_FILE), "bpe_merges": Path(INPUT_FILE),
    "bpe_vocab_file": Path(INPUT_FILE), "gpt2_encoder_json": Path(INPUT_FILE), "gpt2_vocab_bpe": Path(INPUT_FILE),
    "sentencepiece_model": Path(INPUT_FILE), "sentencepiece_model_path": Path(INPUT_FILE),
    "wer_kenlm_model": Path(INPUT_FILE), "wer_lexicon": Path(INPUT_FILE),
    "init_from_vanilla": Path(INPUT_FILE, checked_by="vanilla_init, as the model is built (a two-stage plan names "
                                                  "the first stage's checkpoint before it exists)"), "phrase_trees": Path(INPUT_FILE), "phrase_parser_dir": Path(INPUT_FOLDER, checked_by="stanza, which downloads its models into it when absent"),
    "trainpref": Path(INPUT_PREFIX), "validpref": Path(INPUT_PREFIX, ","), "testpref": Path(INPUT_PREFIX, ","),
    "user_dir": Path(INPUT_FOLDER, checked_by="fairseq's import_user_module, which loads it first"),
    # paths they write
    "save_dir": Path(OUTPUT_FOLDER, checked_by="command_paths and save_dir_lock"), "destdir": Path(OUTPUT_FOLDER),
    "results_path": Path(OUTPUT_FOLDER, checked_by="command_paths (fairseq-generate)"),
    "tensorboard_logdir": Path(OUTPUT_FOLDER), "log_file": Path(OUTPUT_FILE), "save_predictions": Path(OUTPUT_FILE),

    # free text: names, languages, suffixes, expressions and arguments of other components
    **{name: TEXT for name in (
        "source_lang", "target_lang", "gen_subset", "train_subset", "valid_subset", "checkpoint_suffix",
        "best_checkpoint_metric", "model_overrides", "optimizer_overrides", "post_process", "eos_token",
        "retain_dropout_modules", "eval_bleu_args", "eval_bleu_detok", "eval_bleu_detok_args", "eval_bleu_remove_bpe",
        "distributed_backend", "distributed_init_method", "slowmo_base_algorithm", "pipeline_balance",
        "pipeline_devices", "pipeline_encoder_balance", "pipeline_encoder_devices", "pipeline_decoder_balance",
        "pipeline_decoder_devices", "plasma_path", "aim_repo", "aim_run_hash", "wandb_project", "align_suffix",
        "bpe_separator", "bert_score_lang", "classification_head_name", "ranking_head_name", "latency_avg_type",
        "latency_var_type", "latency_gather_method", "loss_weights", "main_and_cross_weights", "log_keys",
        "epoch2lr", "update2lr", "wer_args", "groups", "encoder_xformers_att_config", "decoder_xformers_att_config",
        "update_epoch_batch_itr", "phrase_parser_lang", "fusion_compile")},
}
# what a fusion-* command's own option of the same name means (the rest: BY_NAME)
BY_COMMAND = {
    ("fusion-significance", "n_samples"): COUNT.meaning(**{"0": "sacreBLEU's default"}),
    ("fusion-score-m2", "beta"): POSITIVE, ("fusion-score-m2", "max_unchanged_words"): COUNT,
    ("fusion-gpu-speed", "warmup_updates"): COUNT, ("fusion-benchmark", "warmup_updates"): COUNT,
    ("fusion-lexical-probe", "warmup_updates"): COUNT, ("fusion-information-probe", "warmup_steps"): COUNT,
    ("fusion-information-probe", "patience"): Number(1, integer=True, what="a number of evaluations", note=NO_NO_LIMIT),
    ("fusion-lexical-probe", "patience"): Number(1, integer=True, what="a number of epochs", note=NO_NO_LIMIT),
    ("fusion-information-probe", "lr"): POSITIVE, ("fusion-lexical-probe", "lr"): POSITIVE,
    ("fusion-information-probe", "max_tokens"): AT_LEAST_ONE,
    ("fusion-compare", "max_update"): Number(1, integer=True, what="a number of updates", note=NO_NO_LIMIT),
    ("fusion-compare", "seeds"): Each(SEED),
    ("fusion-prepare-text", "workers"): AT_LEAST_ONE, ("fusion-prepare-gpt2", "workers"): AT_LEAST_ONE,
    ("fusion-benchmark", "beam"): AT_LEAST_ONE,
}
# the fusion-* commands' own numeric options, wherever they appear
BY_NAME.update({
    "budget_minutes": Number(0, low_open=True, what="a number of minutes", note=NO_NO_LIMIT),
    "max_minutes": Number(0, low_open=True, what="a number of minutes", note=NO_NO_LIMIT),
    "max_epochs": Number(1, integer=True, what="a number of epochs", note=NO_NO_LIMIT),
    "max_steps": Number(1, integer=True, what="a number of steps", note=NO_NO_LIMIT),
    "bootstrap_samples": AT_LEAST_ONE, "budget_from_curve": AT_LEAST_ONE, "budget_tolerance": FRACTION,
    "jobs": AT_LEAST_ONE, "bins": AT_LEAST_ONE, "hidden": AT_LEAST_ONE,
    "eval_interval": Number(1, integer=True, what="a number of steps", note=NO_NO_LIMIT),
    "probe_group_size": AT_LEAST_ONE, "train_sentences": AT_LEAST_ONE, "valid_sentences": AT_LEAST_ONE,
    "max_train_positions": AT_LEAST_ONE, "max_train_sentences": AT_LEAST_ONE, "max_valid_sentences": AT_LEAST_ONE,
    "sentences": AT_LEAST_ONE, "max_items": AT_LEAST_ONE, "max_lines": AT_LEAST_ONE, "max_len": AT_LEAST_ONE,
    "max_ratio": Number(1, what="a length ratio"), "nwords": AT_LEAST_ONE, "bpe_vocab_threshold": COUNT,
    "truncate_source": AT_LEAST_ONE, "min_count": AT_LEAST_ONE, "max_errors": COUNT, "max_fallback": FRACTION,
    "checkpoint_upper_bound": COUNT, "num_epoch_checkpoints": AT_LEAST_ONE, "num_update_checkpoints": AT_LEAST_ONE,
    "decode_batch_size": AT_LEAST_ONE, "decode_length": AT_LEAST_ONE, "decode_sentences": AT_LEAST_ONE,
    "repeats": AT_LEAST_ONE, "rounds": AT_LEAST_ONE, "updates": AT_LEAST_ONE, "profile_steps": AT_LEAST_ONE,
    "compile_updates": AT_LEAST_ONE, "compile_warmup_steps": COUNT, "bench_repeats": AT_LEAST_ONE,
    "fp16_tolerance": POSITIVE, "bf16_tolerance": POSITIVE, "probe_dropout": PROBABILITY,
})
BY_NAME["bpe_merges"] = By("command", {"fusion-prepare-text": AT_LEAST_ONE}, Path(INPUT_FILE))  # a count there

# relations between options that fairseq asserts with a traceback
RELATIONS = [
    (("encoder_embed_dim", "encoder_attention_heads"), lambda d, h: h > 0 and d % h == 0,
     "an embedding size divisible by the number of heads"),
    (("decoder_embed_dim", "decoder_attention_heads"), lambda d, h: h > 0 and d % h == 0,
     "an embedding size divisible by the number of heads"),
    (("shard_id", "num_shards"), lambda i, n: i < n, "a shard id below the number of shards"),
]

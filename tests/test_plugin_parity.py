"""fairseq's ``transformer`` with the plugin loaded is fairseq's transformer: the same losses, parameters and
translations as fairseq without the plugin, except where a change of ``fairseq_fusion/global_changes.py`` is meant to
change them. ``INTENDED`` names each such change and where its effect is tested; the run here uses options under which
none of them acts. In a program of the user's own (not a command-line run), fairseq's transformer gives fairseq's
results, refusals and warnings, the listed fixes of fairseq bugs aside (tests/fairseq_program_probe.py).

Each side is a fresh ``fairseq-train`` / ``fairseq-generate`` process, one with ``--user-dir`` and one without: the
plugin changes fairseq when it is imported, so no process that has imported it can show fairseq without it.
"""
import json
import os
import subprocess
import sys

import torch

from cli_runner import expect_success, run_process
from conftest import REPO, SMALL_MODEL_ARGS
from fairseq_fusion import global_changes

# change -> why the run below does not see it, and the test that shows what it changes
INTENDED = {
    "fairseq.data.data_utils.batch_by_size": "fairseq drops the last batch when its size is not a multiple of "
    "--required-batch-size-multiple; run with 1 here (tests/test_foundation.py::test_batches_cover_every_sentence_"
    "with_a_batch_size_multiple)",
    "fairseq.ngram_repeat_block.NGramRepeatBlock._no_repeat_ngram": "only with --no-repeat-ngram-size "
    "(tests/test_foundation.py::test_no_repeat_ngram_blocks_repeats_of_the_generated_tokens)",
    "fairseq.optim.fp16_optimizer.FP16Optimizer.build_optimizer": "only --bf16 on a GPU (tests/test_gpu_speed.py)",
    "fairseq.search.DiverseBeamSearch.step": "only with --diverse-beam-groups, where fairseq ends in IndexError "
    "(tests/test_diverse_beam_search.py)",
    "fairseq.models.transformer.transformer_legacy.TransformerModel.build_model": "only with --encoder-layers-to-keep "
    "/ --decoder-layers-to-keep, where fairseq ends in AttributeError (tests/test_fairseq_options.py)",
    "fairseq.checkpoint_utils.prune_state_dict": "only for a model trained with --*-layers-to-keep "
    "(tests/test_fairseq_options.py)",
    "fairseq.tasks.FairseqTask.inference_step": "an empty source's translation is left empty, where fairseq makes one "
    "up; the test set has no empty line (tests/test_input_warnings.py)",
    "fairseq.hub_utils.GeneratorHubInterface.generate": "the same for the hub; not used here",
    "fairseq.models.distributed_fairseq_model.DistributedDataParallel": "only --ddp-backend pytorch_ddp on CPU "
    "ranks, where fairseq ends in torch's refusal of device_ids (tests/test_distributed_resume.py)",
    "torch.serialization.get_safe_globals": "fairseq alone cannot load its own checkpoints under torch >= 2.6's "
    "weights_only; its side runs with torch's TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 (tests/test_compat.py)",
    "fairseq.trainer._catalog_shared_params": "only the trainer's log lines: the absent biases of the plugin's "
    "bias-free projections (tests/test_internals.py::test_training_log_names_no_absent_bias_as_shared)",
    "torch.set_num_threads": "fewer threads beside other work changes the CPU's float sums; not when OMP_NUM_THREADS "
    "is set, as on both sides here (tests/test_cpu_threads.py)",
}


def test_the_intended_changes_are_in_the_list_and_every_fairseq_bug_fix_is_named():
    targets = {c.target for c in global_changes.CHANGES}
    assert set(INTENDED) <= targets, sorted(set(INTENDED) - targets)
    bug_fixes = {c.target for c in global_changes.CHANGES if c.reason.startswith("fairseq bug")}
    assert bug_fixes and bug_fixes <= set(INTENDED), sorted(bug_fixes - set(INTENDED))


def run(argv, plugin, tmp_path):
    """``argv`` as a fresh process, with ``--user-dir`` (``plugin``) or as fairseq alone; its output on success."""
    env = {"OMP_NUM_THREADS": "1"}
    if plugin:
        argv = argv[:2] + ["--user-dir", os.path.join(REPO, "fairseq_fusion")] + argv[2:]
    else:
        env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    proc = run_process(argv, cwd=tmp_path, env=env)
    expect_success(proc, f"exit status 0 ({'with the plugin' if plugin else 'fairseq alone'})")
    return proc.stdout + proc.stderr


def train_losses(log):
    """The loss of every update, as fairseq's json log prints it."""
    losses = []
    for line in log.splitlines():
        start = line.find('{"')  # fairseq's json records (its config dumps are Python reprs)
        if start >= 0 and line.rstrip().endswith("}"):
            record = json.loads(line[start:])
            if "loss" in record and "num_updates" in record:
                losses.append((int(record["num_updates"]), record["loss"]))
    return losses


def hypotheses(log):
    """{sentence id: (hypothesis, positional scores)} of a fairseq-generate log."""
    found = {}
    for line in log.splitlines():
        if line.startswith(("H-", "P-")):
            key, _, rest = line.partition("\t")
            kind, number = key.split("-", 1)
            found.setdefault(int(number), {})[kind] = rest
    return {k: (v["H"], v["P"]) for k, v in found.items()}


def test_transformer_trains_and_translates_alike_with_and_without_the_plugin(multi30k_slice, tmp_path):
    results = {}
    for plugin in (False, True):
        save = str(tmp_path / ("plugin" if plugin else "fairseq"))
        log = run(["fairseq-train", multi30k_slice, "--arch", "transformer", *SMALL_MODEL_ARGS,
                   "--share-all-embeddings", "--optimizer", "adam", "--lr", "1e-3", "--lr-scheduler", "inverse_sqrt",
                   "--warmup-updates", "4", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
                   "--dropout", "0.1", "--max-tokens", "1500", "--required-batch-size-multiple", "1",
                   "--max-update", "8", "--save-dir", save, "--no-epoch-checkpoints", "--cpu", "--no-progress-bar",
                   "--log-format", "json", "--log-interval", "1", "--seed", "1", "--num-workers", "0"],
                  plugin, tmp_path)
        checkpoint = os.path.join(save, "checkpoint_last.pt")
        translations = run(["fairseq-generate", multi30k_slice, "--path", checkpoint, "--gen-subset", "valid",
                            "--beam", "4", "--batch-size", "64", "--max-len-a", "0", "--max-len-b", "30", "--cpu",
                            "--num-workers", "0"], plugin, tmp_path)
        state = torch.load(checkpoint, map_location="cpu", weights_only=True)["model"]
        results[plugin] = train_losses(log), state, hypotheses(translations)

    (losses, params, hyps), (plugin_losses, plugin_params, plugin_hyps) = results[False], results[True]
    assert len(losses) == 8 and [u for u, _ in losses] == list(range(1, 9)), losses
    assert plugin_losses == losses
    assert sorted(plugin_params) == sorted(params)
    differing = [name for name in params if not torch.equal(params[name], plugin_params[name])]
    assert not differing, f"parameters differ after 8 updates: {differing[:5]}"
    assert len(hyps) == 1000 and sum(bool(h) for h, _ in hyps.values()) > 900
    assert plugin_hyps == hyps


def fairseq_transformer(data, save, seed, cwd):
    """checkpoint_last.pt of fairseq's own transformer, trained without the plugin for 2 updates."""
    run(["fairseq-train", data, "--arch", "transformer", *SMALL_MODEL_ARGS, "--share-all-embeddings", "--optimizer",
         "adam", "--lr", "1e-3", "--max-tokens", "1500", "--max-update", "2", "--save-dir", save, "--cpu",
         "--no-progress-bar", "--seed", str(seed), "--num-workers", "0", "--no-epoch-checkpoints"], False, cwd)
    return os.path.join(save, "checkpoint_last.pt")


def test_a_program_using_fairseqs_transformer_sees_fairseq_with_the_plugin_imported(multi30k_slice, tmp_path):
    """A program of the user's own: build, hub, an ensemble of two checkpoints, --retain-dropout, layer pruning, a
    resume through checkpoint_utils, and their refusals give what fairseq alone gives, results, exceptions and
    warnings alike (tests/fairseq_program_probe.py, once with the plugin imported first, once without)."""
    a = fairseq_transformer(multi30k_slice, str(tmp_path / "a"), 1, tmp_path)
    b = fairseq_transformer(multi30k_slice, str(tmp_path / "b"), 2, tmp_path)
    found = {}
    for side in ("fairseq", "plugin"):
        env = {"OMP_NUM_THREADS": "1", "PYTHONPATH": REPO}
        if side == "fairseq":
            env["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # fairseq alone cannot load its checkpoints under torch 2.6+
        proc = subprocess.run([sys.executable, os.path.join(REPO, "tests", "fairseq_program_probe.py"), side, a, b,
                               multi30k_slice], capture_output=True, text=True, cwd=tmp_path,
                              env=dict(os.environ, **env))
        assert proc.returncode == 0, proc.stderr[-3000:]
        found[side] = json.loads(proc.stdout.splitlines()[-1])
    fairseq, plugin = found["fairseq"], found["plugin"]
    assert "result" in fairseq["hub"] and "result" in fairseq["ensemble"], fairseq  # the probe did run its cases
    assert "raised" in fairseq["hub missing folder"] and "raised" in fairseq["resume missing"], fairseq
    # the one case a listed fix changes: fairseq's AttributeError on --encoder-layers-to-keep
    assert "TransformerModel.build_model" in next(c.target for c in global_changes.CHANGES if "layers-to-keep" in c.reason)
    assert "'list' object has no attribute 'split'" in fairseq["build pruned"]["raised"]
    assert plugin["build pruned"]["result"][0] < plugin["build"]["result"][0]  # built, one encoder layer fewer
    differing = {case: (fairseq[case], plugin[case]) for case in fairseq
                 if fairseq[case] != plugin[case] and case != "build pruned"}
    assert not differing, json.dumps(differing, indent=1)[:4000]

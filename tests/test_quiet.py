"""The plugin's commands and fairseq's with --user-dir print no notices of fairseq internals; others still show. A
program of the user's own that imports the plugin sees fairseq's notices as without it, unless it asks for the
command-line settings (fairseq_fusion.command_line.configure())."""
import os
import subprocess
import sys

from conftest import REPO, run_cli, train_args


PY = sys.executable


def python(code):
    return subprocess.run([PY, "-c", code], capture_output=True, text=True, env=dict(os.environ, PYTHONWARNINGS=""))


def test_tensorboardx_notice_is_fairseqs_and_filtered():
    # without tensorboardX (pyproject.toml declares it; hidden here) fairseq's import logs it, and with the plugin not
    missing = "import sys; sys.modules['tensorboardX'] = None; import logging; logging.basicConfig(level=logging.INFO); "
    bare = python(missing + "import fairseq.tasks")
    assert "Please install tensorboardX" in bare.stderr
    command = python(missing + "import sys; sys.argv = ['fusion-score-bleu']; import fairseq_fusion, fairseq.tasks")
    assert "tensorboardX" not in command.stderr  # a fusion-* process: filtered before fairseq is imported
    program = python(missing + "import fairseq_fusion, fairseq.tasks")
    assert "Please install tensorboardX" in program.stderr  # a program of the user's own: fairseq's log as it is
    assert "tensorboardX" not in run_cli(["fusion-score-bleu", "--help"]).stderr


def test_filters_are_narrow():
    """Another warning, even of the same category from fairseq's modules, and other log lines still show."""
    proc = python("import warnings, logging; import fairseq_fusion.command_line; fairseq_fusion.command_line.configure(); "
                  "warnings.warn('torch.cuda.amp something else', FutureWarning); "
                  "warnings.warn_explicit('In config: something', UserWarning, 'x.py', 1, module='hydra.x'); "
                  "logging.basicConfig(); logging.getLogger('fairseq.tasks.text_to_speech').warning('other notice')")
    assert "torch.cuda.amp something else" in proc.stderr
    assert "In config: something" in proc.stderr
    assert "other notice" in proc.stderr


def test_fairseq_train_and_generate_with_user_dir_print_no_internal_notices(multi30k_slice, tmp_path):
    save = str(tmp_path / "ckpt")
    train = run_cli(train_args(multi30k_slice, save, max_update=2), env={"PYTHONWARNINGS": ""})
    gen = run_cli(["fairseq-generate", multi30k_slice, "--user-dir", os.path.join(REPO, "fairseq_fusion"),
                   "--path", os.path.join(save, "checkpoint_last.pt"), "--gen-subset", "test", "--max-sentences", "8",
                   "--num-shards", "50", "--shard-id", "0", "--beam", "2", "--max-len-b", "3", "--cpu"],
                  env={"PYTHONWARNINGS": ""})
    out = train.stdout + train.stderr + gen.stdout + gen.stderr
    for needle in ["tensorboardX", "torch.cuda.amp.autocast", "pin_memory", "hydra.experimental",
                   "version_base", "ConfigStore schema", "strict flag", "@package _group_"]:
        assert needle not in out, needle
    assert "Warning" not in out, [line for line in out.splitlines() if "Warning" in line]


def test_fairseqs_config_conversion_warns_without_the_plugin():
    """The control: fairseq's own argparse -> config conversion raises hydra's notices when the plugin is not loaded,
    and none once it is."""
    code = ("{imp}from fairseq import options; from fairseq.dataclass.utils import convert_namespace_to_omegaconf; "
            "convert_namespace_to_omegaconf(options.parse_args_and_arch(options.get_training_parser(), "
            "['data', '--arch', 'transformer']))")
    bare = python(code.format(imp=""))
    assert "ConfigStore schema" in bare.stderr and "hydra.experimental" in bare.stderr
    program = python(code.format(imp="import fairseq_fusion; "))
    assert "ConfigStore schema" in program.stderr  # importing the plugin filters nothing
    command = python(code.format(imp="import fairseq_fusion.command_line; fairseq_fusion.command_line.configure(); "))
    assert "Warning" not in command.stderr, command.stderr

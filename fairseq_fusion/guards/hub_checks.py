"""``from_pretrained``'s arguments (the hub), checked before fairseq reads them: the model folder and its checkpoint
files, the data folder, and the ``bpe=`` / ``tokenizer=`` names. Each refuses in one line (``FusionError``). Every
model's hub goes through ``fairseq.hub_utils.from_pretrained``, wrapped here (``global_changes.py``: for the plugin's models, every model's in a command-line run)."""
import difflib
import functools
import os
import tarfile
import zipfile

from . import option_checks
from .checkpoint_files import check_checkpoint_file, is_local
from ..errors import FusionError


def check_hub_folder(model_name_or_path, checkpoint_file, hub_models):
    """``from_pretrained``'s folder and checkpoint file exist (names of fairseq's model archive aside)."""
    if not is_local(model_name_or_path) or model_name_or_path in hub_models:
        return
    if not os.path.isdir(model_name_or_path):
        raise FusionError(f"from_pretrained: {model_name_or_path}: no such folder; expected the folder that holds "
                          f"{checkpoint_file}")
    for name in checkpoint_file.split(os.pathsep):
        check_checkpoint_file(os.path.join(model_name_or_path, name))


def check_hub_data(model_name_or_path, data_name_or_path):
    """``from_pretrained``'s data folder, where fairseq looks for it: beside the model if it starts with ".", else as
    given (fairseq would go on with ``None`` for a missing path, or read a plain file as an archive)."""
    if not is_local(data_name_or_path) or not is_local(model_name_or_path):
        return
    folder = (os.path.join(model_name_or_path, data_name_or_path) if data_name_or_path.startswith(".")
              else data_name_or_path)
    expected = "the binarized data folder of the model (dict.SRC.txt, dict.TGT.txt) or an archive of it"
    if os.path.isfile(folder) and not (tarfile.is_tarfile(folder) or zipfile.is_zipfile(folder)):
        raise FusionError(f"from_pretrained: data_name_or_path {folder}: is a file; expected {expected}")
    if not os.path.exists(folder):
        raise FusionError(f"from_pretrained: data_name_or_path {folder}: no such folder; expected {expected}")


def check_registry_choices(options):
    """``bpe=`` / ``tokenizer=`` (hub keyword arguments) name a registered one, else one line with the choices."""
    from fairseq.registry import REGISTRIES

    for kind in ("bpe", "tokenizer"):
        value = options.get(kind)
        if value is not None and value not in REGISTRIES[kind]["registry"]:
            near = difflib.get_close_matches(str(value), sorted(REGISTRIES[kind]["registry"]), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise FusionError(f"{kind}={value!r}: no such {kind}{hint}; expected one of "
                              f"{', '.join(sorted(REGISTRIES[kind]['registry']))}")


def _checked_from_pretrained(from_pretrained):
    """fairseq's ``hub_utils.from_pretrained`` (every model's ``from_pretrained`` calls it), arguments checked first."""
    @functools.wraps(from_pretrained)
    def wrapper(model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", archive_map=None, **kwargs):
        check_hub_folder(model_name_or_path, checkpoint_file, archive_map or {})
        check_hub_data(model_name_or_path, data_name_or_path)
        check_registry_choices(kwargs)
        option_checks.check_kwargs(kwargs)
        return from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path, archive_map, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper

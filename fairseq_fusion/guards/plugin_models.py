"""Whether a call of a wrapped fairseq function concerns one of the plugin's models (``global_changes.py``, scope
``plugin``): outside a command-line run, the plugin's checks act on its own models only, and fairseq's models get
fairseq's behaviour. Each takes the wrapped function's arguments."""
from . import input_checks
from ..models.fusion_transformer import FusionTransformerModel, HubModels


def is_plugin_model(model):
    return isinstance(model, FusionTransformerModel)


def model_is_plugin(self, *args, **kwargs):
    """``BaseFairseqModel.load_state_dict(self, ...)``."""
    return is_plugin_model(self)


def trainer_is_plugin(self, *args, **kwargs):
    """``Trainer.save_checkpoint(self, ...)`` / ``load_checkpoint``: the model it trains (unwrapped, as built)."""
    return is_plugin_model(getattr(self, "_model", None))


def hub_loads_plugin_model(*args, archive_map=None, **kwargs):
    """``hub_utils.from_pretrained(...)``, called by a plugin model's ``from_pretrained`` (its ``HubModels``)."""
    if archive_map is None and len(args) > 3:
        archive_map = args[3]
    return isinstance(archive_map, HubModels)


def translates_with_plugin_models(self, generator, models, *args, **kwargs):
    """``FairseqTask.inference_step(self, generator, models, sample, ...)``."""
    return any(is_plugin_model(m) for m in models or ())


def hub_is_plugin(self, *args, **kwargs):
    """``GeneratorHubInterface.sample`` / ``generate``: the hub's models."""
    return any(is_plugin_model(m) for m in getattr(self, "models", ()))


def input_is_reported(*args, **kwargs):
    """``FairseqTask.get_batch_iterator``: inside a plugin hub call (its input report) or a command's."""
    return input_checks.active() is not None

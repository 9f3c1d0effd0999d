"""A program of the user's own that uses fairseq's own ``transformer`` (run as ``python tests/fairseq_program_probe.py
plugin|fairseq CHECKPOINT_A CHECKPOINT_B DATA``, a fresh interpreter, importing the plugin first or not): builds a
model, loads one checkpoint through the hub and two as an ensemble, decodes with ``--retain-dropout``, builds a pruned
model (``--encoder-layers-to-keep``), resumes through ``checkpoint_utils``, and meets a few refusals. Prints, as JSON,
every result, exception (type and message) and warning, so the two runs compare line by line."""
import json
import os
import shutil
import sys
import warnings


def outcome(run):
    """What ``run()`` gives: its result, or the exception's type and message; and the warnings it raised."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            result = {"result": run()}
        except BaseException as e:  # noqa: B036 - a refusal of any kind is what is compared
            result = {"raised": f"{type(e).__module__}.{type(e).__name__}: {e}"}
    result["warnings"] = sorted({f"{w.category.__name__}: {w.message}" for w in seen
                                 if "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in str(w.message)})  # fairseq alone's env
    return result


def main(side, checkpoint_a, checkpoint_b, data):
    if side == "plugin":
        import fairseq_fusion  # noqa: F401
    import torch
    from fairseq import checkpoint_utils, options, tasks, utils
    from fairseq.models.transformer import TransformerModel
    from fairseq.sequence_generator import SequenceGenerator

    def built(*flags):
        args = options.parse_args_and_arch(options.get_training_parser(), [data, "--arch", "transformer", *flags,
                                           "--encoder-layers", "2", "--decoder-layers", "2"])
        task = tasks.setup_task(args)
        torch.manual_seed(1)
        model = task.build_model(args)
        tokens = torch.tensor([[5, 6, 7, 2]])
        model.eval()
        out, _ = model(tokens, torch.tensor([4]), torch.tensor([[2, 5, 6]]))
        return [sum(p.numel() for p in model.parameters()), round(float(out.double().sum()), 6)]

    def hub(**kwargs):
        folder, name = os.path.split(checkpoint_a)
        model = TransformerModel.from_pretrained(folder, name, data, **kwargs)
        return model

    def translate(**kwargs):
        torch.manual_seed(1)
        return hub().translate("a man is riding a bike .", **kwargs)

    def ensemble(**overrides):
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint_a, checkpoint_b],
                                                                          arg_overrides={"data": data, **overrides})
        for m in models:
            m.eval()
        generator = SequenceGenerator(models, task.target_dictionary, beam_size=3, max_len_b=8)
        src_tokens = torch.tensor([[5, 6, 7, 8, 2], [1, 9, 10, 11, 2]])  # left-padded, as fairseq batches
        sample = {"net_input": {"src_tokens": src_tokens, "src_lengths": torch.tensor([5, 4])}, "id": torch.tensor([0, 1])}
        torch.manual_seed(1)
        return [[h["tokens"].tolist() for h in hyps] for hyps in generator.generate(models, sample)]

    def retain_dropout():
        models, cfg, task = checkpoint_utils.load_model_ensemble_and_task([checkpoint_a], arg_overrides={"data": data})
        gen = options.parse_args_and_arch(options.get_generation_parser(), [data, "--retain-dropout"])
        from fairseq.dataclass.utils import convert_namespace_to_omegaconf

        models[0].prepare_for_inference_(convert_namespace_to_omegaconf(gen))
        tokens = torch.tensor([[5, 6, 7, 2]])
        torch.manual_seed(3)
        a, _ = models[0](tokens, torch.tensor([4]), torch.tensor([[2, 5]]))
        b, _ = models[0](tokens, torch.tensor([4]), torch.tensor([[2, 5]]))
        return [round(float(a.double().sum()), 6), round(float(b.double().sum()), 6)]

    def resumed():
        state = checkpoint_utils.load_checkpoint_to_cpu(checkpoint_a)
        return [sorted(state), state["optimizer_history"][-1]["num_updates"], sorted(state["model"])[:3]]

    scratch = "probe-scratch"  # relative, the same name on both sides: messages naming its files compare equal
    os.makedirs(scratch)
    cut = os.path.join(scratch, "cut.pt")
    with open(checkpoint_a, "rb") as f, open(cut, "wb") as g:
        g.write(f.read()[:1000])
    results = {
        "build": outcome(lambda: built()),
        "build pruned": outcome(lambda: built("--encoder-layers-to-keep", "0")),
        "hub": outcome(lambda: translate(beam=2)),
        "hub beam 0": outcome(lambda: translate(beam=0)),
        "hub empty sentence": outcome(lambda: hub().translate("", beam=2)),
        "hub missing folder": outcome(lambda: TransformerModel.from_pretrained(os.path.join(scratch, "nothing"))),
        "ensemble": outcome(lambda: ensemble()),
        "ensemble unknown override": outcome(lambda: ensemble(no_such_option=1)),
        "retain dropout": outcome(retain_dropout),
        "resume": outcome(resumed),
        "resume missing": outcome(lambda: checkpoint_utils.load_checkpoint_to_cpu(os.path.join(scratch, "none.pt"))),
        "resume cut": outcome(lambda: checkpoint_utils.load_checkpoint_to_cpu(cut)),
        "data folder missing": outcome(lambda: tasks.setup_task(options.parse_args_and_arch(
            options.get_training_parser(), [os.path.join(scratch, "none"), "--arch", "transformer"]))),
        "import_user_module": outcome(lambda: utils.import_user_module(None)),
    }
    shutil.rmtree(scratch)
    print(json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:])

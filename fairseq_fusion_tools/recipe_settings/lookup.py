"""What a recipe step gets from the tables: the paper an arch trains with, a task's and paper's data and BPE
settings, and the fairseq-train settings and options of an arch on a task (fairseq imported only where the model's
flags must be parsed)."""
import math

from .tables import PAPERS, TASKS


def preset_sources():
    """arch -> its preset's paper (``@describe(source=...)``), read from the presets' source text: what
    ``fairseq_fusion.models.catalog`` registers, without the seconds of importing fairseq (the tests check that
    both agree for every arch)."""
    import ast
    import glob
    import os

    from ..data_paths import PLUGIN_DIR

    def called(node, name):
        f = node.func if isinstance(node, ast.Call) else None
        return f is not None and (getattr(f, "id", None) == name or getattr(f, "attr", None) == name)

    sources = {}
    for path in sorted(glob.glob(os.path.join(PLUGIN_DIR, "models", "*.py"))):
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            source = [kw.value.value for d in fn.decorator_list if called(d, "describe") for kw in d.keywords
                      if kw.arg == "source" and isinstance(kw.value, ast.Constant)]
            names = [d.args[1].value for d in fn.decorator_list if called(d, "register_model_architecture")
                     and len(d.args) == 2 and isinstance(d.args[1], ast.Constant)]
            if source and len(names) == 1:
                sources[names[0]] = source[0]
    return sources


def source_of(arch):
    """The paper an arch's preset names (``@describe(source=...)``), None for an arch that is no preset (fairseq's)."""
    source = preset_sources().get(arch)
    if source is None:  # not a preset of the plugin's files (e.g. registered at run time): ask the catalog
        from fairseq_fusion.models import catalog

        entry = catalog.CATALOG.get(arch)
        source = None if entry is None else entry.source
    return source


def paper_of(arch, task=None):
    """The paper whose settings an arch trains with; baselines (fusion_transformer*) take the task's first paper,
    and so does every arch on a task with a setting of its own (multi30k_en_de)."""
    if task is not None and check_task(task).get("every_arch"):
        return TASKS[task]["papers"][0]
    source = source_of(arch)
    if source is not None and source != "vaswani":
        return source
    if task is not None:
        return TASKS[task]["papers"][0]
    raise ValueError(f"arch {arch!r} belongs to no paper; pass --paper")


def check_task(task):
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; tasks: {', '.join(TASKS)}")
    return TASKS[task]


def check_paper(paper, task):
    if paper not in PAPERS:
        raise ValueError(f"unknown paper {paper!r}; papers: {', '.join(PAPERS)}")
    if paper not in TASKS[task]["papers"] and paper != "vaswani":
        raise ValueError(f"paper {paper!r} does not train on {task} (its papers: {', '.join(TASKS[task]['papers'])}); "
                         f"pass --paper with one of them or vaswani")
    return PAPERS[paper]


def bpe_settings(task, paper):
    check_task(task)
    spec = check_paper(paper, task)["bpe"]
    # max_ratio: Moses clean-corpus-n.perl's default 9 unless the paper's pipeline says otherwise
    out = dict(merges=32000, threshold=None, truecase=False, max_len=250, max_ratio=9.0)
    out.update(spec.get("default", {}))
    out.update(spec.get(task, {}))
    return out


def data_settings(task, paper):
    """Dev/test sets, direction and preprocessed release of ``task`` as ``paper`` used them."""
    t = check_task(task)
    spec = check_paper(paper, task).get("data", {}).get(task, {})
    valid = spec.get("valid", t["valid"])
    src, tgt = (t["tgt"], t["src"]) if spec.get("reverse") else (t["src"], t["tgt"])
    pre = spec.get("preprocessed")
    test = spec.get("test", t["test"])[: len(pre["test"]) if pre else None]  # a release has its own test sets
    return dict(src=src, tgt=tgt, valid=valid, valid_name="+".join(name for _, name in valid), test=test, preprocessed=pre,
                registration=t.get("registration", []))


def pick(value, size, task):
    """A setting that may differ by size, or by (size, task): its value for ``size`` on ``task``."""
    if isinstance(value, dict):
        return value.get((size, task), value.get(size))
    return value


def model_args(arch, flags=()):
    """The arguments fairseq-train builds for ``arch`` with the model ``flags`` given after ``--``
    (fairseq's own parser: the preset's values, overridden by the flags)."""
    import fairseq_fusion  # noqa: F401  (registers the archs)
    from fairseq import options
    from fairseq.models import ARCH_CONFIG_REGISTRY, ARCH_MODEL_REGISTRY

    if arch not in ARCH_CONFIG_REGISTRY:
        fusion = sorted(a for a, m in ARCH_MODEL_REGISTRY.items() if m.__name__ == "FusionTransformerModel")
        raise ValueError(f"unknown arch {arch!r}; fusion_transformer archs: {', '.join(fusion)}")
    args, _ = options.parse_args_and_arch(options.get_training_parser(), ["data", "--arch", arch, *flags], parse_known=True)
    return args


def model_size(arch, flags=()):
    """('big' when the model has 1024-dim embeddings, else 'base'; that dim), from the arch and its flags."""
    dim = getattr(model_args(arch, flags), "encoder_embed_dim", 512)
    return ("big" if dim >= 1024 else "base"), dim


def warmup_of(paper, args, size, default):
    """Emelin et al. A.1 from the model's flags (``args``: ``model_args``; None: the plain transformer)."""
    if paper == "emelin":  # A.1: 4k base, 6k with lexical shortcuts, 8k with feature-fusion, 16k for every big model
        if size == "big":
            return 16000
        if getattr(args, "lexical_shortcuts", False):
            return 8000 if getattr(args, "lexical_shortcuts_feature_fusion", False) else 6000
    return default


def train_settings(task, arch, paper=None, n_gpus=0, max_tokens=None, size=None, flags=(), n_nodes=1):
    """fairseq-train settings of ``arch`` on ``task`` as the paper trained it, for ``n_gpus`` GPUs (0: CPU) on each of
    ``n_nodes`` nodes; ``flags``: model flags given after ``--`` (they decide the size and the techniques, not the arch
    name)."""
    check_task(task)
    paper = paper or paper_of(arch, task)
    spec = dict(check_paper(paper, task)["train"])
    spec.update(spec.pop("by_task", {}).get(task, {}))
    # the size from the model the command trains: the preset, the setting's model flags (Multi30k's small model), then
    # the flags after --
    margs = model_args(arch, [*spec.get("model_args", []), *flags])
    dim = getattr(margs, "encoder_embed_dim", 512)
    size, dim = (size, 1024 if size == "big" else 512) if size else (("big" if dim >= 1024 else "base"), dim)
    max_tokens = max_tokens or (spec["batch_tokens"] if task == "multi30k_en_de" else 4096)
    devices = max(1, n_gpus) * n_nodes  # the paper's tokens per update over every GPU of every node
    warmup = warmup_of(paper, margs, size, spec["warmup"])
    import fairseq_fusion.fusion_options as fusion_options

    s = dict(
        paper=paper, size=size, arch=arch, criterion=fusion_options.default_criterion(arch),
        batch_tokens=spec["batch_tokens"], max_tokens=max_tokens,
        update_freq=max(1, math.ceil(spec["batch_tokens"] / (devices * max_tokens))),
        max_update=pick(spec["updates"], size, task), warmup=warmup,
        # Vaswani et al. Eq. 3: lrate = d_model^-0.5 * min(step^-0.5, step * warmup^-1.5), peak at step = warmup;
        # fairseq's inverse_sqrt with --lr = that peak is the same schedule
        lr=spec["lr"] or dim ** -0.5 * warmup ** -0.5,
        dropout=pick(spec["dropout"], size, task), fp16=bool(n_gpus) and pick(spec["fp16"], size, task),
        share=spec["share"], save_interval_updates=spec["save_interval_updates"],
        average=pick(spec["average"], size, task), beam=spec["beam"], lenpen=spec["lenpen"],
        max_positions=spec.get("max_positions"), gen_args=list(spec.get("gen_args", [])),
        # the task's settings for the arch's technique (by arch-name prefix), e.g. SurfaceFusion's lambda on Ro-En
        model_args=list(spec.get("model_args", [])) + [
            a for prefix, extra in spec.get("arch_args", {}).items() if arch.startswith(prefix) for a in extra],
    )
    return s


def train_command_args(s, n_gpus=0, n_nodes=1):
    """The fairseq-train options (after DATA) for settings ``s`` (``n_gpus`` per node; the launcher's flags of several
    nodes are recipe.sh's)."""
    args = ["--arch", s["arch"], "--criterion", s["criterion"]]
    if s["criterion"] == "label_smoothed_cross_entropy" or "label_smoothed" in s["criterion"]:
        args += ["--label-smoothing", "0.1"]
    args += ["--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--clip-norm", "0.0",
             "--lr", f"{s['lr']:.8g}", "--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(s["warmup"]),
             "--warmup-init-lr", "1e-07", "--max-tokens", str(s["max_tokens"]), "--update-freq", str(s["update_freq"]),
             "--max-update", str(s["max_update"]), "--save-interval-updates", str(s["save_interval_updates"]),
             "--keep-interval-updates", str(max(s["average"] or 1, 5)), "--no-epoch-checkpoints"]
    args += ["--share-all-embeddings"] if s["share"] == "all" else ["--share-decoder-input-output-embed"]
    if s["dropout"] is not None:
        args += ["--dropout", str(s["dropout"])]
    if s["max_positions"]:
        args += ["--max-source-positions", str(s["max_positions"]), "--max-target-positions", str(s["max_positions"])]
    if s["fp16"]:
        args += ["--fp16"]
    if n_gpus * n_nodes > 1:
        args += ["--ddp-backend", "legacy_ddp"]
    if n_gpus == 0:
        args += ["--cpu"]
    return args + list(s["model_args"])

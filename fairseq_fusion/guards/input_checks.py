"""Input that translates without an error into a made-up or wrong output, said in one warning line per kind.

fairseq-interactive, fairseq-generate and the hub (``translate``/``sample``/``generate``) each keep an ``InputReport``
for their run (``reporting``). What they read reaches it where all three pass:

- ``FairseqTask.get_batch_iterator``: the source side of the dataset about to be batched (empty sources; words the
  dictionary does not know, for raw text); an over-long sentence's refusal names its line as the user counts it, and so
  does the refusal of a sentence longer than ``--max-tokens`` (``entry_checks.too_many_tokens``);
- fairseq-interactive's line reader (``read_lines``, in place of fairseq's ``buffered_read``): each line decoded on
  its own, a line that is not UTF-8 read with U+FFFD and counted (fairseq's raised a traceback for a file, made
  surrogates of stdin's bytes);
- the hub's ``sample``: sentences holding undecodable bytes (surrogate escapes).

A UTF-8 byte-order mark at the start of the input (fairseq-interactive's first line, a hub sentence) is removed, with
a warning (``text_files``): fairseq would read it as part of the first word, an ``<unk>``.

An empty source gets an empty translation (``FairseqTask.inference_step``), one output per input line as before.
At the end of the run the report warns once per kind, with counts and line numbers (``errors.warn``). The language
direction of the checkpoint is checked where it is loaded (``entry_checks``).
"""
import contextlib
import functools
import inspect
import os
import sys

from ..errors import warn
from . import option_checks
from .text_files import BOM, bom_removed, without_bom

_ACTIVE = []  # the report of the run in progress (one at a time; a nested call adds to it)
SHOWN = 10  # line numbers a warning lists before "and N more"


def active():
    return _ACTIVE[-1] if _ACTIVE else None


@contextlib.contextmanager
def reporting(make_report):
    """The run's report (``make_report()``), warned when the run ends without an error; inside a run: None."""
    if _ACTIVE:
        yield None
        return
    report = make_report()
    _ACTIVE.append(report)
    try:
        yield report
    finally:
        _ACTIVE.pop()
    report.warn()


def _numbered(noun, numbers):
    shown = ", ".join(str(n) for n in numbers[:SHOWN])
    more = f" and {len(numbers) - SHOWN} more" if len(numbers) > SHOWN else ""
    return f"{noun if len(numbers) == 1 else noun + 's'} {shown}{more}"


def _source_side(dataset):
    """(tokens, sizes) of a dataset's source side (LanguagePairDataset's ``src``, through wrappers), or None."""
    while dataset is not None and not hasattr(dataset, "src"):
        dataset = getattr(dataset, "dataset", None)
    return None if dataset is None else (dataset.src, dataset.src_sizes)


class InputReport:
    """What one run's input holds that makes its output wrong: empty sources, lines that are not UTF-8, words unknown
    to the dictionary (raw text only, when ``--bpe prepared`` is not given). Numbers count from 1, as users count."""

    def __init__(self, what, one, noun, raw_text=False, data=None, prepared=False, prepared_flag="--bpe prepared"):
        self.what, self.one, self.noun = what, one, noun  # e.g. "input lines", "input line {}", "line"
        self.raw_text, self.prepared, self.prepared_flag = raw_text, prepared, prepared_flag
        self.data = str(data).split(os.pathsep)[0] if data else None
        self.first_number = 1  # the number of the next dataset's first sentence
        self.total, self.empty, self.not_utf8 = 0, [], []
        self.words, self.unknown, self.dictionary = 0, 0, None

    def number(self, index):
        return self.first_number + index

    def inspect(self, dataset, task):
        """Counts the empty sources of ``dataset`` (and, for raw text, its words the dictionary does not know)."""
        side = _source_side(dataset)
        dictionary = getattr(task, "source_dictionary", None)
        if side is None or dictionary is None:
            return
        src, sizes = side
        eos, unk = dictionary.eos(), dictionary.unk()
        self.total += len(sizes)
        self.empty += [self.number(i) for i, size in enumerate(sizes)
                       if size == 0 or (size == 1 and int(src[i][-1]) == eos)]
        if self.raw_text:
            for i in range(len(sizes)):
                tokens = src[i]
                self.words += int(tokens.ne(eos).sum())
                self.unknown += int(tokens.eq(unk).sum())
            lang = getattr(getattr(task, "cfg", None), "source_lang", None)
            self.dictionary = os.path.join(self.data or ".", f"dict.{lang}.txt") if lang else "the source dictionary"

    def messages(self):
        out = []
        n = len(self.empty)
        if n:
            out.append(f"{n} of {self.total} {self.what} {'was' if n == 1 else 'were'} empty "
                       f"({_numbered(self.noun, self.empty)}): "
                       f"{'its translation is' if n == 1 else 'their translations are'} left empty")
        n = len(self.not_utf8)
        if n:
            out.append(f"{n} of {max(self.total, self.not_utf8[-1])} {self.what} {'is' if n == 1 else 'are'} not "
                       f"valid UTF-8 ({_numbered(self.noun, self.not_utf8)}): the bytes that are not became words "
                       "the dictionary does not know (<unk>)")
        if self.raw_text and not self.prepared and 2 * self.unknown > self.words:
            out.append(f"{self.unknown} of {self.words} source words ({100 * self.unknown // self.words}%) are not in "
                       f"{self.dictionary}, so the model read them as <unk>: {self.hint()}")
        return out

    def hint(self):
        manifest = os.path.join(self.data, "prepare.json") if self.data else None
        if manifest and os.path.exists(manifest):
            return (f"{manifest} holds the pipeline the data folder was prepared with (fusion-prepare-text): "
                    f"{self.prepared_flag} applies it to raw text")
        return "give the input tokenized and split into subwords as the training data was (--tokenizer, --bpe)"

    def warn(self):
        for message in self.messages():
            warn(message)


def _empty_hypothesis(best, eos):
    """``best`` as a translation of nothing: the end of sentence alone, scored 0."""
    empty = dict(best)
    empty["tokens"] = best["tokens"][-1:].clone().fill_(eos)
    empty["positional_scores"] = best["positional_scores"].new_zeros(1)
    empty["score"] = best["score"].new_zeros(()) if hasattr(best["score"], "new_zeros") else 0.0
    if getattr(best.get("attention"), "dim", lambda: 0)() == 2:
        empty["attention"] = best["attention"][:, -1:]
    if getattr(best.get("alignment"), "numel", lambda: 0)():
        empty["alignment"] = best["alignment"][:0]
    return empty


def _empty_source_empty_translation(inference_step):
    @functools.wraps(inference_step)
    def wrapper(self, generator, models, sample, *args, **kwargs):
        from fairseq.models import FairseqEncoderDecoderModel

        hypos = inference_step(self, generator, models, sample, *args, **kwargs)
        dictionary = getattr(self, "source_dictionary", None)
        src = sample.get("net_input", {}).get("src_tokens")
        if dictionary is None or src is None or not all(isinstance(m, FairseqEncoderDecoderModel) for m in models):
            return hypos
        eos = dictionary.eos()
        for row in src.ne(dictionary.pad()).logical_and(src.ne(eos)).sum(1).eq(0).nonzero().flatten().tolist():
            if hypos[row]:
                hypos[row] = [_empty_hypothesis(hypos[row][0], eos)]
        return hypos

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _inspected_batches(get_batch_iterator):
    @functools.wraps(get_batch_iterator)
    def wrapper(self, dataset, *args, **kwargs):
        from .entry_checks import MAX_TOKENS_ASSERTION, OversizeError, too_many_tokens

        report = active()
        if report is not None:
            report.inspect(dataset, self)
        try:
            return get_batch_iterator(self, dataset, *args, **kwargs)
        except OversizeError as e:
            if report is None:
                raise
            raise e.named(report.one.format(report.number(e.index))) from None
        except AssertionError as e:  # fairseq's batch_by_size: a sentence longer than --max-tokens
            if not str(e).startswith(MAX_TOKENS_ASSERTION):
                raise
            given = inspect.signature(get_batch_iterator).bind(self, dataset, *args, **kwargs).arguments
            name = None if report is None else (lambda index: report.one.format(report.number(index)))
            raise too_many_tokens(self, dataset, given.get("max_tokens"), given.get("max_positions"), name) from None

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _not_utf8(text):
    """Whether ``text`` holds undecodable bytes as surrogate escapes (Python's way to keep them)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)


def read_lines(input, buffer_size):
    """fairseq-interactive's ``buffered_read`` (``input``: a file or "-" for stdin), each line decoded on its own: one
    that is not UTF-8 is read with U+FFFD and its number reported. Sets the report's number of each buffer's first
    line before handing it on."""
    report = active()
    if input == "-":
        stream = getattr(sys.stdin, "buffer", sys.stdin)
        opened = contextlib.nullcontext(stream)
    else:
        opened = open(input, "rb")
    buffer, first = [], 1
    with opened as stream:
        for number, line in enumerate(stream, 1):
            if isinstance(line, str) and _not_utf8(line):  # a text stdin that kept the bytes as surrogates
                line = line.encode("utf-8", "surrogateescape")
            if isinstance(line, bytes):
                try:
                    line = line.decode("utf-8")
                except UnicodeDecodeError:
                    line = line.decode("utf-8", "replace")
                    if report is not None:
                        report.not_utf8.append(number)
            if number == 1:
                line = without_bom(line, "standard input" if input == "-" else f"--input {input}")
            buffer.append(line.strip())
            if len(buffer) >= buffer_size:
                if report is not None:
                    report.first_number = first
                yield buffer
                buffer, first = [], number + 1
    if buffer:
        if report is not None:
            report.first_number = first
        yield buffer


def _interactive_reported(main, cfg):
    bpe = getattr(cfg.bpe, "_name", None) if cfg.bpe is not None else None
    with reporting(lambda: InputReport("input lines", "input line {}", "line", raw_text=True, data=cfg.task.data,
                                       prepared=bpe == "prepared")):
        return main(cfg)


def _generate_reported(main, cfg):
    with reporting(lambda: InputReport(f"source lines of {cfg.dataset.gen_subset}",
                                       f"source line {{}} of {cfg.dataset.gen_subset}", "line")):
        return main(cfg)


def _hub_report(hub):
    from ..encoders.prepared import PreparedBPE

    return InputReport("input sentences", "input sentence {}", "sentence", raw_text=True, data=getattr(hub.cfg.task, "data", None),
                       prepared=isinstance(hub.bpe, PreparedBPE), prepared_flag='bpe="prepared"')


def _hub_without_bom(sentences):
    """The hub's input without a byte-order mark at the start of a sentence (a file read without ``utf-8-sig``), with
    one warning naming the sentences."""
    one = isinstance(sentences, str)
    lines = [sentences] if one else sentences
    if not isinstance(lines, (list, tuple)) or not any(isinstance(s, str) and s.startswith(BOM) for s in lines):
        return sentences
    numbers = [i + 1 for i, s in enumerate(lines) if isinstance(s, str) and s.startswith(BOM)]
    warn(bom_removed(f"input {_numbered('sentence', numbers)}", several=len(numbers) > 1))
    lines = [s[len(BOM):] if isinstance(s, str) and s.startswith(BOM) else s for s in lines]
    return lines[0] if one else lines


def _hub_sample(sample):
    @functools.wraps(sample)
    def wrapper(self, sentences, *args, **kwargs):
        with reporting(lambda: _hub_report(self)) as report:
            sentences = _hub_without_bom(sentences)
            if report is not None:
                lines = [sentences] if isinstance(sentences, str) else sentences
                report.not_utf8 += [i + 1 for i, s in enumerate(lines) if isinstance(s, str) and _not_utf8(s)]
            return sample(self, sentences, *args, **kwargs)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper


def _hub_generate(generate):
    @functools.wraps(generate)
    def wrapper(self, *args, **kwargs):
        from types import SimpleNamespace

        from .entry_checks import check_generation, named_length_limits

        # what fairseq's generate searches with: its config, beam= (its own default) and the other keywords over it
        call = inspect.signature(generate).bind(self, *args, **kwargs)
        call.apply_defaults()
        given, extra = self.cfg.generation, call.arguments.get("kwargs", {})
        settings = SimpleNamespace(**{k: extra.get(k, getattr(given, k, None)) for k in
                                      ("nbest", "min_len", "max_len_a", "max_len_b")}, beam=call.arguments["beam"])
        option_checks.check_kwargs(dict(extra, beam=call.arguments["beam"]))
        check_generation(settings, hub=True)
        with reporting(lambda: _hub_report(self)):
            return named_length_limits(lambda: generate(self, *args, **kwargs), settings, hub=True)

    wrapper.patched_by_fairseq_fusion = True
    return wrapper

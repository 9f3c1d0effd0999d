"""One domain per option: what the values of an option of any entry point must be (issue 58).

A domain says what a value must be: a number in a range (``Number``; NaN and infinity are never in one), a list
of such numbers (``Each``), a path the command reads or writes (``Path``), or free text (``TEXT``). A value with a
meaning of fairseq's own that lies outside the range (``--max-update 0``: no limit; ``--patience -1``: off) is one of
the number's ``means``, said in the refusal. Where an option means something else for another component
(``--warmup-updates 0`` is valid for every scheduler but ``inverse_sqrt``), ``By`` gives its domain per component.
What a parser's types and choices already say (a choice, a flag, an integer) is not written down again; the table,
``option_domain_table.py``, holds only the rest, and ``tests/test_option_domains.py`` fails when a parser of an entry
point gains an option the table has no domain for.

``option_checks.py`` refuses a value outside its domain. Standard library only.
"""
import ast
import math
import os
from dataclasses import dataclass, field, replace
from typing import Optional, Tuple


@dataclass(frozen=True)
class Number:
    """A finite number in [low, high] (None: unbounded; ``*_open``: the bound excluded), or one of ``means``."""
    low: Optional[float] = None
    high: Optional[float] = None
    integer: bool = False
    low_open: bool = False
    high_open: bool = False
    what: str = ""  # the value in words ("a probability"); default "an integer" / "a number"
    means: Tuple[Tuple[float, str], ...] = ()  # (value, its meaning) of fairseq's own outside the range
    note: str = ""  # said after the domain, e.g. "the budget has no 'no limit' value"

    def meaning(self, **values):
        """This domain with ``means`` added: ``meaning(**{"0": "no limit"})``."""
        return replace(self, means=self.means + tuple((float(k), v) for k, v in values.items()))

    def refusal(self, value):
        """None where ``value`` is in the domain, else what was expected, in words."""
        number = as_number(value, self.integer)
        if number is not None and any(number == v for v, _ in self.means):
            return None
        if number is not None and math.isfinite(number) and self._in_range(number):
            return None
        return "expected " + str(self)

    def _in_range(self, x):
        above = self.low is None or (x > self.low if self.low_open else x >= self.low)
        below = self.high is None or (x < self.high if self.high_open else x <= self.high)
        return above and below

    def __str__(self):
        what = self.what or ("an integer" if self.integer else "a number")
        lo, hi = (None if b is None else shown(b) for b in (self.low, self.high))
        if lo is not None and hi is not None:
            text = f"{what} in {'(' if self.low_open else '['}{lo}, {hi}{')' if self.high_open else ']'}"
        elif lo is not None:
            text = f"{what} {'>' if self.low_open else '>='} {lo}"
        elif hi is not None:
            text = f"{what} {'<' if self.high_open else '<='} {hi}"
        else:
            text = f"a finite {what.split(' ', 1)[-1]}" if what in ("a number", "an integer") else what
        inside = [f"{shown(v)}: {m}" for v, m in self.means if self._in_range(v)]
        outside = [f", or {shown(v)} ({m})" for v, m in self.means if not self._in_range(v)]
        return (text + (f" ({'; '.join(inside)})" if inside else "") + "".join(outside)
                + (f" ({self.note})" if self.note else ""))


def shown(value):
    """A number as the user types it: 4294967295, not 4.29497e+09; a list comma-separated."""
    if isinstance(value, (list, tuple)):
        return ",".join(shown(v) for v in value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Each:
    """A list of numbers: comma-separated text, a Python literal list or tuple (``"(0.9, 0.98)"``), or a list;
    ``count``: how many it must have (0: any number, at least one)."""
    number: Number
    count: int = 0

    def refusal(self, value):
        items = _as_list(value)
        if items is None or not items or (self.count and len(items) != self.count):
            many = f"{self.count} " if self.count else ""
            return f"expected a list of {many}numbers, each {self.number}"
        for item in items:
            if self.number.refusal(item) is not None:
                return f"expected each value {self.number} ({shown(item)} is not)"
        return None

    def __str__(self):
        return f"a list of {self.count or ''}{' ' if self.count else ''}numbers, each {self.number}"


INPUT_FILE, INPUT_FOLDER, INPUT_PREFIX, OUTPUT_FILE, OUTPUT_FOLDER = (
    "an input file", "an input folder", "an input prefix", "an output file", "an output folder")


@dataclass(frozen=True)
class Path:
    """A path the command reads (``INPUT_*``: it must exist, as a file or a folder; a prefix: some PREFIX.* file) or
    writes (``OUTPUT_*``: no folder where a file goes, no file where a folder goes). ``several``: a separator of several
    paths (``os.pathsep`` in fairseq's ``--path``, ``,`` in ``--testpref``). ``means``: values of fairseq's own that name
    no path as given (``--restore-file checkpoint_last.pt``: the one in ``--save-dir``). A URL (``s3://``, ``https://``)
    is left to fairseq's file manager; ``checked_by`` names where a path is checked already."""
    role: str
    several: str = ""
    means: Tuple[Tuple[str, str], ...] = ()
    checked_by: str = ""

    def refusal(self, value):
        if not isinstance(value, str) or not value or self.checked_by or any(value == v for v, _ in self.means):
            return None
        paths = value.split(self.several) if self.several else [value]
        for path in paths:
            if not path or "://" in path:
                continue
            wrong = _path_refusal(self.role, path)
            if wrong is not None:
                return f"{path}: {wrong}" if len(paths) > 1 else wrong
        return None

    def __str__(self):
        return self.role


@dataclass(frozen=True)
class Text:
    """Free text (a name, a language, arguments of another command): any value."""
    what: str = "text"

    def refusal(self, value):
        return None

    def __str__(self):
        return self.what


TEXT = Text()


@dataclass(frozen=True)
class By:
    """A domain that depends on a component (``kind``: ``lr_scheduler``, ``task``, ...; a ``fusion-*`` command:
    ``command``): ``domains`` by the component's name, ``default`` for every other."""
    kind: str
    domains: dict = field(default_factory=dict)
    default: object = None

    def pick(self, components):
        return self.domains.get(components.get(self.kind), self.default)


def as_number(value, integer):
    """``value`` as a float (True/False are no numbers; text is read as the parser would), or None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value) if integer else float(value)
        except ValueError:
            return None
    if not isinstance(value, (int, float)) or (integer and isinstance(value, float) and not value.is_integer()):
        return None
    return float(value)


def _as_list(value):
    if isinstance(value, str):
        text = value.strip()
        try:
            value = ast.literal_eval(text) if text[:1] in "([" else [t for t in text.split(",")]
        except (ValueError, SyntaxError):
            return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = [value]
    return list(value) if isinstance(value, (list, tuple)) else None


def _path_refusal(role, path):
    if role == INPUT_FILE:
        if os.path.isdir(path):
            return "a folder, expected a file"
        return None if os.path.isfile(path) else "no such file"
    if role == INPUT_FOLDER:
        if os.path.isfile(path):
            return "a file, expected a folder"
        return None if os.path.isdir(path) else "no such folder"
    if role == INPUT_PREFIX:
        folder, stem = os.path.split(path)
        names = os.listdir(folder or ".") if os.path.isdir(folder or ".") else []
        return None if any(n.startswith(stem + ".") and os.path.isfile(os.path.join(folder, n)) for n in names) \
            else f"no file {path}.* (expected the prefix of the files {os.path.basename(path)}.LANG)"
    if role == OUTPUT_FILE:
        return "a folder, expected a file to write" if os.path.isdir(path) else None
    if role == OUTPUT_FOLDER:
        return "a file, expected a folder to write into" if os.path.isfile(path) else None
    return None

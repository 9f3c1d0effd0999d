"""The one line for a file the user named on a fusion-* command line that cannot be read or written.

An ``OSError`` whose ``filename`` is a path of the command line (the value of a flag or positional, a file under that
folder, beside it or named after it: ``OUT.lock``, ``PREFIX.en``, ``DEST/...``), or a ``UnicodeDecodeError`` while a
frame of the traceback reads such a file, becomes ``fairseq-fusion: error: PROG: FLAG VALUE: what is wrong, what was
expected``; a reader's refusal of such a file (``fairseq_fusion.guards.text_files.TextFileError``) gets the
same head from ``head_for``, which ``remember`` registers in ``fairseq_fusion.errors.NAMED_BY``. Errors on paths the user did not give keep their traceback (a bug). ``cli/__init__.py`` records the
command's parsed arguments (``remember``) and calls ``line_for`` from its excepthook; the tools' ``fail``, called while
handling such an error, says it in the same line. Standard library only: the scorers run without torch and fairseq.
"""
import errno
import gzip
import io
import os
import sys

PREFIX = "fairseq-fusion: error: "  # fairseq_fusion.errors.PREFIX, not imported: that would load the plugin
TRACEBACK_ENV = "FAIRSEQ_FUSION_TRACEBACK"  # as fairseq_fusion.errors: set, real tracebacks are shown
_PARSED = [None]  # (parser, namespace, argv) of the first fusion-* parser that parsed this command line (sys.argv)


def remember(parser, namespace):
    """Keep the first parse of ``sys.argv`` (the command's own parser; fairseq's parsers a command builds later take
    its prog too); a new command line (a forked command) replaces it."""
    if _PARSED[0] is None or _PARSED[0][2] != sys.argv:
        _PARSED[0] = (parser, namespace, list(sys.argv))
    from fairseq_fusion import errors  # loaded already: the command line's configure() imported the plugin

    if head_for not in errors.NAMED_BY:
        errors.NAMED_BY.append(head_for)


def head_for(path):
    """``PROG: FLAG VALUE`` (``: PATH`` where the file is not the value itself) for a file of this command line, or
    None (another command line's file, or none's)."""
    if _PARSED[0] is None or _PARSED[0][2] != sys.argv:
        return None
    owner = _owner(path)
    if not owner:
        return None
    label, value = owner
    head = f"{label} {value}" if not label.endswith(":") else label[:-1]
    if os.path.abspath(path) != os.path.abspath(value):
        head += f": {path}"
    return f"{_PARSED[0][0].prog}: {head}"


def _given():
    """(label, value) for every string the command line gave: ``--flag VALUE``, positionals, ``NAME=FILE``'s FILE."""
    if _PARSED[0] is None:
        return []
    parser, namespace, _ = _PARSED[0]
    argv = sys.argv[1:]
    given = []
    for action in parser._actions:
        value = getattr(namespace, action.dest, None)
        label = max(action.option_strings, key=len) if action.option_strings else (action.metavar or action.dest)
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, str) and v and any(a == v or a.endswith("=" + v) for a in argv):
                given.append((label, v))
                if "=" in v:
                    given.append((f"{label} {v}:", v.split("=", 1)[1]))
    return given


def _closeness(value, path):
    """How ``path`` belongs to the user's ``value``: 3 it is the value, 2 inside it or named after it (VALUE.x,
    .VALUE.part beside it), 1 a folder above it (an output under a regular file); 0 not at all."""
    v, p = os.path.abspath(value), os.path.abspath(path)
    if p == v:
        return 3
    if p.startswith((v + os.sep, v + ".")) or (os.path.dirname(p) == os.path.dirname(v)
                                                and os.path.basename(v) in os.path.basename(p)):
        return 2
    return 1 if v.startswith(p.rstrip(os.sep) + os.sep) else 0


def _owner(path, below_first=False):
    """(label, value) of the command-line value ``path`` belongs to most closely (then the longest), or None;
    ``below_first``: a value below ``path`` first (a folder that is a file: the output under it is the mistake)."""
    found = [((below_first and c == 1), c, len(v), label, v) for label, v in _given() for c in [_closeness(v, path)] if c]
    return max(found)[3:] if found else None


def _first_file_above(path):
    """The part of ``path`` (itself or a folder above it) that exists and is not a folder, or None."""
    p = os.path.abspath(path)
    while p and p != os.path.dirname(p):
        if os.path.exists(p) and not os.path.isdir(p):
            return p
        p = os.path.dirname(p)
    return None


def _what_is_wrong(e, path):
    code = e.errno
    if code == errno.ENOENT and e.strerror != os.strerror(code):  # a message of the tools' own
        return e.strerror
    if code == errno.ENOENT:
        parent = os.path.dirname(os.path.abspath(path))
        return f"{path}: no such file or folder" + ("" if os.path.isdir(parent) else f" (no folder {parent})")
    if code == errno.EISDIR:
        return f"{path} is a folder; expected a file"
    if code in (errno.ENOTDIR, errno.EEXIST) and _first_file_above(path):
        return f"{_first_file_above(path)} is a file; expected a folder"
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = "read-only file system" if code == errno.EROFS else "permission denied"
        if os.path.exists(path) and not os.access(path, os.R_OK):
            return f"{path} cannot be read ({why}); expected a file this user can read"
        return f"cannot write {path} ({why}); expected a folder this user can write in"
    return f"{path}: {e.strerror or e}"


def _open_bytes(path):
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rb") if gz else open(path, "rb")


def _bad_line(path, encoding):
    """(1-based line number, first bad byte) of the first line of ``path`` that ``encoding`` cannot decode, or None."""
    try:
        with _open_bytes(path) as f:
            for number, line in enumerate(f, 1):
                try:
                    line.decode(encoding)
                except UnicodeDecodeError as e:
                    return number, line[e.start]
    except (OSError, EOFError):
        return None
    return None


def _files_being_read(tb):
    """Paths of the files the traceback's frames were reading (open text files, or path strings), innermost first."""
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in list(frame.f_locals.values()):
            if isinstance(value, io.TextIOBase) and isinstance(getattr(value, "name", None), str):
                yield value.name
            elif isinstance(value, str) and len(value) < 4096 and os.path.isfile(value):
                yield value


def _decode_line(e, tb):
    encoding = "UTF-8" if e.encoding.replace("-", "").lower() == "utf8" else e.encoding
    for path in _files_being_read(tb):
        owner = _owner(path)
        bad = owner and _bad_line(path, e.encoding)
        if bad:
            number, byte = bad
            return owner, path, f"line {number} is not {encoding} (byte 0x{byte:02x}); expected {encoding} text"
    return None


def line_for(exc, tb):
    """The one line (without the ``fairseq-fusion: error:`` prefix) for ``exc`` on a path the user gave, or None."""
    if isinstance(exc, UnicodeDecodeError):
        found = _decode_line(exc, tb)
        if found is None:
            return None
        (label, value), path, what = found
    elif isinstance(exc, OSError) and (exc.filename or exc.filename2):
        path = next(p for p in (exc.filename, exc.filename2) if p)
        path = os.fsdecode(path) if isinstance(path, (str, bytes)) else None
        owner = path and _owner(path, below_first=exc.errno in (errno.ENOTDIR, errno.EEXIST))
        if not owner:
            return None
        (label, value), what = owner, _what_is_wrong(exc, path)
    else:
        return None
    prog = _PARSED[0][0].prog
    head = f"{label} {value}" if not label.endswith(":") else label[:-1]
    if os.path.abspath(path) != os.path.abspath(value) and not what.startswith(path) and path not in what:
        head += f": {path}"
    return f"{prog}: {head}: {what}"


def shows_tracebacks():
    return os.environ.get(TRACEBACK_ENV, "").lower() not in ("", "0", "false", "no")


def fail(message):
    """End a command with one line on stderr (``fairseq-fusion: error: ...``) and exit status 1. Called while handling
    an error on a file the command line named (a catch-all ``except ValueError`` that met a UnicodeDecodeError), the
    line says what is wrong with that file instead."""
    _, handled, tb = sys.exc_info()
    line = handled is not None and not shows_tracebacks() and line_for(handled, tb)
    message = str(line or message)
    raise SystemExit(PREFIX + message.replace(PREFIX, ""))

"""Where a prepared folder is written: built beside --destdir and renamed into place when complete (a non-empty
--destdir refused unless --overwrite), or, for --add-test, staged inside it and moved in at the end; fusion-prepare-text's
and fusion-prepare-gpt2's way of writing. The folder records what its command wrote in it (``path_roles.record_made``):
``--overwrite`` replaces it only while it holds nothing else, no input of the command and no running training
(``path_roles.check``, on the command line before any work)."""
import argparse
import os
import shutil
import tempfile
from contextlib import contextmanager

from fairseq_fusion_tools import path_roles
from fairseq_fusion_tools.user_files import fail


def move_into(staging, destdir):
    """Move every file of ``staging`` to the same place in ``destdir``, where none may exist yet; on an
    error or Ctrl-C midway the files moved so far are removed again, so ``destdir`` is as it was."""
    path_roles.record_added(staging, destdir)  # what is added, in a record of its own moved in with it
    moves = [(os.path.join(root, f), os.path.join(destdir, os.path.relpath(os.path.join(root, f), staging)))
             for root, _, files in os.walk(staging) for f in files]
    taken = [dst for _, dst in moves if os.path.lexists(dst)]
    if taken:
        fail(f"--add-test would replace {', '.join(taken)}: files of --destdir {destdir} that its own splits do not account for")
    done = []
    try:
        for src, dst in moves:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.rename(src, dst)
            done.append(dst)
    except BaseException:
        for dst in done:
            os.remove(dst)
        raise


def is_prepared(folder):
    """A folder fusion-prepare-text or fusion-prepare-gpt2 wrote (or an older version, without prepare.json)."""
    return os.path.exists(os.path.join(folder, "prepare.json")) or any(
        f.startswith("dict.") and f.endswith(".txt") for f in os.listdir(folder))


def check_destination(destdir, overwrite):
    """Refuse a --destdir that holds anything (a prepared folder or other files) unless --overwrite."""
    if os.path.lexists(destdir) and not os.path.isdir(destdir):
        fail(f"--destdir {destdir} is a file, not a folder")
    if overwrite or not os.path.isdir(destdir) or not os.listdir(destdir):
        return
    if is_prepared(destdir):
        fail(f"--destdir {destdir} already holds a prepared folder: pass --overwrite to replace it (it stays as it is "
             "until the new one is complete), or give another --destdir")
    fail(f"--destdir {destdir} is not empty and not a prepared folder (fusion-prepare-text's or fusion-prepare-gpt2's): "
         "give a new or empty --destdir (--overwrite replaces only a folder this command made, holding nothing else)")


@contextmanager
def staged_folder(destdir):
    """Yield a new folder beside ``destdir`` (same parent, so the rename is atomic); when the block
    completes it records what it holds (``path_roles.record_made``) and takes ``destdir``'s place (an old ``destdir``
    is moved aside, then removed); on an error or Ctrl-C it is removed and ``destdir`` is untouched."""
    destdir = os.path.realpath(destdir)
    parent, name = os.path.split(destdir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.building-", dir=parent)
    try:
        yield tmp
        path_roles.record_made(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private
        if os.path.isdir(destdir) and os.listdir(destdir):
            old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
            os.replace(destdir, old)
            try:
                os.replace(tmp, destdir)
            except BaseException:
                os.replace(old, destdir)
                raise
            shutil.rmtree(old)
        else:
            os.replace(tmp, destdir)  # a new name, or an empty folder's
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def name_the_destination(log, tmp, destdir):
    """fairseq-preprocess logged the staged folder as its --destdir: name the real one."""
    if os.path.exists(log):
        with open(log, encoding="utf-8") as f:
            text = f.read()
        with open(log, "w", encoding="utf-8") as f:
            f.write(text.replace(tmp, destdir))


def build_in_place(args, build):
    """``build(staged_args)`` into a folder beside ``args.destdir``, renamed into place when complete (a non-empty
    --destdir refused unless --overwrite); fusion-prepare-text's and fusion-prepare-gpt2's way of writing."""
    check_destination(args.destdir, args.overwrite)
    with staged_folder(args.destdir) as tmp:
        build(argparse.Namespace(**{**vars(args), "destdir": tmp}))
        name_the_destination(os.path.join(tmp, "preprocess.log"), tmp, os.path.realpath(args.destdir))
    print(f"| prepared {args.destdir} (built as {os.path.basename(tmp)} beside it, then renamed)", flush=True)

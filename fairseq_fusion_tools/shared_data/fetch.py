"""fusion-fetch-data (``make data``): the data the demo and the tests read, from its public origins, into the cache.

Which folder: ``data_paths.data_root()``'s order. ``FUSION_DATA`` (``DATA=``) and ``../shared/data`` are read-only:
where one of them is the data folder, it is checked against the table and nothing is written (a line says what it
lacks). Otherwise the cache (``FUSION_DATA_CACHE``, default ``~/.cache/fairseq-fusion/data``), or ``--dest DIR``, is
filled: every file of ``files.FILES`` whose checksum does not match is downloaded from its origin at the table's
commit (``FUSION_DATA_URL``: from ``URL/<its path in the layout>`` instead, a mirror), checked (SHA-256), made into its
layout (gzipped, the sgm's segments) and renamed into place. A download cut short resumes (HTTP Range) from
``DEST/.partial/``; a file with other bytes is refused and never put in place; one fetch at a time per folder (a
kernel lock, ``DEST/.fetch.lock``), so a second waits and then finds the files there. Prints the data folder on
stdout (the Makefile reads it), the rest on stderr. Standard library only, but the lock.
"""
import gzip
import hashlib
import http.client
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib

from .. import data_paths
from ..progress import progress
from ..user_files import fail
from . import files as data_files

MIRROR_ENV = "FUSION_DATA_URL"
LOCK_NAME = ".fetch.lock"
PARTIAL = ".partial"  # downloads in progress (resumed from there), and files before their rename into place
CHUNK = 1 << 16
TIMEOUT_S = 60


class FetchError(Exception):
    """A download that failed or brought other bytes: its one line."""


class CutShort(Exception):
    """The connection closed before the whole file came: what came is kept for the next run to resume."""


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def file_ok(entry, path):
    """Whether ``path`` holds ``entry``'s file: its checksum, or for a gzipped origin file its content's."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return False
    return sha256(data) == entry.sha256 or _content_ok(entry, data)


def _content_ok(entry, data):
    if entry.transform != "gzip":
        return False
    try:
        return sha256(gzip.decompress(data)) == entry.origin_sha256
    except (OSError, EOFError, zlib.error):
        return False


def not_in_place(root, files=data_files.FILES):
    """The entries of ``files`` missing from ``root`` or there with other bytes."""
    return [f for f in files if not file_ok(f, os.path.join(root, f.path))]


def _download(url, part):
    """The bytes at ``url``, appended to what ``part`` holds of them already (HTTP Range); (bytes, resumed)."""
    have = os.path.getsize(part) if os.path.exists(part) else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as e:
        if e.code != 416 or not have:  # 416: the part is whole already (checked by the caller)
            raise
        response = None
    if response is not None:
        with response:
            resumed = bool(have) and response.status == 206  # a server without Range support sends it all again
            os.makedirs(os.path.dirname(part), exist_ok=True)
            expected, got = response.length, 0  # Content-Length (None where the server sends none)
            with open(part, "ab" if resumed else "wb") as out:
                try:
                    while True:
                        chunk = response.read(CHUNK)
                        if not chunk:
                            break
                        out.write(chunk)
                        got += len(chunk)
                except (http.client.IncompleteRead, ConnectionError, TimeoutError) as e:
                    raise CutShort(e) from None
            if expected is not None and got < expected:
                raise CutShort(f"{got} of {expected} bytes")
    else:
        resumed = True
    with open(part, "rb") as f:
        return f.read(), resumed


def download(url, part, good, dest):
    """The bytes at ``url`` for which ``good(bytes)`` holds; a resumed download with other bytes is fetched once more
    from the start. FetchError (one line) where the network fails or the bytes stay other."""
    for _ in range(2):
        try:
            data, resumed = _download(url, part)
        except CutShort as e:
            raise FetchError(f"the download of {url} was cut short ({e}): run again to resume it") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            if isinstance(e, OSError) and getattr(e, "filename", None):
                raise  # a file of the destination: the caller's line names it
            reason = getattr(e, "reason", None) or e
            raise FetchError(f"could not download {url} ({reason}); without network put the files in place by hand: "
                             f"each file of fairseq_fusion_tools/shared_data/files.py from its URL there (or a copy of "
                             f"../shared/data) into {dest}, or set FUSION_DATA=DIR to such a folder, or "
                             f"{MIRROR_ENV}=a mirror's URL") from None
        if good(data):
            return data
        os.remove(part)
        if not resumed:
            break
    raise FetchError(f"{url} has other bytes than the table's (SHA-256 {sha256(data)}, fairseq_fusion_tools/"
                     "shared_data/files.py): refused, nothing put in place")


def layout_bytes(entry, dest, mirror, origins):
    """``entry``'s file as laid out: from the mirror as is, or from its origin, checked and transformed. ``origins``
    keeps the origin files of this run by URL (the sgm gives two files)."""
    part = os.path.join(dest, PARTIAL, entry.path + ".part")
    if mirror:
        url = mirror.rstrip("/") + "/" + urllib.parse.quote(entry.path)
        data = download(url, part, lambda b: sha256(b) == entry.sha256 or _content_ok(entry, b), dest)
    else:
        url = entry.origin_url
        if url not in origins:
            origins[url] = download(url, part, lambda b: sha256(b) == entry.expected_origin_sha256, dest)
        data = origins[url]
        if entry.transform == "gzip":
            data = gzip.compress(data, compresslevel=9, mtime=0)
        elif entry.transform == "sgm":
            data = data_files.sgm_segments(data)
            if sha256(data) != entry.sha256:
                raise FetchError(f"the segments of {url} differ from {entry.path}'s (SHA-256 {sha256(data)}): "
                                 "refused, nothing put in place")
    if os.path.exists(part):
        os.remove(part)
    return data


def put_in_place(dest, entry, data):
    """Write ``data`` beside the others in ``DEST/.partial`` and rename it to ``entry``'s path: whole or not there."""
    target = os.path.join(dest, entry.path)
    tmp = os.path.join(dest, PARTIAL, entry.path + ".new")
    os.makedirs(os.path.dirname(tmp), exist_ok=True)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def locked(dest, wait_s=0.2):
    """Take the fetch lock of ``dest``, waiting while another fetch holds it."""
    from fairseq_fusion import file_locks

    lock = os.path.join(dest, LOCK_NAME)
    said = False
    while not file_locks.take(lock):
        if not said:
            print(f"fusion-fetch-data: waiting for another fetch into {dest}", file=sys.stderr, flush=True)
            said = True
        time.sleep(wait_s)
    return lock


def fetch(dest, files=data_files.FILES, mirror=None, show=True):
    """Every entry of ``files`` in place in ``dest`` with its checksum; returns the entries downloaded."""
    from fairseq_fusion import file_locks

    os.makedirs(dest, exist_ok=True)
    lock = locked(dest)
    try:
        todo = not_in_place(dest, files)  # again under the lock: another fetch may have made them
        origins = {}
        for entry in progress(todo, show=show, desc="fusion-fetch-data", unit="file"):
            put_in_place(dest, entry, layout_bytes(entry, dest, mirror, origins))
        return todo
    finally:
        _tidy(os.path.join(dest, PARTIAL))
        file_locks.free(lock)


def _tidy(folder):
    """Remove the empty folders below ``folder`` and itself (a part of a cut download stays, to be resumed)."""
    for root, _, _ in sorted(os.walk(folder), key=lambda w: -len(w[0])):
        try:
            os.rmdir(root)
        except OSError:
            pass


def read_only_roots():
    return {p for p in (data_paths.given_root(), data_paths.shared_root()) if p}


def main(args):
    mirror = os.environ.get(MIRROR_ENV) or None
    dest = os.path.abspath(args.dest) if args.dest else None
    if dest and os.path.exists(dest) and any(os.path.exists(p) and os.path.samefile(dest, p)
                                             for p in read_only_roots()):
        fail(f"fusion-fetch-data: --dest {args.dest}: the data folder of FUSION_DATA or ../shared/data, read-only: "
             "give another folder")
    root = dest or data_paths.data_root()
    if not dest and root in read_only_roots():
        if not os.path.isdir(root):
            fail(f"fusion-fetch-data: FUSION_DATA (DATA=) {root}: no such folder; unset it to use ../shared/data or "
                 "the cache, where the files are fetched")
        lacking = not_in_place(root)
        if lacking:
            print(f"fusion-fetch-data: {root} (read-only, nothing written there) lacks {len(lacking)} of the "
                  f"{len(data_files.FILES)} files or holds other bytes, first {lacking[0].path}; the cache is used "
                  "only without FUSION_DATA (DATA=) and ../shared/data", file=sys.stderr)
        print(root)
        return
    try:
        fetched = fetch(root, mirror=mirror, show=not args.quiet)
    except FetchError as e:
        fail(f"fusion-fetch-data: {e}")
    if not args.quiet:
        source = mirror or "the origins (raw.githubusercontent.com)"
        what = f"{len(fetched)} fetched from {source}" if fetched else "all there"
        print(f"fusion-fetch-data: {len(data_files.FILES)} files in {root}, checksums match ({what})", file=sys.stderr)
    print(root)

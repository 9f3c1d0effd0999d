"""fusion-fetch-data (make data) without the internet: a copy of the shared data served from 127.0.0.1 (a small HTTP
server with Range support, in a thread) through FUSION_DATA_URL, or as the origins' files (their URLs pointed at it).
Fetched into empty folders: checksums, a cut download resumed, other bytes refused, two fetches at once, the read-only
folders, the demo's first step on the fetched data; and the table against what the code reads and the shared README."""
import gzip
import hashlib
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import urllib.parse

import pytest

from conftest import REPO, run_cli
from fairseq_fusion.errors import PREFIX
from fairseq_fusion_tools import data_paths
from fairseq_fusion_tools.shared_data import fetch as data_fetch, files as data_files


class Handler(http.server.BaseHTTPRequestHandler):
    """GET of ``server.root``/PATH, ``Range: bytes=N-`` answered 206; ``server.cut``: paths whose next answer stops
    half way (the full Content-Length announced); ``server.corrupt``: paths served with a byte changed."""

    def do_GET(self):
        srv = self.server
        path = urllib.parse.unquote(self.path.lstrip("/"))
        srv.log.append((path, self.headers.get("Range")))
        try:
            with open(os.path.join(srv.root, path), "rb") as f:
                data = f.read()
        except OSError:
            self.send_error(404)
            return
        if path in srv.corrupt:
            data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
        start = int(re.fullmatch(r"bytes=(\d+)-", self.headers["Range"]).group(1)) if self.headers.get("Range") else 0
        if start >= len(data) and start:
            self.send_error(416)
            return
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(data) - start))
        self.end_headers()
        body = data[start:]
        if path in srv.cut:
            srv.cut.discard(path)
            body = body[:len(body) // 2]
            self.close_connection = True
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.root, srv.log, srv.cut, srv.corrupt = data_paths.data_root(), [], set(), set()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def fetch_cli(dest, url, check=True):
    return run_cli(["fusion-fetch-data", "--dest", str(dest), "--quiet"], env={data_fetch.MIRROR_ENV: url}, check=check)


def files_under(folder):
    return sorted(os.path.relpath(os.path.join(r, n), folder) for r, _, ns in os.walk(folder) for n in ns)


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def one_line(proc):
    lines = [line for line in proc.stderr.splitlines() if line.startswith(PREFIX)]
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return lines[0]


def test_fetch_into_an_empty_folder_gives_the_shared_layout_and_a_second_fetch_does_nothing(server, tmp_path):
    dest = tmp_path / "data"
    proc = fetch_cli(dest, server.url)
    assert proc.stdout == f"{dest}\n"
    assert files_under(dest) == sorted([f.path for f in data_files.FILES] + [data_fetch.LOCK_NAME])
    for f in data_files.FILES:  # byte for byte the served copy, and the table's checksum
        assert sha(dest / f.path) == sha(os.path.join(server.root, f.path)) == f.sha256, f.path
    assert len(server.log) == len(data_files.FILES)
    fetch_cli(dest, server.url)
    assert len(server.log) == len(data_files.FILES)  # all there: no request


def test_a_cut_download_resumes_where_it_stopped(server, tmp_path):
    dest, name = tmp_path / "data", "multi30k/train.en.gz"
    server.cut.add(name)
    line = one_line(fetch_cli(dest, server.url, check=False))
    assert "cut short" in line and f"{server.url}/{name}" in line and "run again" in line
    assert not (dest / name).exists()  # a partial file is never put in place
    part = dest / data_fetch.PARTIAL / (name + ".part")
    half = part.stat().st_size
    assert 0 < half < os.path.getsize(os.path.join(server.root, name))
    fetch_cli(dest, server.url)
    assert (name, f"bytes={half}-") in server.log
    assert sha(dest / name) == data_files.BY_PATH[name].sha256 and not part.exists()


def test_other_bytes_are_refused_and_a_corrupt_file_is_replaced(server, tmp_path):
    dest, name = tmp_path / "data", "wmt14/newstest2014.en"
    server.corrupt.add(name)
    line = one_line(fetch_cli(dest, server.url, check=False))
    assert f"{server.url}/{name} has other bytes" in line and "refused" in line
    assert not (dest / name).exists() and not (dest / data_fetch.PARTIAL / (name + ".part")).exists()
    server.corrupt.clear()
    fetch_cli(dest, server.url)
    broken = ["multi30k/val.de.gz", "contrastive/mucow/translation/de-en.key.txt.gz"]
    (dest / broken[0]).write_bytes((dest / broken[0]).read_bytes()[:-10])  # cut short
    (dest / broken[1]).write_bytes(gzip.compress(b"other text\n"))  # a gzip file of other content
    before = len(server.log)
    fetch_cli(dest, server.url)
    assert sorted(p for p, _ in server.log[before:]) == sorted(broken)
    assert all(data_fetch.file_ok(data_files.BY_PATH[b], dest / b) for b in broken)


def test_from_the_origins_files_are_checked_then_gzipped_extracted_or_renamed(server, tmp_path, monkeypatch):
    """The origins' files (gunzipped where the layout gzipped them, the sgm files) served as their repositories
    would: the layout is made from them, each file checked."""
    chosen = [f for f in data_files.FILES if f.path.startswith(("wmt14/", "alignment/zhen/"))
              or f.path.startswith("contrastive/distil_lingeval/clause_omission.mt/")]
    origin_root = tmp_path / "origins"
    for f in chosen:
        with open(os.path.join(server.root, f.path), "rb") as src:
            data = src.read()
        if f.transform == "gzip":
            data = gzip.decompress(data)
        elif f.transform == "sgm":
            continue  # its sgm is the .sgm.gz entry's origin
        target = origin_root / f.origin.repo / f.origin.commit / f.origin_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    server.root = str(origin_root)
    monkeypatch.setattr(data_files.File, "origin_url", property(
        lambda f: f"{server.url}/{f.origin.repo}/{f.origin.commit}/{urllib.parse.quote(f.origin_path)}"))
    dest = str(tmp_path / "data")
    assert {f.path for f in data_fetch.fetch(dest, files=chosen, show=False)} == {f.path for f in chosen}
    for f in chosen:
        assert data_fetch.file_ok(f, os.path.join(dest, f.path)), f.path
        if f.transform != "gzip":  # the renamed alignment files and the extracted segments: byte for byte
            assert sha(os.path.join(dest, f.path)) == f.sha256, f.path
    sgm = f"{data_files.JIANT.repo}/{data_files.JIANT.commit}/test-full/newstest2014-deen-src.en.sgm"
    assert [p for p, _ in server.log].count(sgm) == 1  # one download gives the sgm and its segments


def test_without_network_one_line_names_the_url_and_the_files_by_hand(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed once the block ends: nothing listens
    line = one_line(fetch_cli(tmp_path / "data", url, check=False))
    assert f"could not download {url}/multi30k/" in line and "by hand" in line and str(tmp_path / "data") in line


def test_a_second_fetch_waits_for_the_first_and_finds_the_files(server, tmp_path, monkeypatch):
    from filelock import FileLock

    dest = tmp_path / "data"
    dest.mkdir()
    first = FileLock(str(dest / data_fetch.LOCK_NAME))
    first.acquire(timeout=0)
    waited = []

    def first_finishes(_seconds):  # while the second waits, the first puts every file in place and frees the lock
        waited.append(True)
        shutil.copytree(server.root, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns("README.md"))
        first.release()

    monkeypatch.setattr(data_fetch.time, "sleep", first_finishes)
    assert data_fetch.fetch(str(dest), mirror=server.url, show=False) == [] and waited and server.log == []


def test_two_fetch_processes_at_once_download_each_file_once(server, tmp_path):
    dest = tmp_path / "data"
    env = dict(os.environ, OMP_NUM_THREADS="1", FUSION_CPU_THREADS="off", PYTHONPATH=os.pathsep.join(sys.path),
               **{data_fetch.MIRROR_ENV: server.url})
    argv = [sys.executable, "-m", "fairseq_fusion_tools.cli.fetch_data", "--dest", str(dest), "--quiet"]
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in "ab"]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert sorted(p for p, _ in server.log) == sorted(f.path for f in data_files.FILES)
    assert data_fetch.not_in_place(str(dest)) == []


def test_read_only_folders_are_checked_never_written(tmp_path, monkeypatch):
    """FUSION_DATA (DATA=) that lacks files: the fetch says so in a line, prints the folder and writes nothing."""
    given = tmp_path / "mine"
    (given / "multi30k").mkdir(parents=True)
    shutil.copy(os.path.join(data_paths.data_root(), "multi30k", "val.en.gz"), given / "multi30k")
    before = files_under(given)
    proc = run_cli(["fusion-fetch-data"], env={"FUSION_DATA": str(given), data_fetch.MIRROR_ENV: "http://127.0.0.1:9"})
    assert proc.stdout == f"{given}\n" and f"lacks {len(data_files.FILES) - 1} of the" in proc.stderr
    assert files_under(given) == before
    line = one_line(run_cli(["fusion-fetch-data", "--dest", str(given)], env={"FUSION_DATA": str(given)}, check=False))
    assert f"--dest {given}" in line and "read-only" in line
    line = one_line(run_cli(["fusion-fetch-data"], env={"FUSION_DATA": str(tmp_path / "typo")}, check=False))
    assert f"FUSION_DATA (DATA=) {tmp_path / 'typo'}: no such folder" in line and not (tmp_path / "typo").exists()


def test_data_folder_lookup_order(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "recipes" / "common").mkdir(parents=True)
    (repo / "recipes" / "common" / "recipe.sh").write_text("")
    monkeypatch.setattr(data_paths, "REPO_ROOT", str(repo))
    monkeypatch.setattr(data_paths, "RECIPES_DIR", str(repo / "recipes"))
    monkeypatch.setenv("FUSION_DATA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FUSION_DATA", str(tmp_path / "given"))
    assert data_paths.data_root() == str(tmp_path / "given")
    monkeypatch.delenv("FUSION_DATA")
    assert data_paths.data_root() == str(tmp_path / "cache")  # no ../shared/data: the cache, to be fetched
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert data_paths.data_root() == str(tmp_path / "shared" / "data")
    monkeypatch.delenv("FUSION_DATA_CACHE")
    assert data_paths.cache_root() == os.path.expanduser("~/.cache/fairseq-fusion/data")


@pytest.fixture(scope="module")
def fetched(tmp_path_factory):
    """The Multi30k files the demo reads, fetched into an empty folder from the served copy."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.root, srv.log, srv.cut, srv.corrupt = data_paths.data_root(), [], set(), set()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    dest = str(tmp_path_factory.mktemp("fetched"))
    try:
        data_fetch.fetch(dest, files=[f for f in data_files.FILES if f.path.startswith("multi30k/")],
                         mirror=f"http://127.0.0.1:{srv.server_address[1]}", show=False)
    finally:
        srv.shutdown()
        srv.server_close()
    return dest


def test_the_demos_first_step_runs_on_fetched_data(fetched, tmp_path):
    """examples/demo.sh's prepare step (fusion-prepare-text), on 300 lines and 300 merges to stay fast."""
    m30k = os.path.join(fetched, "multi30k")
    run_cli(["fusion-prepare-text", "-s", "en", "-t", "de", "--trainpref", f"{m30k}/train", "--validpref", f"{m30k}/val",
             "--testpref", f"{m30k}/test_2016_flickr", "--destdir", str(tmp_path / "data-bin"), "--bpe-merges", "300",
             "--max-lines", "300", "--workers", "1"])
    for split in ("train", "valid", "test"):
        assert (tmp_path / "data-bin" / f"{split}.en-de.de.bin").stat().st_size > 0


# ---- the table ---------------------------------------------------------------------------------------------------
def read_names():
    """Every data file or folder the code names through data_paths.data_path(...) (literal parts; an f-string's
    fields as wildcards) and the files examples/demo.sh reads: as regular expressions over layout paths."""
    names = set()
    for folder in ("tests", "fairseq_fusion_tools", "recipes", "examples", "scripts"):
        for root, _, files in os.walk(os.path.join(REPO, folder)):
            for name in files:
                if name.endswith((".py", ".sh")):
                    with open(os.path.join(root, name), encoding="utf-8") as f:
                        for call in re.findall(r"data_path\(([^()]*)\)", f.read()):
                            parts = re.findall(r"""f?["']([^"']*)["']""", call.split("must_exist")[0])
                            if parts and "*parts" not in call:
                                names.add("/".join(re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(p)) for p in parts))
    with open(os.path.join(REPO, "examples", "demo.sh"), encoding="utf-8") as f:
        splits = re.search(r'^FILES="([^"]+)"', f.read(), re.M).group(1).split()
    names.update(re.escape(f"multi30k/{s}.{lang}.gz") for s in splits for lang in ("en", "de"))
    return names


def test_the_table_covers_every_file_the_demo_and_the_tests_read():
    names = read_names()
    assert len(names) > 10 and r"wmt14/newstest2014\.en" in names  # the scan itself works
    paths = [f.path for f in data_files.FILES]
    uncovered = [n for n in names if not any(re.fullmatch(n + "(/.+)?", p) for p in paths)]
    assert not uncovered, f"read but not in fairseq_fusion_tools/data_files.py: {uncovered}"


def test_the_table_is_every_file_of_the_shared_data():
    root = data_paths.data_root()
    laid_out = [p for p in files_under(root) if p != "README.md" and not p.startswith(".")]  # a cache's lock: .fetch.lock
    assert sorted(f.path for f in data_files.FILES) == laid_out
    bad = [f.path for f in data_files.FILES if not data_fetch.file_ok(f, os.path.join(root, f.path))]
    assert not bad and all(sha(os.path.join(root, f.path)) == f.sha256 for f in data_files.FILES), bad
    for f in data_files.FILES:  # the origin checksum of a gzipped file is its content's
        if f.transform == "gzip":
            with gzip.open(os.path.join(root, f.path), "rb") as z:
                assert hashlib.sha256(z.read()).hexdigest() == f.origin_sha256, f.path


def test_the_segments_of_the_sgm_files_are_the_plain_files():
    root = data_paths.data_root()
    for lang, side in (("en", "src.en"), ("de", "ref.de")):
        with gzip.open(os.path.join(root, "wmt14", f"newstest2014-deen-{side}.sgm.gz"), "rb") as f:
            segments = data_files.sgm_segments(f.read())
        with open(os.path.join(root, "wmt14", f"newstest2014.{lang}"), "rb") as f:
            assert segments == f.read()
        assert segments.count(b"\n") == 3003


def test_the_origins_are_the_shared_readmes():
    """Every origin's repository and commit are named together in one section of ../shared/data/README.md, and every
    origin path's file name appears there (a folder or a brace list of the README counts by its parts)."""
    readme = os.path.join(data_paths.data_root(), "README.md")
    if not os.path.exists(readme):
        pytest.skip("no README.md in the data folder (a fetched cache has none)")
    with open(readme, encoding="utf-8") as f:
        sections = re.split(r"\n#{2,3} ", f.read())
    for origin in {f.origin for f in data_files.FILES}:
        assert any(f"`{origin.repo}`" in s and origin.commit in s for s in sections), origin
    text = "\n".join(sections)
    for f in data_files.FILES:
        stem = os.path.basename(f.origin_path).split(".")[0]
        assert stem in text or os.path.basename(os.path.dirname(f.origin_path)) in text, f.origin_path

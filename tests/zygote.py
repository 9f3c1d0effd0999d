"""Console scripts started by shell commands (documented commands, recipes) without 5 s of imports each.

A server process, forked from the test process once its imports are done, listens on a UNIX socket. ``shims()``
writes, for every console script of this environment, a small executable of that name that sends its argv, working
directory, environment and standard file descriptors to the server, which forks a copy that becomes the command
(forked_cli: its own process, argv, cwd, environment, fds 0-2, exit status, atexit handlers, fresh logging and
warnings). The shim waits for the command's exit status, exits with it, and passes SIGINT/SIGTERM/SIGHUP on. Put
the shims' folder first on PATH (and ``PYTHON`` for the recipes, which call the scripts beside it; a forked command
sees the shims' ``python`` as ``sys.executable``, so the scripts a tool finds beside it are the shims too). The
shims' ``python`` runs ``-m MODULE``, ``-c CODE`` and script paths the same way (runpy, as the interpreter does). A command the
fork cannot run the same (a --user-dir of another plugin folder) is executed by the shim from the environment.
FUSION_TEST_FRESH=1 turns the shims off: every command starts a new interpreter.
"""
import array
import json
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile

import forked_cli

SHIM = """#!{python} -SE
import array, json, os, signal, socket, struct, sys
NAME, REAL, PYTHON = {name!r}, {real!r}, {python_mode!r}
args = sys.argv[1:]


def itself():
    os.execv(REAL, [REAL] + args)


# python: -m MODULE, -c CODE and SCRIPT run in a fork; Python's own options and multiprocessing's children (which
# pass inherited file descriptors) by Python itself
if PYTHON and (not args or (args[0] in ("-m", "-c") and len(args) < 2) or (args[0].startswith("-") and args[0] not in
               ("-m", "-c")) or any("multiprocessing" in a for a in args)):
    itself()
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    sock.connect({socket_path!r})
except OSError:
    itself()
body = json.dumps({{"name": NAME, "python_argv": args if PYTHON else None, "argv": sys.argv, "cwd": os.getcwd(),
                   "env": dict(os.environ)}}).encode()
sock.sendmsg([struct.pack("!I", len(body)) + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
f = sock.makefile("r")
first = f.readline().split()
if not first or first[0] == "fresh":
    itself()
pid = int(first[1])
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(sig, lambda s, _f: os.kill(pid, s))
line = f.readline()
os._exit(int(line) if line.strip() else 1)
"""


SHIMMED_PACKAGES = {"fairseq_cli", "fairseq_fusion", "fairseq_fusion_tools", "fusion_user_dir"}


def _recv(conn):
    fds = array.array("i")
    msg, anc, _, _ = conn.recvmsg(4, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    (size,) = struct.unpack("!I", msg)
    body = b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    return json.loads(body), list(fds)


def _serve(listener):
    """The server: for each request a child that runs the command in a grandchild and reports its status."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the children are reaped by the kernel
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                req, fds = _recv(conn)
                argv = req["argv"]
                cmd = [req["name"]] + argv[1:]
                python_argv = req.get("python_argv")
                if len(fds) != 3 or not (python_argv is not None or forked_cli.fork_ok(cmd, req["cwd"])):
                    conn.sendall(b"fresh\n")
                    os._exit(0)
                pid = os.fork()
                if pid == 0:
                    conn.close()
                    forked_cli._child(argv[0], cmd, req["cwd"], req["env"], fds[1], fds[2], in_fd=fds[0],
                                      python_argv=python_argv)
                for fd in fds:
                    os.close(fd)
                conn.sendall(f"pid {pid}\n".encode())
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                conn.sendall(f"{code if code >= 0 else 128 - code}\n".encode())
            finally:
                os._exit(0)
        conn.close()


class Zygote:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="fusion-zygote-")
        self.socket_path = os.path.join(self.dir, "server.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.socket_path)
        listener.listen(64)
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:
            try:
                _serve(listener)
            finally:
                os._exit(0)
        listener.close()
        self.bin = os.path.join(self.dir, "bin")
        os.makedirs(self.bin)
        real_bin = os.path.dirname(sys.executable)
        from importlib import metadata

        for ep in metadata.entry_points(group="console_scripts"):  # fairseq's and ours; other tools stay themselves
            real = os.path.join(real_bin, ep.name)
            if os.path.exists(real) and ep.module.split(".")[0] in SHIMMED_PACKAGES:
                self._write(ep.name, SHIM.format(python=sys.executable, name=ep.name, real=real, python_mode=False,
                                                 socket_path=self.socket_path))
        self._write("python", SHIM.format(python=sys.executable, name="python", real=sys.executable, python_mode=True,
                                          socket_path=self.socket_path))

    def _write(self, name, text):
        path = os.path.join(self.bin, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o755)

    def venv_view(self, dest):
        """At ``dest``, this environment (``sys.prefix``) as links, with the shims in place of its console scripts
        and its ``python`` in ``bin``: for commands that put ``.venv/bin`` first on PATH themselves (the Makefile)."""
        os.makedirs(os.path.join(dest, "bin"))
        for name in os.listdir(sys.prefix):
            if name != "bin":
                os.symlink(os.path.join(sys.prefix, name), os.path.join(dest, name))
        real_bin = os.path.join(sys.prefix, "bin")
        shims = set(os.listdir(self.bin))
        for name in os.listdir(real_bin):
            target = os.path.join(self.bin if name in shims else real_bin, name)
            os.symlink(target, os.path.join(dest, "bin", name))

    def env(self, env):
        """``env`` with the shims first on PATH and as the recipes' PYTHON (unless FUSION_TEST_FRESH is set)."""
        if os.environ.get("FUSION_TEST_FRESH"):
            return env
        python = os.path.join(self.bin, "python")
        return dict(env, PATH=self.bin + os.pathsep + env.get("PATH", ""), PYTHON=python, FUSION_TEST_PYTHON=python)

    def close(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

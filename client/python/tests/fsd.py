# SPDX-License-Identifier: Apache-2.0
"""Start and stop a real foresightd (host backend) on a private socket.

Binaries: $FORESIGHTD, $FSCTL, $FS_GGUF_DUMP (ctest sets them), else the
source tree's build/ directory.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))


def binary(env, rel):
    p = os.environ.get(env) or os.path.join(ROOT, "build", rel)
    if not os.access(p, os.X_OK):
        raise RuntimeError("%s not found (set $%s)" % (p, env))
    return p


def foresightd():
    return binary("FORESIGHTD", "daemon/foresightd")


def fsctl():
    return binary("FSCTL", "tools/fsctl/fsctl")


def gguf_dump():
    return binary("FS_GGUF_DUMP", "tools/gguf/fs-gguf-dump")


class Daemon:
    """foresightd --backend host --socket <tmp>/control.sock ARGS..."""

    def __init__(self, *args):
        self.args = [str(a) for a in args]
        self.dir = tempfile.mkdtemp(prefix="fs-py-")
        self.sock = os.path.join(self.dir, "control.sock")
        self.log = os.path.join(self.dir, "foresightd.log")
        self.proc = None

    def start(self, timeout=20.0):
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([foresightd(), "--backend", "host", "--socket", self.sock] + self.args,
                                     stdout=subprocess.DEVNULL, stderr=logf, close_fds=True)
        logf.close()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("foresightd exited with %s: %s" % (self.proc.returncode, self.log_text()))
            r = subprocess.run([fsctl(), "--socket", self.sock, "ping"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError("foresightd did not answer ping within %.0f s: %s" % (timeout, self.log_text()))

    def log_text(self):
        try:
            with open(self.log, "r", errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def kill(self):
        """kill -9, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self):
        """SIGTERM; returns the exit status."""
        if not self.proc:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode

    def cleanup(self):
        self.stop()
        if not os.environ.get("FSH_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def wait_for(pred, timeout, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()

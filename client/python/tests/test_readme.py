# SPDX-License-Identifier: Apache-2.0
"""The README, as written (issue 33): the binding installs offline with its
install line (no package index; `wheel` and setuptools need not be there),
and the example under "## Use" runs as it is against a real foresightd,
from that install (not from the source tree)."""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import fsd

README = os.path.join(fsd.ROOT, "client", "python", "README.md")


def readme():
    with open(README, encoding="utf-8") as f:
        return f.read()


def block(text, lang, after):
    """The first ```lang block after the heading `after`."""
    m = re.search(r"^" + re.escape(after) + r"$.*?^```" + lang + r"\n(.*?)^```", text, re.S | re.M)
    if not m:
        raise AssertionError("README: no ```%s block after %r" % (lang, after))
    return m.group(1)


class Readme(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="fs-py-readme-")
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.env["HOME"] = self.home
        self.env["PIP_NO_INDEX"] = "1"  # offline, whatever the line says
        self.env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        # `python3` in the README is this interpreter.
        bindir = os.path.join(self.home, "bin")
        os.makedirs(bindir)
        os.symlink(sys.executable, os.path.join(bindir, "python3"))
        self.env["PATH"] = bindir + os.pathsep + self.env.get("PATH", "")

    def tearDown(self):
        shutil.rmtree(self.home, ignore_errors=True)

    def sh(self, line):
        return subprocess.run(["bash", "-c", line], cwd=fsd.ROOT, env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)

    def install(self):
        """The README's install line; without the venv module, its --target
        line.  Returns the python to run the example with and its env."""
        text = readme()
        install = block(text, "sh", "## Install")
        venv_line = next(l for l in install.splitlines() if l.startswith("python3 -m venv"))
        r = self.sh(venv_line)
        if r.returncode == 0:
            return os.path.join(self.home, "fs-py", "bin", "python"), dict(self.env)
        self.assertIn("venv", r.stdout + "ensurepip", "the venv line failed otherwise: %s" % r.stdout)
        m = re.search(r"`(python3 -m pip install --no-index --target ~/fs-py-lib client/python)`", text)
        self.assertIsNotNone(m, "README: no --target install line")
        r = self.sh(m.group(1))
        self.assertEqual(r.returncode, 0, "the README's --target install failed offline:\n%s" % r.stdout)
        env = dict(self.env)
        env["PYTHONPATH"] = os.path.join(self.home, "fs-py-lib")
        return sys.executable, env

    def test_installs_offline_and_the_example_runs_as_written(self):
        python, env = self.install()
        # The installed package, not the source tree.
        r = subprocess.run([python, "-c", "import foresight, os; print(os.path.dirname(foresight.__file__))"],
                           cwd=self.home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertTrue(r.stdout.strip().startswith(self.home), "imported from %s" % r.stdout.strip())
        example = block(readme(), "python", "## Use")
        path = os.path.join(self.home, "example.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(example)
        d = fsd.Daemon().start()
        try:
            env["FORESIGHT_SOCKET"] = d.sock
            r = subprocess.run([python, path], cwd=self.home, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, universal_newlines=True, timeout=120)
        finally:
            d.stop()
        self.assertEqual(r.returncode, 0, "the README example failed:\n%s" % r.stdout)
        self.assertIn("ModelInfo(", r.stdout)
        self.assertIn("CardInfo(", r.stdout)


if __name__ == "__main__":
    unittest.main()

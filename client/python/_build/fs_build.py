# SPDX-License-Identifier: Apache-2.0
"""The binding's build backend (PEP 517, PEP 660): it needs nothing.

The package is pure Python (ctypes), so a wheel is a zip of foresight/*.py
and its metadata.  setuptools needed itself from a package index (pip's
build isolation) or, with --no-build-isolation, the `wheel` package, which
Debian 12's python3 lacks: offline, `pip install client/python` failed
either way.  This backend asks for no build requirement and uses only the
standard library, so pip installs the binding offline (`--no-index`) with
or without build isolation.  The project's metadata is pyproject.toml's
[project] table.
"""

import base64
import hashlib
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "foresight"
TAG = "py3-none-any"


def _project():
    """pyproject.toml's [project] strings and string lists (tomllib where
    there is one, else the few forms this file uses)."""
    path = os.path.join(ROOT, "pyproject.toml")
    try:
        import tomllib

        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    except ImportError:
        pass
    proj, section = {}, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            m = re.match(r"^\[(.+)\]$", line)
            if m:
                section = m.group(1)
                continue
            m = re.match(r'^([A-Za-z_-]+)\s*=\s*"(.*)"$', line)
            if section == "project" and m:
                proj[m.group(1)] = m.group(2)
            m = re.match(r"^([A-Za-z_-]+)\s*=\s*\[(.*)\]$", line)
            if section == "project" and m:
                proj[m.group(1)] = re.findall(r'"([^"]*)"', m.group(2))
    return proj


def _metadata(proj):
    lines = [
        "Metadata-Version: 2.1",
        "Name: %s" % proj["name"],
        "Version: %s" % proj["version"],
        "Summary: %s" % proj.get("description", ""),
        "Requires-Python: %s" % proj.get("requires-python", ">=3.8"),
        "License: Apache-2.0",
    ]
    for d in proj.get("dependencies", []):
        lines.append("Requires-Dist: %s" % d)
    readme = os.path.join(ROOT, proj.get("readme", "README.md"))
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _sources():
    pkg = os.path.join(ROOT, PACKAGE)
    return sorted(os.path.join(PACKAGE, n) for n in os.listdir(pkg) if n.endswith(".py"))


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _dist_info(proj):
    return "%s-%s.dist-info" % (proj["name"], proj["version"])


def _write_wheel(wheel_directory, files):
    """files: [(archive name, bytes)]; the dist-info's RECORD is added."""
    proj = _project()
    name = "%s-%s-%s.whl" % (proj["name"], proj["version"], TAG)
    di = _dist_info(proj)
    files = list(files)
    files.append((di + "/METADATA", _metadata(proj).encode()))
    files.append((di + "/WHEEL", ("Wheel-Version: 1.0\nGenerator: fs_build\nRoot-Is-Purelib: true\nTag: %s\n" % TAG).encode()))
    files.append((di + "/top_level.txt", (PACKAGE + "\n").encode()))
    record = [_record_line(n, d) for n, d in files] + [di + "/RECORD,,"]
    files.append((di + "/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            zi = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, d)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for rel in _sources():
        with open(os.path.join(ROOT, rel), "rb") as f:
            files.append((rel.replace(os.sep, "/"), f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """pip install -e: a .pth that puts this source directory on sys.path."""
    return _write_wheel(wheel_directory, [("__editable__.foresight.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    proj = _project()
    base = "%s-%s" % (proj["name"], proj["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "README.md", "_build/fs_build.py"] + _sources():
            t.add(os.path.join(ROOT, rel), arcname=base + "/" + rel.replace(os.sep, "/"))
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata(proj).encode()
        info.size = len(data)
        import io

        t.addfile(info, io.BytesIO(data))
    return name

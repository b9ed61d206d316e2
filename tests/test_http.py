"""How the provisioning host serves kickstarts and bundles (compiler/targets/http.py and the
served tree `clusterforge bundle` lays out), read by the real programs:

- Debian's apache2 with its stock apache2.conf (copied from /etc/apache2 to a temporary
  ServerRoot, nothing in it changed) plus the generated conf: `apache2 -t` accepts it;
- the provisioning host's bundle laid out as a root file system, owners applied from its map
  with Rocky's `apache` mapped onto Debian's `www-data` (in the root's /etc/group, which
  `systemd-tmpfiles --root` reads), the served folders' modes set by the real
  systemd-tmpfiles, then every served file read as user www-data, and the served tree's
  folder refused to another user (nobody);
- the same Apache serving on loopback as www-data, one host's PXE address mapped onto
  127.0.0.2 (the test may touch no other address): that host gets its kickstart and bundle,
  another address and another host's files get 403. The full chain (every file of a bundle
  with its sha256, from the planned addresses in a network namespace) is the VM chain test's.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compiler import bundle
from compiler.load import load
from compiler.pipeline import Compiled, compile_source
from compiler.targets.http import served
from tests.conftest import REPO, require_tool

CONF = "etc/httpd/conf.d/clusterforge.conf"
WWW_DATA = 33  # Debian's www-data, uid and gid (base-passwd)


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    return compile_source(load(REPO / "cluster"))


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary folder another user can enter (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="clusterforge-http-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def server_root(tmp: Path) -> tuple[Path, dict[str, str]]:
    """Debian's stock Apache config in `tmp`, and the environment its apache2.conf reads
    (what /etc/apache2/envvars sets), with run, lock and log folders of its own."""
    root = tmp / "apache2"
    shutil.copytree("/etc/apache2", root)
    for name in ("run", "lock", "log"):
        (tmp / name).mkdir()
        os.chown(tmp / name, WWW_DATA, WWW_DATA)
    env = {
        "PATH": "/usr/sbin:/usr/bin:/bin",
        "APACHE_RUN_USER": "www-data",
        "APACHE_RUN_GROUP": "www-data",
        "APACHE_PID_FILE": str(tmp / "run" / "apache2.pid"),
        "APACHE_RUN_DIR": str(tmp / "run"),
        "APACHE_LOCK_DIR": str(tmp / "lock"),
        "APACHE_LOG_DIR": str(tmp / "log"),
    }
    return root, env


def apache2(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [require_tool("apache2"), "-d", str(root), "-f", str(root / "apache2.conf")]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=60, env=env, check=False
    )


def lay_out(compiled: Compiled, tmp: Path) -> Path:
    """The provisioning host's bundle as a root: its map's owners applied to the served
    kickstarts (apache as www-data), the served folders set by systemd-tmpfiles."""
    name = compiled.plan.site.services.provisioning
    bundle.write(tmp / "bundle", bundle.bundles(compiled, [name]))
    root = tmp / "bundle" / name
    root.chmod(0o755)
    http_root = compiled.plan.provisioning.http_root
    for entry in json.loads((tmp / "bundle" / f"{name}.json").read_text())["files"]:
        if entry["path"].startswith(http_root):
            user, group = entry["owner"].split(":")
            ids = {"root": 0, "apache": WWW_DATA}
            os.chown(root / entry["path"].lstrip("/"), ids[user], ids[group])
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "etc/group").write_text(f"root:x:0:\napache:x:{WWW_DATA}:\n")
    # The bundle's accounts first, as at boot (systemd-sysusers before systemd-tmpfiles-setup).
    sysusers = [require_tool("systemd-sysusers"), f"--root={root}"]
    subprocess.run(sysusers, capture_output=True, text=True, timeout=60, check=True)
    command = [require_tool("systemd-tmpfiles"), "--create", f"--root={root}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return root


def read_as(user: str, paths: list[Path]) -> subprocess.CompletedProcess[str]:
    """`cat` of every path as `user` (no supplementary groups): exit 0 when all were read."""
    uid = {"www-data": WWW_DATA, "nobody": 65534}[user]
    setpriv = [require_tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return subprocess.run(
        [*setpriv, require_tool("cat"), *map(str, paths)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )


@pytest.mark.realtool
def test_stock_apache_accepts_the_generated_conf(compiled: Compiled, tmp_path: Path) -> None:
    root, env = server_root(tmp_path)
    conf = tmp_path / "clusterforge.conf"
    conf.write_bytes(compiled.files["http/clusterforge.conf"])
    done = apache2(root, env, "-t", "-c", f"Include {conf}")
    assert done.returncode == 0 and "Syntax OK" in done.stderr, done.stderr
    # It can refuse: a Require provider no loaded module has.
    conf.write_text(conf.read_text().replace("Require ip ", "Require ipaddr ", 1))
    done = apache2(root, env, "-t", "-c", f"Include {conf}")
    assert done.returncode != 0 and "Unknown Authz provider" in done.stderr


def test_each_host_is_granted_only_its_own_places(compiled: Compiled) -> None:
    conf = compiled.files["http/clusterforge.conf"].decode()
    hosts = served(compiled.plan)
    assert len(hosts) == len(compiled.plan.hosts) - 1  # all but the provisioning host
    assert conf.index('<Location "/bundle/">\n    Require all denied\n') < conf.index("# gpu001")
    for host, address in hosts:
        for place in (f"/ks/{host}.ks", f"/bundle/{host}.json", f"/bundle/{host}"):
            assert f'<Location "{place}">\n    Require ip {address}\n</Location>\n' in conf
    assert conf.count("Require ip ") == 3 * len(hosts)
    assert '"/ks/prov01.ks"' not in conf and '"/bundle/prov01"' not in conf


@pytest.mark.realtool
def test_www_data_reads_every_served_file_and_nobody_else(
    compiled: Compiled, open_tmp: Path
) -> None:
    root = lay_out(compiled, open_tmp)
    www = root / compiled.plan.provisioning.http_root.lstrip("/")
    files = sorted(p for p in (www / "bundle").rglob("*") if p.is_file())
    files += sorted((www / "ks").glob("*.ks"))
    assert len(files) > 1000 and (www / "bundle/mon01/etc/prometheus/ipmi_remote.yml") in files
    assert not (www / "bundle/prov01").exists()  # it does not install from itself
    done = read_as("www-data", files)
    assert done.returncode == 0, done.stderr
    for path in [*files, *(p for p in www.rglob("*") if p.is_dir())]:
        assert not path.stat().st_mode & 0o002, f"{path} is world-writable"
    refused = read_as("nobody", [www / "bundle/mon01/etc/prometheus/ipmi_remote.yml"])
    assert refused.returncode != 0 and "Permission denied" in refused.stderr
    refused = read_as("nobody", [www / "ks/gpu001.ks"])
    assert refused.returncode != 0 and "Permission denied" in refused.stderr
    # The served map still carries the modes the host's %post gives the files.
    served_map = json.loads((www / "bundle/gpu001.json").read_text())
    modes = {f["path"]: f["mode"] for f in served_map["files"]}
    assert modes["/etc/NetworkManager/system-connections/eno1.nmconnection"] == "0600"
    assert modes["/etc/sudoers.d/clusterforge-audit"] == "0440"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(port: int, source: str, path: str) -> int:
    curl = require_tool("curl")
    args = ["-s", "-o", "/dev/null", "-w", "%{http_code}", "--path-as-is", "--interface", source]
    done = subprocess.run(
        [curl, *args, f"http://127.0.0.1:{port}{path}"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return int(done.stdout or 0)


@pytest.mark.realtool
def test_apache_serves_a_host_its_own_files_alone(compiled: Compiled, open_tmp: Path) -> None:
    root = lay_out(compiled, open_tmp)
    www = root / compiled.plan.provisioning.http_root.lstrip("/")
    address = dict(served(compiled.plan))["gpu001"]
    conf = compiled.files["http/clusterforge.conf"].decode()
    conf = conf.replace(f"Require ip {address}\n", "Require ip 127.0.0.2\n")
    (open_tmp / "clusterforge.conf").write_text(conf)
    port = _free_port()
    (open_tmp / "site.conf").write_text(
        f"Listen 127.0.0.1:{port}\n<VirtualHost 127.0.0.1:{port}>\n  DocumentRoot {www}\n"
        f"</VirtualHost>\n<Directory {www}>\n  Require all granted\n</Directory>\n"
        f"Include {open_tmp / 'clusterforge.conf'}\n"
    )
    apache_root, env = server_root(open_tmp)
    ports = apache_root / "ports.conf"
    ports.write_text("")  # not port 80: the test's own Listen only
    start = apache2(apache_root, env, "-c", f"Include {open_tmp / 'site.conf'}", "-k", "start")
    assert start.returncode == 0, start.stderr
    try:
        deadline = time.monotonic() + 30
        while _get(port, "127.0.0.2", "/") == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        mine = ["/ks/gpu001.ks", "/bundle/gpu001.json", "/bundle/gpu001/etc/chrony.conf"]
        theirs = ["/ks/gpu002.ks", "/bundle/gpu002.json", "/bundle/mon01/etc/chrony.conf"]
        theirs += ["/bundle/gpu001/../gpu002.json", "/bundle//gpu002.json", "/bundle/"]
        assert [_get(port, "127.0.0.2", p) for p in mine] == [200] * len(mine)
        assert [_get(port, "127.0.0.2", p) for p in theirs] == [403] * len(theirs)
        assert [_get(port, "127.0.0.3", p) for p in mine] == [403] * len(mine)
        assert _get(port, "127.0.0.3", "/rocky/") == 404  # the mirrors are open (none here)
    finally:
        apache2(apache_root, env, "-c", f"Include {open_tmp / 'site.conf'}", "-k", "stop")
        pid = Path(env["APACHE_PID_FILE"])
        deadline = time.monotonic() + 30
        while pid.exists() and time.monotonic() < deadline:
            time.sleep(0.2)

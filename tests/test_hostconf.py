"""generated/chrony/: each host's chrony.conf, parsed by the real chronyd (`chronyd -p`
reads the file as the daemon would at start and prints what it understood, or stops at the
first line it cannot parse) where the host's bundle puts it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compiler import generate
from compiler.pipeline import Compiled, compile_repo, compile_source
from tests.conftest import REPO, require_tool
from tests.test_generate import parse_tree


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    return compile_repo(REPO)


def chronyd_reads(text: bytes, tmp: Path) -> list[str]:
    conf = tmp / "chrony.conf"
    conf.write_bytes(text)
    done = subprocess.run(
        [require_tool("chronyd"), "-p", "-f", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def _placed(compiled: Compiled, host: str) -> bytes:
    placed = next(f for f in compiled.deploys[host].files if f.path == "/etc/chrony.conf")
    return compiled.files[placed.source]


@pytest.mark.realtool
def test_the_time_servers_follow_the_site_s_upstream(compiled: Compiled, tmp_path: Path) -> None:
    site = compiled.plan.site
    assert site.ntp_upstream
    for host in site.services.ntp:
        read = chronyd_reads(_placed(compiled, host), tmp_path)
        for source in site.ntp_upstream:
            assert f"server {source.host} iburst" in read
        assert "local stratum 10 orphan" in read
    # Every other host follows the site's time servers, and nothing upstream.
    pxe = compiled.cluster.provisioning.pxe_network
    servers = [compiled.plan.address(h, pxe) for h in site.services.ntp]
    read = chronyd_reads(_placed(compiled, "gpu001"), tmp_path)
    assert [line for line in read if line.startswith(("server", "pool"))] == [
        f"server {a} iburst" for a in servers
    ]


@pytest.mark.realtool
def test_an_upstream_pool_is_chrony_s_pool(tmp_path: Path) -> None:
    tree = generate.generate(4)
    tree["site.yaml"] = tree["site.yaml"].replace(
        "  - {host: ntp1.gen.example.net}\n", "  - {host: 2.rocky.pool.ntp.org, pool: true}\n"
    )
    compiled = compile_source(parse_tree(tree))
    read = chronyd_reads(_placed(compiled, "prov01"), tmp_path)
    assert "pool 2.rocky.pool.ntp.org iburst" in read

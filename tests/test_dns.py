"""generated/dns/: BIND loads every zone, the zones say what /etc/hosts says, serials are stable.

Oracles: `named-checkzone` per zone, `named-checkconf -z` on a named.conf that includes the
generated zone statements, and `named-checkzone -D` (BIND's own canonical dump) for the records.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from compiler.load import parse, read_dir
from compiler.pipeline import Compiled, compile_repo, compile_source
from compiler.targets.shared import names
from tests.conftest import require_tool

DOMAIN = "dc1.cluster.internal"


@pytest.fixture(scope="module")
def compiled(repo: Path) -> Compiled:
    return compile_repo(repo)


def zones(files: dict[str, bytes]) -> dict[str, str]:
    """Zone name -> zone file text, as named.conf.zones lists them."""
    conf = files["dns/named.conf.zones"].decode()
    listed = re.findall(r'zone "([^"]+)" IN \{ type master; file "([^"]+)";', conf)
    return {zone: files[f"dns/{file}"].decode() for zone, file in listed}


def checkzone(
    tmp_path: Path, zone: str, text: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    path = tmp_path / f"db.{zone}"
    path.write_text(text)
    return subprocess.run(
        [require_tool("named-checkzone"), "-k", "fail", "-n", "fail", *extra, zone, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def serial_of(text: str) -> int:
    found = re.search(r"^\s+(\d+)\s+; serial$", text, re.MULTILINE)
    assert found, "no serial line"
    return int(found.group(1))


@pytest.mark.realtool
def test_every_zone_loads(compiled: Compiled, tmp_path: Path) -> None:
    found = zones(compiled.files)
    assert DOMAIN in found and "60.10.in-addr.arpa" in found
    assert set(found) == {p.removeprefix("dns/db.") for p in compiled.files if "/db." in p}
    for zone, text in found.items():
        done = checkzone(tmp_path, zone, text)
        assert done.returncode == 0, f"{zone}: {done.stdout}{done.stderr}"
        assert f"zone {zone}/IN: loaded serial {serial_of(text)}" in done.stdout


@pytest.mark.realtool
def test_named_conf_loads_all_zones(compiled: Compiled, tmp_path: Path) -> None:
    for path, data in compiled.files.items():
        if path.startswith("dns/"):
            (tmp_path / path.removeprefix("dns/")).write_bytes(data)
    conf = tmp_path / "named.conf"
    conf.write_text(
        f'options {{ directory "{tmp_path}"; }};\ninclude "{tmp_path}/named.conf.zones";\n'
    )
    done = subprocess.run(
        [require_tool("named-checkconf"), "-z", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": loaded serial ") == len(zones(compiled.files))


@pytest.mark.realtool
def test_records_are_the_hosts_names(compiled: Compiled, tmp_path: Path) -> None:
    """BIND's canonical dump: one A per name of /etc/hosts, and its PTR pointing back."""
    a_records: set[tuple[str, str]] = set()
    ptr_records: set[tuple[str, str]] = set()
    for zone, text in zones(compiled.files).items():
        done = checkzone(tmp_path, zone, text, "-D", "-o", "-")
        assert done.returncode == 0, done.stderr
        for line in done.stdout.splitlines():
            owner, _ttl, _cls, rtype, *data = line.split()
            if rtype == "A":
                a_records.add((owner, data[0]))
            elif rtype == "PTR":
                octets = owner.removesuffix(".in-addr.arpa.").split(".")
                ptr_records.add((data[0], ".".join(reversed(octets))))
    expected = {(f"{short}.{DOMAIN}.", ip) for ip, short, _ in names(compiled.plan)}
    assert a_records == expected
    assert ptr_records == expected


@pytest.mark.realtool
def test_checkzone_rejects_a_broken_zone(compiled: Compiled, tmp_path: Path) -> None:
    """The name server's own address removed: BIND refuses the zone, so the oracle can fail."""
    text = zones(compiled.files)[DOMAIN]
    broken = re.sub(r"^prov01\tIN\tA\t.*\n", "", text, flags=re.MULTILINE)
    assert broken != text
    done = checkzone(tmp_path, DOMAIN, broken)
    assert done.returncode != 0
    assert "has no address records" in done.stdout + done.stderr


def test_serials_go_up_when_content_changes(compiled: Compiled, repo: Path) -> None:
    """A serial is 10 digits in 32 bits; continuing from the committed zones, it goes up by
    one in the zones whose records change (never down: a secondary would stop taking
    updates), and stays in the others."""
    before = zones(compiled.files)
    for text in before.values():
        assert 10**9 <= serial_of(text) < 2**32
    files = read_dir(repo / "cluster")
    rack = files["cluster/racks/r01.yaml"].decode()
    anchor = '    guid: "0x0c42a10300cc2c04"\n'  # gpu001
    assert anchor in rack
    moved = rack.replace(anchor, anchor + "    addresses: {storage: 10.70.1.99}\n")
    files["cluster/racks/r01.yaml"] = moved.encode()
    after = zones(compile_source(parse(files), previous=compiled.files).files)
    changed = {zone for zone in before if serial_of(before[zone]) != serial_of(after[zone])}
    assert changed == {DOMAIN, "70.10.in-addr.arpa"}
    for zone in changed:
        assert serial_of(after[zone]) == serial_of(before[zone]) + 1
    for zone in set(before) - changed:
        assert before[zone] == after[zone]
    # Compiled again over its own output, nothing moves: the serial is a fact, not a counter.
    again = compile_source(
        parse(files), previous={f"dns/db.{z}": t.encode() for z, t in after.items()}
    )
    assert zones(again.files) == after


def test_a_zone_without_predecessor_starts_low_and_compiles_the_same(repo: Path) -> None:
    first = zones(compile_source(parse(read_dir(repo / "cluster"))).files)
    assert {serial_of(text) for text in first.values()} == {10**9}

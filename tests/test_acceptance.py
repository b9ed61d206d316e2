"""Issue 16's walk, end to end as a new site does it: `init` a cluster of one's own, compile
it, import the real MACs from a racking sheet, review a change that adds a rack (its new
addresses, nothing renumbered, the labels to print), all through the command line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from clusterforge.cli import main
from compiler import generate


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        check=True,
        capture_output=True,
    )


def test_init_compile_import_review(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site = tmp_path / "site"
    assert main(["init", str(site), "--racks", "2", "--per-rack", "2"]) == 0
    assert main(["-C", str(site), "compile"]) == 0
    _git(site, "init", "-q", "-b", "main")
    _git(site, "add", ".")
    _git(site, "commit", "-qm", "start")

    sheet = site / "racking.csv"
    sheet.write_text(
        "rack,u,serial,eno1,bmc\nr001,2,S420GP24A00001,3C-EC-EF-00-00-01,3cecef000002\n"
    )
    assert main(["-C", str(site / "cluster" / "racks"), "import", "--csv", str(sheet)]) == 0
    assert main(["-C", str(site), "compile"]) == 0
    assert main(["-C", str(site), "compile", "--check"]) == 0
    assert "3c:ec:ef:00:00:01" in (site / "generated" / "dhcp" / "dhcpd.conf").read_text()

    # A third rack, as the generator would have written it.
    third = generate.generate(6, name="site", per_rack=2, as_bought=True)["racks/r003.yaml"]
    (site / "cluster" / "racks" / "r003.yaml").write_text(third)
    assert main(["-C", str(site), "compile"]) == 0
    _git(site, "add", ".")
    _git(site, "commit", "-qm", "rack r003")
    capsys.readouterr()
    out = tmp_path / "diff.json"
    assert main(["-C", str(site), "diff", "main~1", "main", "--json", str(out)]) == 0
    markdown = capsys.readouterr().out
    report = json.loads(out.read_text())
    added = [a for a in report["addresses"] if a["old"] is None]
    assert added and {a["device"] for a in added} >= {"gpu005", "gpu006", "leaf003"}
    assert report["renumbered_nothing"] and "No existing address or LID renumbered." in markdown
    assert report["label_commands"] == ["clusterforge labels --rack r003"]

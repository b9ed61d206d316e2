"""Parser for `stat --format=%n -- PATH...`: which of the host's secret-bearing files are there.

The files a deploy map marks `check: exists` (their deployed bytes carry a secret: the root
password hash, the BMC password) are never hashed: a digest of a one-line password file is
the password to anyone with a word list. stat(1) opens none of them; it prints each path it
could stat on a line of its own and names the others on stderr, exiting 1, which the probe
accepts: a path absent from the output is missing. The paths asked for are plain (no space,
no newline, no backslash: contract/probes/spec.py refuses others), so any other line is refused.

Schema:

    [path]                      sorted, each once

Example:

    $ stat --format=%n -- /etc/prometheus/ipmi_remote.yml /var/www/html/ks/gpu001.ks
    /etc/prometheus/ipmi_remote.yml

    ["/etc/prometheus/ipmi_remote.yml"]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "file_exists"
# The files whose deployed bytes carry secrets (`check: exists`: the BMC password, the
# root password hash): present or not, never read. stat(1) opens no file; as root, so
# a 0750 folder above one does not hide it.
SPEC = Probe(
    PROBE,
    ("stat", "--format=%n"),
    "host",
    "/usr/bin/stat",
    root=True,
    takes="paths",
    ok_exits=(0, 1),
    max_output=MIB,
)

_PATH = re.compile(r"(/[A-Za-z0-9_][A-Za-z0-9._-]*)+")


def parse(text: str) -> list[str]:
    """Parse `stat --format=%n` output into the paths that exist."""
    found: set[str] = set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if _PATH.fullmatch(line) is None or ".." in line:
            raise ParseError(PROBE, number, f"not a plain absolute path: {line[:80]!r}")
        found.add(line)
    return sorted(found)


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The name of each file asked for that is there (`now.files`)."""
    if PROBE not in now.arguments:
        return {}
    present = set(now.arguments[PROBE])
    return {PROBE: "".join(f"{path}\n" for path in now.files if path in present)}

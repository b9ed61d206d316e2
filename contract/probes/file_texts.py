"""Parser for `tail -v -n +1 -- PATH...`: the text of each file a device's snapshot keeps.

The files a deploy map marks `snapshot` (a switch's configuration, the provisioning host's
served DHCP, TFTP and DNS files: services.yaml `snapshot: true`) are read whole, so the audit
keeps what the device really holds (`contract.snapshot`), for the history and for the change
plan's pre-check. GNU tail with `-v` heads every file with `==> PATH <==` and a newline,
and puts one newline before every header but the first; a file it cannot read is named on
stderr only, exit 1, which the probe accepts (the file is missing). So a file's text is what
lies between its header and the next, less that one newline. The paths asked for are plain
(contract/probes/spec.py refuses others), so a header names a plain absolute path; a line in
a file that looks like a header would split that file, which only misreports the device's own
snapshot (a finding either way: the snapshot is not what was generated).

Schema:

    {path: text}

Example:

    $ tail -v -n +1 -- /etc/frr/daemons /etc/lldpd.d/clusterforge.conf
    ==> /etc/frr/daemons <==
    bgpd=yes

    ==> /etc/lldpd.d/clusterforge.conf <==
    configure system interface pattern eth0,swp*

    {"/etc/frr/daemons": "bgpd=yes\n",
     "/etc/lldpd.d/clusterforge.conf": "configure system interface pattern eth0,swp*\n"}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "file_texts"
# Root: a switch's frr.conf is 0640 frr:frr. Only the files the deploy map marks `snapshot`
# are read; the forced command and sudoers allow exactly the lists of the device's role.
SPEC = Probe(
    PROBE,
    ("tail", "-v", "-n", "+1"),
    "host",
    "/usr/bin/tail",
    root=True,
    takes="paths",
    ok_exits=(0, 1),
    max_output=16 * MIB,  # the provisioning host's dhcpd.conf grows with the fleet: 4,096 hosts
)

_HEADER = re.compile(r"^==> (/[A-Za-z0-9_][A-Za-z0-9._/-]*) <==\n", re.MULTILINE)


def parse(text: str) -> dict[str, str]:
    """Parse `tail -v -n +1` output into each file's text by path."""
    headers = list(_HEADER.finditer(text))
    if text and (not headers or headers[0].start() != 0):
        raise ParseError(
            PROBE, 1, f"not a '==> PATH <==' header: {text.partition(chr(10))[0][:80]!r}"
        )
    out: dict[str, str] = {}
    for i, header in enumerate(headers):
        path = header.group(1)
        if ".." in path.split("/"):
            raise ParseError(PROBE, _line(text, header.start()), f"not a plain path: {path!r}")
        end = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        body = text[header.end() : end]
        if i + 1 < len(headers):
            if not body.endswith("\n"):  # tail writes one newline before the next header
                raise ParseError(PROBE, _line(text, end), "no newline before the next header")
            body = body[:-1]
        if path in out:
            raise ParseError(PROBE, _line(text, header.start()), f"{path} listed twice")
        out[path] = body
    return out


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The text of each file asked for that is there (`now.texts`), as tail prints it."""
    if PROBE not in now.arguments:
        return {}
    parts = [
        f"==> {path} <==\n{now.texts[path]}" for path in now.arguments[PROBE] if path in now.texts
    ]
    return {PROBE: "\n".join(parts)}

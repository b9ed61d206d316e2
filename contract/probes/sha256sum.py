"""Parser for `sha256sum -- PATH...`: the digest of each deployed file the host has.

The audit asks for every path the deploy map (`generated/deploy/<host>.json`) places on the
host. coreutils prints one `<64 hex digits>  <path>` line per file it could read (two spaces,
or ` *` in binary mode) and names the others on stderr, exiting 1: a path absent from the
output is missing or unreadable, which the probe accepts (exit 1 is not a failure). A path
with a backslash or newline is printed escaped, with a leading `\\`; the paths the audit asks
for never hold one (contract/probes/spec.py refuses them), so such a line is refused here too.

Schema:

    {path: sha256 hex}

Example:

    $ sha256sum -- /etc/chrony.conf /etc/opensm/opensm.conf
    89b755a321705d4afe6354c19f3c4512242da777b7dbb35b91e87e8a5155ac5c  /etc/chrony.conf

    {"/etc/chrony.conf": "89b755a321705d4afe6354c19f3c4512242da777b7dbb35b91e87e8a5155ac5c"}
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from contract.probes.base import ParseError
from contract.probes.spec import MIB, Now, Probe

PROBE = "sha256sum"
# Root: some deployed files are 0600 (NetworkManager keyfiles). Only the files whose
# bytes the deploy map plans are hashed; the forced command and sudoers allow exactly
# the lists of the host's role (compiler/targets/access.py).
SPEC = Probe(
    PROBE,
    ("sha256sum",),
    "host",
    "/usr/bin/sha256sum",
    root=True,
    takes="paths",
    ok_exits=(0, 1),
    max_output=MIB,  # a line a file: the provisioning host has one a server
)

_LINE = re.compile(r"([0-9a-f]{64}) [ *](/\S.*)")


def parse(text: str) -> dict[str, str]:
    """Parse `sha256sum` output into digests by path."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise ParseError(PROBE, number, f"not a '<sha256>  <path>' line: {line[:80]!r}")
        digest, path = match.groups()
        if path in out and out[path] != digest:
            raise ParseError(PROBE, number, f"{path} listed twice with different digests")
        out[path] = digest
    return out


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """The digest of each file asked for that is there (`now.files`)."""
    if PROBE not in now.arguments:
        return {}
    hashed = set(now.arguments[PROBE])
    return {PROBE: "".join(f"{sha}  {path}\n" for path, sha in now.files.items() if path in hashed)}

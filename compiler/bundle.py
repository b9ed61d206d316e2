"""`clusterforge bundle`: each host's and switch's generated files as a root-filesystem overlay.

For every selected host or configured Ethernet switch (by name, or by role: a switch's is its
OS), `DIR/<name>/` holds its files at their destination paths (from the deploy map,
`generated/deploy/<name>.json`) with their modes, and `DIR/<name>.json` is that map: path,
source, sha256, mode, owner, the unit to reload. That is how a change reaches an installed
host or switch (rsync, scp or any configuration-management tool applies an overlay; owners
are in the JSON, since the build machine need not have the hosts' users), and how a new host
gets its files: the provisioning host's overlay lays out its HTTP root's `bundle/` folder with
every host's overlay and map, which the kickstart's %post fetches.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from common.errors import InputError
from compiler import output
from compiler.pipeline import Compiled
from compiler.targets.shared import BUNDLE_PATH
from contract import Deploy

SERVED_MODE = 0o644  # a served bundle's files, for the HTTP server's user


class SelectionError(InputError):
    """Raised when --host or --role names nothing the cluster has."""


def _overlay(
    compiled: Compiled, deploy: Deploy, prefix: str = "", mode: int | None = None
) -> dict[str, tuple[bytes, int]]:
    """`deploy`'s files under `prefix` at their modes, or all at `mode`; its map beside."""
    files = {
        f"{prefix}{f.path}": (compiled.files[f.source], int(f.mode, 8) if mode is None else mode)
        for f in deploy.files
    }
    manifest = json.dumps(deploy.as_dict(), indent=2, sort_keys=True) + "\n"
    files[f"{prefix}.json"] = (manifest.encode(), 0o644)
    return files


def bundles(
    compiled: Compiled, hosts: Sequence[str] = (), roles: Sequence[str] = ()
) -> dict[str, tuple[bytes, int]]:
    """{path under DIR: (bytes, mode)} for the hosts and switches named or of the roles named
    (a switch's role is its OS: `cumulus`, `eos`), all of them when neither is given."""
    plan = compiled.plan
    machines = list(plan.machines())
    unknown = [h for h in hosts if h not in {m.name for m in machines}]
    unknown += [r for r in roles if r not in {m.role for m in machines}]
    if unknown:
        raise SelectionError(f"no host, switch or role {', '.join(map(repr, unknown))} in cluster/")
    chosen = [
        m.name for m in machines if (not hosts and not roles) or m.name in hosts or m.role in roles
    ]
    out: dict[str, tuple[bytes, int]] = {}
    http_root = compiled.cluster.provisioning.http_root.rstrip("/")
    for name in chosen:
        out |= _overlay(compiled, compiled.deploys[name], name)
        if name == plan.site.services.provisioning:
            # Its HTTP root serves every other host's bundle to that host's %post (it installs
            # from media or upstream itself). Apache, running as its own user, reads every
            # served file: 0644 inside a folder only root and Apache may enter (generated/http/
            # tmpfiles.conf), each host's part served to that host alone (http/clusterforge.conf);
            # the served map keeps the modes %post gives the files. A switch's is not served:
            # no kickstart fetches it, and http/clusterforge.conf names no switch.
            for other in sorted(h.name for h in plan.hosts):
                if other != name:
                    served = f"{name}{http_root}{BUNDLE_PATH}/{other}"
                    out |= _overlay(compiled, compiled.deploys[other], served, SERVED_MODE)
    return dict(sorted(out.items()))


def write(out: Path, files: dict[str, tuple[bytes, int]]) -> None:
    """Replace `out` with exactly `files`, at their modes; raises OutputError."""
    output.replace_tree(
        out.resolve(),
        {rel: data for rel, (data, _) in files.items()},
        {rel: mode for rel, (_, mode) in files.items()},
    )

"""The audit's fixed allowlist of read-only commands: one module per probe, and their registry.

The probes are part of the contract between the compiler, which grants the audit account
exactly these commands (`compiler/targets/access.py`: the forced command and sudoers), and the
audit, which runs them and parses what they print. Each module of this package, named after
its probe, holds all of one probe:

- `SPEC`, its command (`spec.Probe`: argv, program, scope, root, arguments, ok exits, cap);
- `parse(text)`, its pure parser: the command's output to a JSON-shaped result, or a
  `ParseError`; its docstring gives the command, the schema and an example;
- `render(host, state, now)`, optional, its inverse for the lab twin: what the command prints
  on a host in its expected state (`state`, the host's expected JSON) showing `now`.

`PROBES` is built once by discovering the modules, so a new probe is its module, its fixtures
folder (`tests/fixtures/<name>/`) and the check that uses it; every reader (the compiler's
access and acceptance targets, the audit's collectors and parser dispatch, `accept`, the lab)
looks probes up here. Modules whose names start with `_`, and `spec` and `base`, are helpers.
A probe of scope `eos` (a command of an EOS switch's CLI) is the exception to the forced
command: EOS has none, and the switch's audit user's read-only role is what limits it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from types import ModuleType

from common.registry import Registry
from contract.probes.base import ParseError
from contract.probes.spec import Entry, Now, Parser, Probe, ProbeError, Renderer

__all__ = [
    "PROBES",
    "Entry",
    "Now",
    "ParseError",
    "Parser",
    "Probe",
    "ProbeError",
    "Renderer",
    "build",
    "discover",
]

_HELPERS = frozenset({"spec", "base"})


def discover() -> list[ModuleType]:
    """Every probe module of this package, by name."""
    names = sorted(
        info.name
        for info in pkgutil.iter_modules(__path__)
        if not info.name.startswith("_") and info.name not in _HELPERS
    )
    return [importlib.import_module(f"{__name__}.{name}") for name in names]


def build(modules: Iterable[ModuleType]) -> Registry[Entry]:
    """The registry of `modules` by probe name; a name given twice, or a module whose `SPEC`
    is not named as its `PROBE`, is an error at import."""
    entries = []
    for module in modules:
        spec: Probe = module.SPEC
        if spec.name != module.PROBE:
            raise ProbeError(f"{module.__name__}: SPEC is named {spec.name!r}, not its PROBE")
        entries.append((spec.name, Entry(spec, module.parse, getattr(module, "render", None))))
    return Registry("probe", entries)


PROBES: Registry[Entry] = build(discover())

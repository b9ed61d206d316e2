"""The expected-state contract: what `generated/expected/` and `generated/deploy/` hold, and
the normalisers both sides of it use. The compiler's targets write it, the audit reads it;
this package imports neither (only `common/`), and neither reaches into the other's internals
through it.

Per host, `expected/hosts/<host>.json` (`Host`) says what the machine must look like;
`deploy/<host>.json` (`Deploy`) which generated files the host holds, where, with which mode
and owner, and which units and kernel modules must run; `expected/fabric.json` (`Fabric`) the
InfiniBand cables and switches. Every file carries `SCHEMA`, and a reader refuses another.
`schema/*.schema.json` are the records' JSON Schemas, for other tools (`python -m
contract.schema` writes them).
Beside them: `probes/`, the audit's commands with their parsers and lab renderers, which the
compiler grants the audit account and the audit runs; `account`, that account's names.
"""

from __future__ import annotations

from contract import manifest, metrics
from contract.deploy import Deploy, Placed
from contract.fabric import Cable, End, Fabric, Lifecycle, Switch
from contract.findings import Kind, Severity
from contract.host import (
    Accept,
    Affinity,
    Bmc,
    EthernetLink,
    ExpectedRoute,
    GpuDirect,
    Gpus,
    Host,
    IbPort,
    Interface,
    Scheduled,
    Slurm,
    SlurmController,
)
from contract.record import SCHEMA, ContractError, dumps
from contract.routes import Route, normal_routes
from contract.switch import BgpPeer, EthernetSwitch

__all__ = [
    "SCHEMA",
    "Accept",
    "Affinity",
    "BgpPeer",
    "Bmc",
    "Cable",
    "ContractError",
    "Deploy",
    "End",
    "EthernetLink",
    "EthernetSwitch",
    "ExpectedRoute",
    "Fabric",
    "GpuDirect",
    "Gpus",
    "Host",
    "IbPort",
    "Interface",
    "Kind",
    "Lifecycle",
    "Placed",
    "Route",
    "Scheduled",
    "Severity",
    "Slurm",
    "SlurmController",
    "Switch",
    "dumps",
    "manifest",
    "metrics",
    "normal_routes",
]

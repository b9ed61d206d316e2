"""Parser for `ibstat`: the host's RDMA devices (CAs) and the state of each port.

Format (rdma-core `infiniband-diags/ibstat.c`): a `CA 'name'` line, indented `Key: value`
lines for the CA, then per port a `Port N:` line and its own `Key: value` lines. There is no
blank line between CAs. `Rate` is a number in Gb/s read from sysfs (HDR 4x is `200`); 1x SDR
prints `2.5` and FDR10 prints `40 (FDR10)`. LIDs are decimal. Ports of an Ethernet (RoCE)
device have `Link layer: Ethernet` and LID 0. Every CA must list exactly `Number of ports`
ports, which is how cut-off output is caught. Keys not in the schema (LMC, capability mask,
hardware version) are read past.

Schema:

    [{"name": str, "ca_type": str, "firmware": str, "node_guid": "0x<16 hex>",
      "ports": [{"port": int, "state": str, "physical_state": str, "rate": int | float,
                 "fdr10": bool, "base_lid": int, "sm_lid": int, "port_guid": "0x<16 hex>",
                 "link_layer": str}]}]

Example:

    $ ibstat
    CA 'mlx5_0'
            CA type: MT4123
            Number of ports: 1
            Firmware version: 20.39.1002
            Hardware version: 0
            Node GUID: 0x1070fd0300c00000
            System image GUID: 0x1070fd0300c00000
            Port 1:
                    State: Active
                    Physical state: LinkUp
                    Rate: 200
                    Base lid: 2
                    LMC: 0
                    SM lid: 1
                    Capability mask: 0x2651e848
                    Port GUID: 0x1070fd0300c00000
                    Link layer: InfiniBand

    [{"name": "mlx5_0", "ca_type": "MT4123", "firmware": "20.39.1002",
      "node_guid": "0x1070fd0300c00000",
      "ports": [{"port": 1, "state": "Active", "physical_state": "LinkUp", "rate": 200,
                 "fdr10": false, "base_lid": 2, "sm_lid": 1,
                 "port_guid": "0x1070fd0300c00000", "link_layer": "InfiniBand"}]}]
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from contract.probes._ids import lid
from contract.probes.base import ParseError, decimal
from contract.probes.spec import KIB, Now, Probe

PROBE = "ibstat"
SPEC = Probe(PROBE, ("ibstat",), "host", "/usr/sbin/ibstat", max_output=256 * KIB)

_CA = re.compile(r"CA '(?P<name>[^']+)'")
_PORT = re.compile(r"Port (?P<port>\d+):")
_FIELD = re.compile(r"(?P<key>[A-Za-z][A-Za-z ]*): ?(?P<value>.*)")
_GUID = re.compile(r"0x[0-9a-f]{16}")
_RATE = re.compile(r"(?P<rate>\d+(?:\.\d+)?)(?P<fdr10> \(FDR10\))?")


class Port(TypedDict):
    port: int
    state: str
    physical_state: str
    rate: int | float
    fdr10: bool
    base_lid: int
    sm_lid: int
    port_guid: str
    link_layer: str


class Ca(TypedDict):
    name: str
    ca_type: str
    firmware: str
    node_guid: str
    ports: list[Port]


@dataclass
class _Block:
    """Fields of one CA or port as read, with the line of its header for errors."""

    line: int
    fields: dict[str, tuple[int, str]] = field(default_factory=dict)

    def get(self, key: str) -> tuple[int, str]:
        if key not in self.fields:
            raise ParseError(PROBE, self.line, f"block has no {key!r} line (truncated?)")
        return self.fields[key]


@dataclass
class _CaBlock(_Block):
    name: str = ""
    ports: list[tuple[int, _Block]] = field(default_factory=list)


def parse(text: str) -> list[Ca]:
    """Parse `ibstat` output (all CAs, all ports)."""
    cas: list[_CaBlock] = []
    current: _Block | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if ca := _CA.fullmatch(line):
            cas.append(_CaBlock(number, name=ca["name"]))
            current = cas[-1]
        elif port := _PORT.fullmatch(line):
            if not cas:
                raise ParseError(PROBE, number, "'Port N:' before any CA 'name' line")
            current = _Block(number)
            cas[-1].ports.append((int(port["port"]), current))
        elif (kv := _FIELD.fullmatch(line)) and current is not None:
            current.fields[kv["key"]] = (number, kv["value"].strip())
        else:
            raise ParseError(
                PROBE, number, f"expected CA 'name', 'Port N:' or 'Key: value': {line!r}"
            )
    if not cas:
        raise ParseError(PROBE, 0, "no CA found in output")
    return [_ca(block) for block in cas]


def _ca(block: _CaBlock) -> Ca:
    ca_type, firmware = block.get("CA type")[1], block.get("Firmware version")[1]
    declared = _int(block.get("Number of ports"))
    if len(block.ports) != declared:
        raise ParseError(
            PROBE,
            block.line,
            f"CA {block.name!r} declares {declared} ports, lists {len(block.ports)} (truncated?)",
        )
    return {
        "name": block.name,
        "ca_type": ca_type,
        "firmware": firmware,
        "node_guid": _guid(block.get("Node GUID")),
        "ports": [_port(number, port) for number, port in block.ports],
    }


def _port(number: int, block: _Block) -> Port:
    rate_line, rate_text = block.get("Rate")
    rate = _RATE.fullmatch(rate_text)
    if rate is None:
        raise ParseError(PROBE, rate_line, f"Rate is not a number: {rate_text!r}")
    value = float(rate["rate"])
    return {
        "port": number,
        "state": block.get("State")[1],
        "physical_state": block.get("Physical state")[1],
        "rate": int(value) if value.is_integer() else value,
        "fdr10": rate["fdr10"] is not None,
        "base_lid": _int(block.get("Base lid")),
        "sm_lid": _int(block.get("SM lid")),
        "port_guid": _guid(block.get("Port GUID")),
        "link_layer": block.get("Link layer")[1],
    }


def _int(located: tuple[int, str]) -> int:
    return decimal(PROBE, *located)


def _guid(located: tuple[int, str]) -> str:
    line, value = located
    if _GUID.fullmatch(value) is None:
        raise ParseError(PROBE, line, f"expected a GUID like 0x0c42a10300e2c3b4, got {value!r}")
    return value


def render(host: str, state: Mapping[str, Any], now: Now) -> dict[str, str]:
    """Each planned HCA port; CA node GUIDs are port GUID - 1, as ibsim makes them."""
    blocks = []
    for p in state["ib_ports"]:
        node = f"0x{int(p['port_guid'], 16) - 1:016x}"
        blocks.append(
            f"CA '{p['device']}'\n"
            "\tCA type: MT4123\n"
            "\tNumber of ports: 1\n"
            f"\tFirmware version: {state['versions'].get('nic_firmware', '20.39.1002')}\n"
            "\tHardware version: 0\n"
            f"\tNode GUID: {node}\n"
            f"\tSystem image GUID: {node}\n"
            f"\tPort {p['port']}:\n"
            f"\t\tState: {p['state']}\n"
            f"\t\tPhysical state: {'LinkUp' if p['state'] == 'Active' else 'Polling'}\n"
            f"\t\tRate: {p['rate']}\n"
            f"\t\tBase lid: {lid(node)}\n"
            "\t\tLMC: 0\n"
            "\t\tSM lid: 1\n"
            "\t\tCapability mask: 0x2651e848\n"
            f"\t\tPort GUID: {p['port_guid']}\n"
            "\t\tLink layer: InfiniBand\n"
        )
    return {PROBE: "".join(blocks)} if blocks else {}

"""`generated/expected/switches/<switch>.json`: what one configured Ethernet switch must look
like, as far as the audit reads it: where to reach it, its BGP sessions and its cables to
other switches. Its files and
units are its deploy map's (`generated/deploy/<switch>.json`), put beside it by the reader.

Both switch OSes are audited: a Cumulus Linux switch like a host (Debian, sshd and the audit
account with its forced command), an EOS switch by its running-config against the generated
startup-config (`intended`, which the reader puts beside the record; contract/eos.py).
"""

from __future__ import annotations

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from contract.deploy import Deploy
from contract.host import EthernetLink
from contract.record import Absent, File, Record, absent

AUDITED_OS = ("cumulus", "eos")  # the switch OSes the audit logs into
EOS = "eos"


class BgpPeer(Record):
    """One planned BGP session: an unnumbered one on a routed port (`neighbor swpN interface`)."""

    port: str = Field(
        description="The routed port, as the switch names it (swp49): FRR keys the session by it."
    )
    peer: str = Field(description="The switch at the far end of its cable.")
    remote_as: int | None = Field(
        description="The far switch's ASN; null where it is not configured by the plan."
    )


class EthernetSwitch(File):
    """One configured Ethernet switch's expected state."""

    host: str = Field(
        description="The switch's name (`host`, as the audit names every machine it logs into)."
    )
    role: str = Field(
        description="Its switch role in cluster/racks/ (storage, management-spine, ...)."
    )
    os: str = Field(description="Its OS: cumulus or eos.")
    rack: str
    u: int = Field(description="The rack unit it occupies.")
    model: str = Field(description="Its switch model in cluster/hardware.yaml.")
    management: str | None = Field(
        description='Its management port\'s address, "a.b.c.d/len": where the audit reaches it.'
    )
    asn: int | None = Field(description="Its BGP ASN; null on a switch that routes nothing.")
    router_id: str | None
    bgp: tuple[BgpPeer, ...] = Field(
        description="Every planned session, by port: each Established, with prefixes received."
    )
    ethernet: tuple[EthernetLink, ...] | Absent = absent(
        "Its installed cables to other switches (uplinks to its spines or from its "
        "rack switches, management-port patches), by its port: what its lldpd must hear on each. "
        "A host's cable is checked from the host's end alone; absent on a switch with none.",
    )
    running_config: tuple[str, ...] | Absent = absent(
        "A routed Cumulus switch's FRR configuration as `vtysh -c 'show "
        "running-config'` must print it for the generated frr.conf: its lines, each prefixed by "
        "its blocks' (`router bgp N > neighbor ...`), as contract/probes/vtysh_running_config.py "
        "normalises both; a line of one side only was changed live, not in the file.",
    )
    # Not in this file: generated/deploy/<switch>.json, which the reader puts beside it.
    deploy: SkipJsonSchema[Deploy | None] = Field(default=None, exclude=True)
    # Nor this: an EOS switch's generated startup-config, which its running-config must be.
    intended: SkipJsonSchema[str | None] = Field(default=None, exclude=True)

    @property
    def ring(self) -> str:
        """Switches are in no rollout ring of the hosts' (cluster/firmware.yaml rings)."""
        return ""

    @property
    def audited(self) -> bool:
        return self.os in AUDITED_OS

    @property
    def eos(self) -> bool:
        return self.os == EOS

    def with_deploy(self, deploy: Deploy | None, intended: str | None = None) -> EthernetSwitch:
        return self.model_copy(update={"deploy": deploy, "intended": intended})

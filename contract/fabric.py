"""`generated/expected/fabric.json`: the InfiniBand fabric as planned, for the audit's
comparison with what `ibnetdiscover` and `mlxfwmanager` see."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from contract.record import File, Record

Lifecycle = Literal["installed", "planned", "spare"]


class End(Record):
    name: str = Field(description="The switch's or host's name.")
    guid: str | None = Field(
        description="A switch's node GUID (null where the site gives none); a host's HCA port GUID."
    )
    port: int = Field(description="The port number (a host's CA port: mlx5_0/1 is 1).")


class Cable(Record):
    id: str = Field(description="The cable's ID, as its label prints it.")
    a: End
    b: End
    rate: str = Field(description='Width and speed: "4xHDR".')
    lifecycle: Lifecycle = Field(
        description="planned: not installed yet; spare: cabled, its switch port down by design."
    )


class Switch(Record):
    """An InfiniBand switch with a firmware baseline: the audit reads its firmware in-band."""

    name: str
    guid: str = Field(description="Its node GUID.")
    model: str
    firmware: str = Field(description="The baseline firmware version.")


class Fabric(File):
    """Every planned InfiniBand cable and every switch with a baseline."""

    rate: str = Field(description="The fabric's speed (HDR).")
    width: str = Field(description='Its links\' width ("4x").')
    switches: tuple[Switch, ...]
    cables: tuple[Cable, ...]

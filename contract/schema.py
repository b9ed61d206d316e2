"""The contract's JSON Schemas, for tools that read generated/ without clusterforge.

`contract/schema/host.schema.json`, `fabric.schema.json` and `switch.schema.json` are exported
from the records (`Host`, `Fabric`, `EthernetSwitch`) and committed; a test fails when they
differ from a fresh export, so they cannot go stale. Regenerate with `python -m contract.schema`
(or `nox -s schema`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from common import atomic
from contract.fabric import Fabric
from contract.host import Host
from contract.record import dumps
from contract.switch import EthernetSwitch

FOLDER = Path(__file__).resolve().parent / "schema"
RECORDS: dict[str, type[BaseModel]] = {"host": Host, "fabric": Fabric, "switch": EthernetSwitch}
DIALECT = "https://json-schema.org/draft/2020-12/schema"  # what pydantic's export follows


def export() -> dict[str, str]:
    """Each schema file's name and text."""
    out = {}
    for name, record in RECORDS.items():
        schema = {"$schema": DIALECT} | record.model_json_schema(by_alias=True)
        out[f"{name}.schema.json"] = dumps(schema)
    return out


def main() -> None:
    for name, text in export().items():
        atomic.replace(FOLDER / name, text)
        print(FOLDER / name)


if __name__ == "__main__":
    main()

"""The identifiers the lab's renderers make up where the expected state holds none (GPU
serials and UUIDs, bus IDs, LIDs): derived from the host's name, so that a recording is the
same every time."""

from __future__ import annotations

import hashlib

_BUS_IDS = ("07", "0f", "47", "4e", "87", "90", "b7", "bd")
_UUID = ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32))


def digest(*parts: object) -> str:
    """A stable hex digest of `parts`."""
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def lid(guid: str) -> int:
    """The LID of a node or port GUID, as the lab's subnet would assign it."""
    return 1 + int(digest("lid", guid)[:4], 16) % 40000


def gpu_ids(host: str, count: int) -> list[tuple[str, str, str]]:
    """Each of a host's `count` GPUs' (PCI bus ID, serial, UUID)."""
    return [
        (
            f"00000000:{_BUS_IDS[i % len(_BUS_IDS)].upper()}:00.0",
            str(1323221000000 + int(digest(host, i)[:6], 16)),
            "GPU-{}-{}-{}-{}-{}".format(*(digest(host, "uuid", i)[a:b] for a, b in _UUID)),
        )
        for i in range(count)
    ]

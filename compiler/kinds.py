"""The closed vocabularies of `cluster/` (roles, media, label stock), apart from the pydantic
models so the CLI can offer them without paying for building the models."""

from __future__ import annotations

from enum import StrEnum

# The stock is the labels contract's, which draw reads too: one enum for both.
from contract.labels import LabelStock as LabelStock


class Role(StrEnum):
    GPU = "gpu"
    LOGIN = "login"
    SUBNET_MANAGER = "subnet-manager"
    PROVISIONING = "provisioning"
    MONITORING = "monitoring"
    SPARE = "spare"


class SwitchRole(StrEnum):
    LEAF = "leaf"
    SPINE = "spine"
    CORE = "core"  # the top tier of a three-tier fat tree: joins the pods' spines
    MANAGEMENT = "management"
    STORAGE = "storage"
    # The Ethernet networks' upper tier (ethernet.yaml): the rack switches of one role uplink
    # to every switch of these, which route between the racks.
    STORAGE_SPINE = "storage-spine"
    MANAGEMENT_SPINE = "management-spine"


# Roles of which a rack may hold several: the upper tiers, whose cables are named by the
# switch, not by the rack's one switch of the role (R01-IB05).
UPPER_ROLES = frozenset(
    {SwitchRole.SPINE, SwitchRole.CORE, SwitchRole.STORAGE_SPINE, SwitchRole.MANAGEMENT_SPINE}
)


class SwitchOs(StrEnum):
    """An Ethernet switch's operating system, which decides its configuration's form:
    Cumulus Linux (NVIDIA Spectrum: ifupdown2 and FRR) or Arista EOS (through pyavd)."""

    CUMULUS = "cumulus"
    EOS = "eos"


class Medium(StrEnum):
    ETHERNET = "ethernet"
    INFINIBAND = "infiniband"


class BootMode(StrEnum):
    """How a server's firmware boots: DHCP, the PXE menus and the disk layout follow from it."""

    UEFI = "uefi"
    BIOS = "bios"


class FirewallPolicy(StrEnum):
    RESTRICTED = "restricted"
    TRUSTED = "trusted"


class FileCheck(StrEnum):
    """How the audit checks a deployed file: its bytes, or only that it is there."""

    CONTENT = "content"
    EXISTS = "exists"


class PciPath(StrEnum):
    """`nvidia-smi topo -m`'s PCIe path types, nearest first. NCCL uses GPUDirect RDMA only up
    to PXB by default (NCCL_NET_GDR_LEVEL): farther, it stages through host memory."""

    PIX = "PIX"
    PXB = "PXB"
    PHB = "PHB"
    NODE = "NODE"
    SYS = "SYS"


# The nearest a GPU and an HCA may be for GPUDirect RDMA to be worth planning.
GPUDIRECT_PATHS = (PciPath.PIX, PciPath.PXB)

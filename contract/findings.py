"""The closed vocabularies of what the audit finds: the kind of a drift, and the one severity
scale a finding and an alert share (Alertmanager's receivers filter on the same words)."""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """What drifted: a finding's `kind`, and the label its metric and alert carry."""

    FIRMWARE = "firmware"
    OFED = "ofed"
    DRIVER = "driver"
    KERNEL = "kernel"
    ROUTE = "route"
    ADDRESS = "address"
    IB_PORT = "ib-port"
    CABLE = "cable"
    GPU = "gpu"
    HOST_KEY = "host-key"
    FILE = "file"
    SERVICE = "service"
    GPUDIRECT = "gpudirect"
    SLURM = "slurm"
    BGP = "bgp"  # a switch's planned BGP session not Established, or learning nothing
    CONFIG = "config"  # a switch's running configuration other than its deployed file's


class Severity(StrEnum):
    """How bad a finding or an alert is."""

    CRITICAL = "critical"
    WARNING = "warning"

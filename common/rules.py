"""Every rule id a diagnostic about `cluster/` names (`file:line:col: rule: message`), one
vocabulary for the loader, the model, the checks and the deploy map: a reader looks a rule up
here, and a test walks these members to find a rule no broken input exercises."""

from __future__ import annotations

from enum import StrEnum, unique


@unique
class Rule(StrEnum):
    # Reading cluster/'s files and their YAML (compiler/load.py, the git source)
    CONTROL_CHARACTER = "control-character"
    DUPLICATE_KEY = "duplicate-key"
    FILE_NAME = "file-name"
    MISSING_FILE = "missing-file"
    MISSING_SOURCE = "missing-source"
    NOT_A_FILE = "not-a-file"
    RACK_FILE_NAME = "rack-file-name"
    UNKNOWN_FILE = "unknown-file"
    YAML_ANCHOR = "yaml-anchor"
    YAML_ENCODING = "yaml-encoding"
    YAML_KEY_TYPE = "yaml-key-type"
    YAML_MERGE_KEY = "yaml-merge-key"
    YAML_SCALAR = "yaml-scalar"
    YAML_SYNTAX = "yaml-syntax"
    YAML_TAG = "yaml-tag"
    YAML_TOO_DEEP = "yaml-too-deep"
    YAML_TOO_LARGE = "yaml-too-large"

    # The model's shape (pydantic's errors in these words; the checks use them too)
    INVALID_VALUE = "invalid-value"
    MISSING_FIELD = "missing-field"
    UNKNOWN_KEY = "unknown-key"
    WRONG_TYPE = "wrong-type"

    # The cluster's consistency (compiler/checks.py)
    ADDRESS_OUTSIDE_SUBNET = "address-outside-subnet"
    ADDRESS_RESERVED = "address-reserved"
    BGP_ASN = "bgp-asn"
    CAGE_LAYOUT = "cage-layout"
    CHANGE_ACCOUNT = "change-account"
    CORE_WITHOUT_PODS = "core-without-pods"
    DUPLICATE_GUID = "duplicate-guid"
    DUPLICATE_IP = "duplicate-ip"
    DUPLICATE_MAC = "duplicate-mac"
    DUPLICATE_NAME = "duplicate-name"
    DUPLICATE_RING_MEMBER = "duplicate-ring-member"
    DUPLICATE_ROLLOUT = "duplicate-rollout"
    DUPLICATE_SERIAL = "duplicate-serial"
    DUPLICATE_SLOT = "duplicate-slot"
    DUPLICATE_SUBNET_MANAGER = "duplicate-subnet-manager"
    DUPLICATE_SWITCH_ROLE = "duplicate-switch-role"
    GPU_AFFINITY = "gpu-affinity"
    INVALID_PLACEHOLDER = "invalid-placeholder"
    IPOIB_MTU = "ipoib-mtu"
    IPOIB_PARTITION = "ipoib-partition"
    LID_RANGE = "lid-range"
    LINK_TO_SPINE = "link-to-spine"
    METRICS_HOST_WITHOUT_NODE_EXPORTER = "metrics-host-without-node-exporter"
    MISSING_BASELINE = "missing-baseline"
    MISSING_SERVICES = "missing-services"
    NTP_WITHOUT_UPSTREAM = "ntp-without-upstream"
    OVERSUBSCRIPTION = "oversubscription"
    PLANE_WITHOUT_CORES = "plane-without-cores"
    POD_WITHOUT_SPINES = "pod-without-spines"
    PORT_OUT_OF_RANGE = "port-out-of-range"
    PORT_REUSED = "port-reused"
    RACK_POSITION = "rack-position"
    RAIL_LAYOUT = "rail-layout"
    RACK_SUBNET_TOO_SMALL = "rack-subnet-too-small"
    RDMA_WITHOUT_HCA = "rdma-without-hca"
    RINGS = "rings"
    ROCE_MISMATCH = "roce-mismatch"
    ROUTE_LEAVES_NETWORK = "route-leaves-network"
    SCALABLE_UNIT = "scalable-unit"
    SERVER_NOT_CONNECTED = "server-not-connected"
    SLURM_GRES = "slurm-gres"
    SLURM_MEMORY = "slurm-memory"
    SLURM_PARTITION = "slurm-partition"
    SLURM_SPARE = "slurm-spare"
    SUBNET_OVERLAP = "subnet-overlap"
    SWITCH_MTU = "switch-mtu"
    THRESHOLD_CEILING = "threshold-ceiling"
    UNEQUAL_UPLINKS = "unequal-uplinks"
    UNKNOWN_REFERENCE = "unknown-reference"
    UNKNOWN_VERSION_KEY = "unknown-version-key"

    # Secrets and values the output would carry (compiler/pipeline.py)
    UNREADABLE_SECRET = "unreadable-secret"
    UNSAFE_VALUE = "unsafe-value"

    # Where each generated file is deployed (compiler/deploy.py)
    FILE_HOME_CONFLICT = "file-home-conflict"
    FILE_HOME_FORBIDDEN = "file-home-forbidden"
    HOMELESS_FILE = "homeless-file"

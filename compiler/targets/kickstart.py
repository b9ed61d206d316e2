"""`generated/kickstart/<host>.ks`: an unattended Rocky Linux 8 install of every host that PXE
boots, served by the provisioning host at `http://<its PXE address>/ks/<host>.ks`.

One template for every host; what differs comes from the plan (addresses, disks, versions,
routes) and from the host's profile in provisioning.yaml (packages, %post steps). Grammar:
RHEL 8 as pykickstart knows it (`ksvalidator -v RHEL8`; FORMATS.md §5).
  network   static, on every interface of the host; the PXE NIC by MAC, the others by name;
            the default route only on networks that carry it
  storage   RAID1 of the host's OS disks by stable name (/dev/disk/by-path or by-id, the
            node's own or its model's), the scratch disk on /scratch; the layout follows
            the model's boot mode: UEFI /boot/efi (RAID1, metadata 1.0), /boot, /; BIOS a
            biosboot partition on each disk, /boot, /
  rootpw    the hash the pipeline read from outside the repository (Plan.secrets), else
            PLACEHOLDER_ROOT_HASH, which no password matches
  %post     `set -euo pipefail`, logged, fails the install on error: local mirrors only,
            the pinned kernel and MLNX_OFED, the profile's steps (GPU driver, exporters),
            the host's route-<iface> files of generated/routes/, and
            /etc/clusterforge/expected.json (the host's generated/expected/ contract)
"""

from __future__ import annotations

import netaddr

from compiler.plan import Host, Interface, Plan
from compiler.targets import routes
from compiler.targets.expected import host_contract
from compiler.targets.render import template, to_json

KS_PATH = "/ks"  # where the provisioning host serves generated/kickstart/
PLACEHOLDER_ROOT_HASH = "$6$PLACEHOLDER$no.password.matches.set.the.real.hash.outside.git"


def server(plan: Plan) -> str:
    """The provisioning host's address on the PXE network: DHCP next-server, TFTP, HTTP."""
    return plan.address(plan.site.services.provisioning, plan.cluster.provisioning.pxe_network)


def http_url(plan: Plan, path: str) -> str:
    """`path` on the provisioning host's HTTP server, as installing hosts reach it."""
    return f"http://{server(plan)}{path}"


def ks_url(plan: Plan, host: Host) -> str:
    return http_url(plan, f"{KS_PATH}/{host.name}.ks")


def boot_nic(plan: Plan, host: Host) -> Interface | None:
    """The NIC `host` PXE boots and installs over, when it has one with a MAC."""
    nic = host.interface(plan.cluster.provisioning.pxe_network)
    return nic if nic is not None and nic.mac else None


def _network(plan: Plan, host: Host, iface: Interface, boot: Interface) -> str:
    """One `network` command: static, by MAC for the boot NIC (names may change in the
    installer), the default route only where the network carries it."""
    net = plan.cluster.networks[iface.network]
    args = [
        f"--device={iface.mac if iface is boot else iface.name}",
        "--bootproto=static",
        f"--ip={iface.address}",
        f"--netmask={netaddr.IPNetwork(iface.cidr).netmask}",
        f"--mtu={iface.mtu}",
    ]
    if net.default_route and iface.gateway:
        args.append(f"--gateway={iface.gateway}")
    else:
        args.append("--nodefroute")
    if iface is boot:
        services = plan.site.services
        dns = ",".join(plan.address(h, iface.network) for h in services.dns)
        args += [f"--nameserver={dns}", f"--hostname={host.name}.{plan.site.domain}", "--activate"]
    return " ".join(["network", *args, "--onboot=yes"])


def render(plan: Plan) -> dict[str, str]:
    prov = plan.cluster.provisioning
    pxe = prov.pxe_network
    ntp = ",".join(plan.address(h, pxe) for h in plan.site.services.ntp)
    repos = [(r.name, http_url(plan, r.path)) for r in prov.repos]
    route_files = routes.render(plan)
    files = {}
    for host in plan.hosts:
        boot = boot_nic(plan, host)
        if boot is None:
            continue
        prefix = f"routes/{host.name}/route-"
        files[f"kickstart/{host.name}.ks"] = template(
            "kickstart.ks.j2",
            host=host,
            site=plan.site,
            prov=prov,
            install=http_url(plan, prov.install_path),
            repos=repos,
            ntp=ntp,
            networks=[_network(plan, host, i, boot) for i in host.interfaces],
            root_hash=plan.secrets.get("root_password_hash", PLACEHOLDER_ROOT_HASH),
            profile=prov.profiles[host.profile],
            variables={key.upper(): value for key, value in host.versions.items()},
            route_files={
                p.rsplit("/", 1)[1]: text for p, text in route_files.items() if p.startswith(prefix)
            },
            expected=to_json(host_contract(host)),
        )
    return files

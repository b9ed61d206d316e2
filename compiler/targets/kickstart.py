"""`generated/kickstart/<host>.ks`: an unattended Rocky Linux 8 install of every host that PXE
boots, served by the provisioning host at `http://<its PXE address>/ks/<host>.ks`.

One template for every host (its sources, disks, versions and %post's software steps in
templates of their own, each rendered once for the hosts that share it); what differs comes
from the plan (addresses, disks, versions) and from what the host's role runs (services.yaml).
Grammar: RHEL 8 as pykickstart knows it (`ksvalidator -v RHEL8`; FORMATS.md §5).
  sources   the provisioning host's mirrors, for every host but the provisioning host itself:
            it serves them, so it installs from `provisioning.yaml: bootstrap` (the DVD or
            an upstream tree, upstream repos, its own resolvers) and gets its bundle after
            the install (docs/bootstrap.md), never anything from its own address
  network   the installer's network only: static on the PXE NIC, matched by MAC; the
            installed system is configured by the generated keyfiles, nothing else
  storage   RAID1 of the host's OS disks by stable name (/dev/disk/by-path or by-id, the
            node's own or its model's), the scratch disk on /scratch; the layout follows
            the model's boot mode: UEFI /boot/efi (RAID1, metadata 1.0), /boot, /; BIOS a
            biosboot partition on each disk, /boot, /
  rootpw    the hash the pipeline read from outside the repository (Plan.secrets), else
            PLACEHOLDER_ROOT_HASH, which no password matches
  %packages the role's profile (provisioning.yaml): the environment group the first boot needs
  %post     `set -euo pipefail`, logged, fails the install on error, in an order that makes
            kernel modules match the kernel that boots:
            1. local mirrors only (the provisioning host: bootstrap's upstream repos);
            2. the pinned kernel (and its headers), made the default;
            3. MLNX_OFED where the model has an HCA, its kernel modules built for that kernel,
               proven by ofed_info and by mlx5_core's file being OFED's, not the kernel's;
            4. the role's services: module streams, packages (the GPU driver after OFED, since
               nvidia-peermem links against OFED's ib_core), DKMS modules built for the pinned
               kernel rather than the installer's, then every module the services load,
               proven present for the pinned kernel before the first boot;
            5. the host's bundle (BUNDLE_PATH on the provisioning host): every file of
               generated/deploy/<host>.json, checked against its sha256, installed with its
               mode and owner; the installer's own ifcfg files removed, so the keyfiles are
               the network's one configuration (the provisioning host: the installer is
               left in /root for the bundle applied after, its network kept till then);
               sshd_config made to read its drop-ins, the bundle's accounts (sysusers.d)
               and their folders (tmpfiles.d) made;
            6. the services' units enabled.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from common import memo
from compiler.model import Provisioning, Site
from compiler.plan import Host, Interface, Plan, network
from compiler.targets.render import Lines, template
from compiler.targets.shared import BUNDLE_PATH, boot_nic, http_url

PLACEHOLDER_ROOT_HASH = "$6$PLACEHOLDER$no.password.matches.set.the.real.hash.outside.git"


def _network(plan: Plan, host: Host, boot: Interface) -> str:
    """The installer's `network` command: static on the boot NIC, by MAC (names may change in
    the installer), with the default route only where its network carries one."""
    default = next((r for r in host.routes if r.dst == "default" and r.dev == boot.name), None)
    args = [
        f"--device={boot.mac}",
        "--bootproto=static",
        f"--ip={boot.address}",
        f"--netmask={network(boot.subnet).netmask}",
        f"--mtu={boot.mtu}",
    ]
    if default is not None:
        args.append(f"--gateway={default.gateway}")
    else:
        args.append("--nodefroute")
    dns = ",".join(plan.address(h, boot.network) for h in plan.site.services.dns)
    bootstrap = plan.provisioning.bootstrap
    if host.name == plan.site.services.provisioning and bootstrap.nameservers:
        dns = ",".join(bootstrap.nameservers)  # the site's DNS is this host, not up yet
    args += [f"--nameserver={dns}", f"--hostname={host.name}.{plan.site.domain}", "--activate"]
    return " ".join(["network", *args, "--onboot=yes"])


# Tuples, not lists: a diff keys each host's kickstart by them.
Sources = tuple[str | None, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]


def bootstrap_sources(plan: Plan) -> Sources:
    """The provisioning host's own install sources, from `bootstrap`, never its own address:
    (the installer's tree, None for `cdrom`; the installer's other repos; the installed
    system's repos, `baseos` first), in the order of `repos`."""
    boot = plan.provisioning.bootstrap
    install = None if boot.install == "cdrom" else boot.install
    repos = tuple(
        (r.name, boot.repos[r.name]) for r in plan.provisioning.repos if r.name in boot.repos
    )
    base = boot.repos.get("baseos", install)
    return install, repos, ((("baseos", base),) if base else ()) + repos


class Sections(NamedTuple):
    """The parts of a kickstart most of its values are in, each its own template rendered
    once for every host that gives it the same values: rendered for every host, they were
    half the kickstarts' time."""

    sources: Lines  # the installer's tree and repositories
    repo_file: Lines  # the installed system's repositories, written by %post
    storage: Lines  # the disks
    variables: Lines  # the versions the host must run, as %post's shell variables
    software: Lines  # %post's kernel, MLNX_OFED and the role's software


def render(plan: Plan) -> dict[str, str]:
    prov = plan.provisioning
    pxe = prov.pxe_network
    ntp = ",".join(plan.address(h, pxe) for h in plan.site.services.ntp)
    mirror = http_url(plan, prov.install_path)
    repos = tuple((r.name, http_url(plan, r.path)) for r in prov.repos)
    apply_bundle = Lines(template("apply-bundle.py.j2"))  # the same script in every kickstart: once
    files = {}
    root_hash = plan.secrets.get("root_password_hash", PLACEHOLDER_ROOT_HASH)
    rendered: dict[tuple[object, ...], Lines] = {}

    def section(name: str, **context: Any) -> Lines:
        """`templates/<name>` for these values (all it sees), rendered once; its last line
        break taken off, as the main template writes it on a line of its own."""
        key = (name, *context.items())
        if key not in rendered:
            rendered[key] = Lines(template(name, **context).removesuffix("\n"))
        return rendered[key]

    for host in plan.hosts:
        boot = boot_nic(plan, host)
        if boot is None:
            continue
        sources: Sources = (mirror, repos, (("baseos", mirror), *repos))
        bundle: str | None = http_url(plan, BUNDLE_PATH)
        if host.name == plan.site.services.provisioning:
            sources, bundle = bootstrap_sources(plan), None
        install, host_repos, post_repos = sources
        sw = host.software
        sections = Sections(
            section("kickstart-sources.j2", install=install, repos=host_repos),
            section("kickstart-repo-file.j2", site=plan.site.name, post_repos=post_repos),
            section("kickstart-storage.j2", os_disks=host.os_disks,
                    scratch_disk=host.scratch_disk, boot=host.boot),
            section("kickstart-versions.j2",
                    variables=tuple((key.upper(), value) for key, value in host.versions.items())),
            section("kickstart-software.j2", hca=bool(host.ib_ports), model=host.model,
                    role=host.role.value, services=host.services, streams=sw.module_streams,
                    packages=sw.packages, modules=sw.kernel_modules),
        )  # fmt: skip
        files[f"kickstart/{host.name}.ks"] = _kickstart(
            host,
            plan.site,
            prov,
            sections,
            ntp,
            _network(plan, host, boot),
            root_hash,
            bundle,
            apply_bundle,
        )
    return files


@memo.by_value  # a diff's two sides share each host's kickstart unless the host changed
def _kickstart(
    host: Host,
    site: Site,
    prov: Provisioning,
    sections: Sections,
    ntp: str,
    network: str,
    root_hash: str,
    bundle: str | None,
    apply_bundle: Lines,
) -> str:
    return template(
        "kickstart.ks.j2",
        host=host,
        site=site,
        prov=prov,
        **sections._asdict(),
        ntp=ntp,
        network=network,
        root_hash=root_hash,
        profile=prov.profiles[host.profile],
        units=host.software.units,
        bundle=bundle,
        apply_bundle=apply_bundle,
    )

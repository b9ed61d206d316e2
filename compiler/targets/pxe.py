"""`generated/pxe/`: per-host boot menus on the TFTP root, named the way the loaders look them
up by the MAC of the NIC that booted (ARP type 01, lower-case hex, dashes):
  pxelinux.cfg/01-aa-bb-cc-dd-ee-ff   PXELINUX, for hosts whose model boots BIOS
  grub.cfg-01-aa-bb-cc-dd-ee-ff       GRUB (loaded by shim), for hosts whose model boots UEFI
One menu per host, for its boot mode (the DHCP server offers only that loader). It starts
the installer with that host's kickstart (`inst.ks=`) and the install tree
(`inst.repo=`), and brings up only the booting NIC (`BOOTIF=`). A MAC without a menu falls
through to the loader's default, which this target does not write.
"""

from __future__ import annotations

from compiler.model import BootMode
from compiler.plan import Plan
from compiler.targets.kickstart import boot_nic, http_url, ks_url
from compiler.targets.render import template


def render(plan: Plan) -> dict[str, str]:
    prov = plan.cluster.provisioning
    files = {}
    for host in plan.hosts:
        nic = boot_nic(plan, host)
        if nic is None or nic.mac is None:
            continue
        bootif = "01-" + nic.mac.replace(":", "-")
        args = " ".join(
            [
                f"inst.ks={ks_url(plan, host)}",
                f"inst.repo={http_url(plan, prov.install_path)}",
                "ip=dhcp",
                f"BOOTIF={bootif}",
            ]
        )
        loader, path = {
            BootMode.BIOS: ("pxelinux", f"pxelinux.cfg/{bootif}"),
            BootMode.UEFI: ("grub", f"grub.cfg-{bootif}"),
        }[host.boot]
        files[f"pxe/{path}"] = template(
            f"{loader}.cfg.j2", host=host, nic=nic, prov=prov, args=args
        )
    return files

"""A change plan as an Ansible playbook: applied by ansible-core, not by a home-made engine.

`files(plan, base, head, user)` gives the plan's folder, path -> bytes:

- `inventory.yml`: a group per stage (`stage_1`, ...), each device with its management
  address and its facts (`cf_files`: path, mode, owner, what BASE's sha256 is; `cf_reloads`);
  the change account (`ansible_user`, site.yaml `change.user`) with sudo (`become`): never the
  audit's, which stays read-only;
- `apply.yml`: a play per stage in the plan's order (`serial` and `max_fail_percentage: 0`,
  so a failing device stops the rollout before the next). On each device: the pre-check
  (every file's sha256 is still BASE's, or the file is absent where HEAD adds it; else the
  device fails and nothing is changed on it), HEAD's files installed, the files HEAD drops
  removed, then the reloads, in order;
- `rollback.yml`: the stages in reverse, BASE's files put back, HEAD's additions removed,
  and the same reloads;
- `files/<device>/{base,head}/<path>`: the bytes each side installs.

Three variables exist for a lab, default to a real device's values and are documented in
docs/change.md: `cf_root` (a folder standing for `/`), `cf_systemctl` (the program the
reloads run) and `cf_owners` (whether to set owners, which needs root).
"""

from __future__ import annotations

import io
from typing import Any

from ruamel.yaml import YAML

from compiler.change import ChangePlan, Device
from compiler.pipeline import Compiled

INVENTORY = "inventory.yml"
APPLY = "apply.yml"
ROLLBACK = "rollback.yml"

_COMMON_VARS = {"cf_root": "", "cf_systemctl": "systemctl", "cf_owners": True}

_PRECHECK = """\
    - name: Pre-check, every file is still what BASE generated
      ansible.builtin.stat:
        path: "{{ cf_root }}{{ item.path }}"
        checksum_algorithm: sha256
      loop: "{{ cf_files }}"
      loop_control: {label: "{{ item.path }}"}
      register: cf_now
    - name: Refuse a device changed by hand since BASE
      ansible.builtin.assert:
        that: (item.stat.checksum | default('absent')) == item.item.expect
        fail_msg: "{{ item.item.path }} is not what BASE generated: refused, nothing changed"
        quiet: true
      loop: "{{ cf_now.results }}"
      loop_control: {label: "{{ item.item.path }}"}
"""

_INSTALL = """\
    - name: Folders of the files {side} places
      ansible.builtin.file:
        path: "{{{{ cf_root }}}}{{{{ item.path | dirname }}}}"
        state: directory
      loop: "{{{{ cf_files | selectattr('{side}') }}}}"
      loop_control: {{label: "{{{{ item.path }}}}"}}
    - name: Install {side}'s files
      ansible.builtin.copy:
        src: "{{{{ playbook_dir }}}}/files/{{{{ inventory_hostname }}}}/{side}{{{{ item.path }}}}"
        dest: "{{{{ cf_root }}}}{{{{ item.path }}}}"
        mode: "{{{{ item.mode }}}}"
        owner: "{{{{ item.owner.split(':')[0] if cf_owners else omit }}}}"
        group: "{{{{ item.owner.split(':')[1] if cf_owners else omit }}}}"
      loop: "{{{{ cf_files | selectattr('{side}') }}}}"
      loop_control: {{label: "{{{{ item.path }}}}"}}
    - name: Remove the files {side} does not place
      ansible.builtin.file:
        path: "{{{{ cf_root }}}}{{{{ item.path }}}}"
        state: absent
      loop: "{{{{ cf_files | rejectattr('{side}') }}}}"
      loop_control: {{label: "{{{{ item.path }}}}"}}
    - name: Reload, in the device's unit order
      ansible.builtin.command: "{{{{ cf_systemctl }}}} reload-or-restart {{{{ item }}}}"
      loop: "{{{{ cf_reloads }}}}"
      changed_when: true
"""


def _play(n: int, name: str, serial: int | str, tasks: str) -> str:
    return (
        f'- name: "{n}. {name}"\n'
        f"  hosts: stage_{n}\n"
        f"  serial: {serial if isinstance(serial, int) else repr(serial)}\n"
        "  max_fail_percentage: 0\n"
        "  gather_facts: false\n"
        "  become: true\n"
        "  tasks:\n"
        f"{tasks}"
    )


def _vars(d: Device) -> dict[str, Any]:
    files = [
        {
            "path": c.path,
            "mode": (c.head or c.base).mode,  # type: ignore[union-attr]
            "owner": (c.head or c.base).owner,  # type: ignore[union-attr]
            "expect": c.base.sha256 if c.base else "absent",  # what the pre-check wants
            "base": c.base is not None,
            "head": c.head is not None,
        }
        for c in d.files
        if not c.manual
    ]
    facts: dict[str, Any] = {"cf_files": files, "cf_reloads": list(d.reloads)}
    if d.address:
        facts["ansible_host"] = d.address
    return facts


def _by_files(d: Device) -> bool:
    """Whether the playbook changes `d` by its files: an EOS switch takes the plan's
    commands (hier_config's) in its own CLI, which ansible-core alone does not speak."""
    return d.kind != "switch eos"


def _yaml(data: object) -> bytes:
    out = io.StringIO()
    y = YAML()
    y.default_flow_style = False
    y.width = 4096  # a sha256 on its own line reads worse than a long one
    y.dump(data, out)
    return out.getvalue().encode()


def files(plan: ChangePlan, base: Compiled, head: Compiled, user: str) -> dict[str, bytes]:
    """The playbook folder of `plan`, path -> bytes."""
    groups = {
        f"stage_{n}": {"hosts": {d.name: _vars(d) for d in s.devices if _by_files(d)}}
        for n, s in enumerate(plan.stages, 1)
    }
    inventory = {
        "all": {
            "vars": {"ansible_user": user, "ansible_become": True, **_COMMON_VARS},
            "children": groups,
        }
    }
    header = f"# clusterforge plan {plan.base} {plan.head}\n"
    n_stages = len(plan.stages)
    apply = [
        _play(n, s.name, s.serial, _PRECHECK + _INSTALL.format(side="head"))
        for n, s in enumerate(plan.stages, 1)
    ]
    rollback = [
        _play(n, f"undo {s.name}", s.serial, _INSTALL.format(side="base"))
        for n, s in reversed(list(enumerate(plan.stages, 1)))
    ]
    out = {
        INVENTORY: header.encode() + _yaml(inventory),
        # An empty plan is an empty list of plays, which Ansible runs as nothing to do.
        APPLY: (header + "---\n" + ("\n".join(apply) if n_stages else "[]\n")).encode(),
        ROLLBACK: (header + "---\n" + ("\n".join(rollback) if n_stages else "[]\n")).encode(),
    }
    for d in filter(_by_files, plan.devices):
        for c in d.files:
            if c.manual:
                continue
            for side, placed, compiled in (("base", c.base, base), ("head", c.head, head)):
                if placed is not None:
                    out[f"files/{d.name}/{side}{c.path}"] = compiled.files[placed.source]
    return out

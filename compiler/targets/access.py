"""`generated/access/`: the drift audit's account, which makes "read-only" the host's rule.

The audit logs in as `site.audit.user` with one key; sshd runs every command that key sends
through a forced command, which runs only the allowlisted probes of `contract/probes/`, by
name, with their arguments checked, and sudo grants that account exactly the probes needing
root. Each file, where it goes on every host (the host's bundle), its mode and owner:

| file                       | destination                                    | mode | owner     |
| -------------------------- | ---------------------------------------------- | ---- | --------- |
| `<role>/clusterforge-probe`| `/usr/local/libexec/clusterforge-probe`        | 0755 | root:root |
| `authorized_keys`          | `/etc/ssh/authorized_keys/<user>` (dir 0755)   | 0644 | root:root |
| `sshd_config`              | `/etc/ssh/sshd_config.d/50-<user>.conf`        | 0644 | root:root |
|                            | (included by sshd_config: RHEL 9 does; on      |      |           |
|                            | Rocky 8 the kickstart adds the Include)        |      |           |
| `<role>/sudoers`           | `/etc/sudoers.d/<user>`                        | 0440 | root:root |
| `sysusers.conf`            | `/usr/lib/sysusers.d/<user>.conf` (the user,   | 0644 | root:root |
|                            | the groups its probes need: lldpd; an OS that  |      |           |
|                            | names them otherwise, its own: `<os>/`)        |      |           |
| `limits.conf`              | `/etc/security/limits.d/50-<user>.conf`        | 0644 | root:root |
| `tmpfiles.conf`            | `/usr/lib/tmpfiles.d/clusterforge-audit.conf`  | 0644 | root:root |
|                            | (its home: systemd-sysusers makes none)        |      |           |

A Cumulus Linux switch gets the same files from its own service (`cumulus` in services.yaml),
at the same paths, which Debian (Cumulus's base) keeps: its sshd_config includes
sshd_config.d/*.conf, its /etc/pam.d/sshd runs pam_limits, and systemd-sysusers and
tmpfiles.d read /usr/lib/; its forced command and sudoers are its OS's (`access/cumulus/`),
and so is its sysusers.conf, since Debian names lldpd's socket group `_lldpd` (the service's
`groups` in services.yaml), where EPEL's lldpd names it `lldpd`.

The key and the files being root's, the account can change none of them. `restrict` turns off
forwarding, a PTY, ~/.ssh/rc and agent use; the Match block says the same again for any key
of the account (`ForceCommand`: a key added without `command=` still runs only the forced
command, sftp included) and bounds what one login may hold: `MaxSessions` channels, a dead
client dropped after `ClientAliveInterval` x `ClientAliveCountMax` seconds, no forwarding of
any kind, no TTY, no ~/.ssh/rc. All of them are Match keywords of OpenSSH 8.0 (Rocky 8's):
its servconf.c marks them SSHCFG_ALL; ChannelTimeout and UnusedConnectionTimeout came in 9.2
and are left out. The account's processes are bounded by pam_limits (`limits.conf`): Rocky
8's sshd runs with UsePAM yes and its /etc/pam.d/sshd includes password-auth, whose session
stack has pam_limits.so, so `nproc` caps every login of the account together (a systemd
user slice's TasksMax would need the account's uid, which sysusers picks on the host, and a
logind session, which sshd without a TTY still makes but pam_systemd may be absent).

The forced command ignores what the client asks for and reads it from
`SSH_ORIGINAL_COMMAND`: `[--within SECONDS] PROBE [ARGUMENT...]`. The probe runs under
timeout(1) for SECONDS (the audit sends what is left of the host's time; at most
`probe_timeout_s`), so it ends on the host even when the audit has hung up: sshd neither
kills a session's command when the client goes nor delivers signals to a forced command.
Refused with exit 126 before anything runs: an unknown probe, a wrong number of arguments,
an interface name outside the Linux rules, a unit name of other characters or suffixes, and
for the probes that read files as root (`sha256sum`, `file_exists`) any list of paths but
one a host of this role has in its deploy map, word for word: the forced command and sudoers
are rendered per role from the deploy map (`role_files`, after it), so neither holds a `*`.
Files whose deployed bytes carry a secret (`check: exists`) are only ever stat'ed, never
hashed; a deploy map cannot place a file under /dev, /proc or /sys (compiler/deploy.py), and
the forced command refuses such a path again. In sudoers, a command without arguments is
written with `""`: a bare path would allow it any arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from common.errors import TargetError
from compiler.model import AuditAccess
from compiler.plan import Machine, Plan
from contract import Deploy, probes
from contract.account import FORCED, PROBE_COMMAND, SUDOERS
from contract.deploy import FILE_PROBES, file_arguments
from contract.probes.spec import (
    FORBIDDEN_ROOTS,
    IFACE,
    IFACE_CHARS,
    IFACE_MAX,
    UNIT_SUFFIXES,
    Probe,
)

REFUSED = 126  # the forced command's exit code for anything not allowlisted
_WITHIN_DIGITS = 4  # --within takes 1..9999 seconds, capped at probe_timeout_s
_KILL_AFTER_S = 5  # SIGKILL this long after the SIGTERM, for a probe that ignores it
# One login: the audit runs its probes one after another on one channel; a few more leave
# room for a retry while the last channel closes.
_MAX_SESSIONS = 4
_ALIVE_INTERVAL_S, _ALIVE_COUNT = 15, 4  # a client gone silent is dropped within a minute
# Processes of the account on a host, all logins together: each probe is sshd's session
# process, the forced command's sh, timeout(1), sudo and the program (nvidia-smi's threads
# count too); 64 is a dozen probes at once, far under what would starve the host.
_NPROC = 64
_PER_ROLE = "access/{role}/"  # how services.yaml names the per-role files' sources


def render(plan: Plan) -> dict[str, str]:
    """The files every host shares; the forced command and sudoers are per role and come
    after the deploy map (`role_files`)."""
    access = plan.site.audit
    if access is None:
        return {}
    # An OS whose packages name a probe's group otherwise (Debian's `_lldpd`) gets its own.
    own = {
        f"access/{m.role}/sysusers.conf": sysusers(access, groups)
        for m in _audited(plan)
        if (groups := _groups(m))
    }
    return own | {
        "access/authorized_keys": authorized_keys(access),
        "access/sshd_config": sshd_config(access),
        "access/sysusers.conf": sysusers(access),
        "access/tmpfiles.conf": home(access),
        "access/limits.conf": limits(access),
    }


def role_sources(plan: Plan) -> list[str]:
    """The per-role files' names under generated/, known before their contents: the deploy
    map places them (`access/{role}/...` in services.yaml) before `role_files` fills them."""
    roles = sorted({m.role for m in _audited(plan)})
    return [f"access/{role}/{name}" for role in roles for name in (FORCED, SUDOERS)]


def _audited(plan: Plan) -> list[Machine]:
    """The hosts and switches whose services place the account's per-role files: every host
    (the base service's), and the switches whose OS's services do (Cumulus Linux's)."""
    if plan.site.audit is None:
        return []
    return [
        m
        for m in plan.machines()
        if any(
            home.source.startswith(_PER_ROLE) for _, s in m.software.services for home in s.files
        )
    ]


def role_files(plan: Plan, deploys: Mapping[str, Deploy]) -> dict[str, str]:
    """Each role's forced command and sudoers, allowing the file probes exactly the lists of
    paths its hosts' deploy maps give them (one list where the role's hosts are alike); a
    switch's role is its OS."""
    access = plan.site.audit
    if access is None:
        return {}
    lists: dict[str, dict[str, dict[tuple[str, ...], None]]] = {}
    for machine in _audited(plan):
        mine = lists.setdefault(machine.role, {p: {} for p in FILE_PROBES})
        for probe, paths in file_arguments(deploys[machine.name].files).items():
            mine[probe][paths] = None
    out: dict[str, str] = {}
    for role, by_probe in sorted(lists.items()):
        allowed = {p: sorted(v) for p, v in by_probe.items()}
        out[f"access/{role}/{FORCED}"] = forced_command(access, allowed)
        out[f"access/{role}/{SUDOERS}"] = sudoers(access, allowed)
    return out


def authorized_keys(access: AuditAccess, command: str = PROBE_COMMAND) -> str:
    """The audit key's line: nothing but the forced command, nothing forwarded."""
    return (
        f"# {access.user}: the drift audit's key (generated by clusterforge; do not edit)\n"
        f'restrict,command="{command}" {access.public_key}\n'
    )


def sshd_config(access: AuditAccess, command: str = PROBE_COMMAND) -> str:
    """Where sshd finds the account's key: a root-owned file outside its home, so nothing in
    the home (which the account may write) can add a key or drop `restrict`; and what any
    login of the account may do, whatever its key says."""
    return (
        f"# The drift audit's account (generated by clusterforge; do not edit)\n"
        f"Match User {access.user}\n"
        f"    AuthorizedKeysFile /etc/ssh/authorized_keys/%u\n"
        f"    ForceCommand {command}\n"
        "    AuthenticationMethods publickey\n"
        "    PasswordAuthentication no\n"
        "    KbdInteractiveAuthentication no\n"
        "    MaxAuthTries 2\n"
        f"    MaxSessions {_MAX_SESSIONS}\n"
        f"    ClientAliveInterval {_ALIVE_INTERVAL_S}\n"
        f"    ClientAliveCountMax {_ALIVE_COUNT}\n"
        "    DisableForwarding yes\n"
        "    AllowAgentForwarding no\n"
        "    AllowTcpForwarding no\n"
        "    AllowStreamLocalForwarding no\n"
        "    X11Forwarding no\n"
        "    PermitTunnel no\n"
        "    PermitListen none\n"
        "    PermitOpen none\n"
        "    PermitTTY no\n"
        "    PermitUserRC no\n"
    )


def limits(access: AuditAccess) -> str:
    """pam_limits' file for the account: at most `_NPROC` processes, all its logins together
    (RLIMIT_NPROC counts every process of the uid), so no number of sessions can crowd the
    host; no core files of root probes' memory."""
    return (
        f"# /etc/security/limits.d/50-{access.user}.conf (generated by clusterforge; do not edit)\n"
        "# The drift audit's account: read by pam_limits at every sshd login.\n"
        f"{access.user} hard nproc {_NPROC}\n"
        f"{access.user} hard core 0\n"
    )


def _groups(m: Machine) -> dict[str, str]:
    """The probes' groups as the machine's services name them where their OS differs."""
    return {k: v for _, s in m.software.services for k, v in s.groups.items()}


def sysusers(access: AuditAccess, renamed: Mapping[str, str] | None = None) -> str:
    # A login shell is needed: sshd runs the forced command with `<shell> -c`. The groups are
    # those the probes name to run without root, as the OS names them (`renamed`, from its
    # services' `groups`); sysusers.d(5): `m` makes a group not there yet, and the package
    # that owns it (lldpd's own sysusers.d file, or its Debian postinst) takes it as is.
    names = {e.spec.group for e in probes.PROBES.values() if e.spec.group}
    groups = sorted({(renamed or {}).get(g, g) for g in names})
    return (
        "# The drift audit's account (generated by clusterforge; do not edit)\n"
        f'u {access.user} - "clusterforge drift audit (read-only)" /var/lib/{access.user} /bin/sh\n'
        + "".join(f"m {access.user} {group}\n" for group in groups)
    )


def home(access: AuditAccess) -> str:
    """The account's home, which systemd-sysusers names but never makes: tmpfiles.d makes it
    at every boot (and the kickstart's %post at install), the account's own."""
    return (
        "# The drift audit's account's home (generated by clusterforge; do not edit)\n"
        f"d /var/lib/{access.user} 0750 {access.user} {access.user} -\n"
    )


def sudoers(
    access: AuditAccess, allowed: Mapping[str, Sequence[tuple[str, ...]]] | None = None
) -> str:
    """Exactly the root probes' command lines, nothing else: the file probes with each list
    of paths `allowed` (by probe), word for word; without a list, a file probe is not granted."""
    lines = []
    for probe in _root_probes():
        args = [_sudo_escape(a) for a in probe.argv[1:]]
        if probe.takes is None:
            lines.append(" ".join((probe.program, *(args or ['""']))))
            continue
        for paths in (allowed or {}).get(probe.name, ()):
            # One word a line (sudoers joins a continued line with a space), so that a host
            # with hundreds of files still reads as lines a person can check.
            words = [probe.program, *args, "--", *(_sudo_escape(p) for p in paths)]
            lines.append(" \\\n        ".join(words))
    alias = ", \\\n    ".join(lines)
    return (
        f"# /etc/sudoers.d/{access.user} (generated by clusterforge; do not edit)\n"
        "# The drift audit's probes that need root, each with exactly its arguments.\n"
        f"Cmnd_Alias CLUSTERFORGE_PROBES = \\\n    {alias}\n"
        f"Defaults:{access.user} !requiretty\n"
        f"{access.user} ALL=(root) NOPASSWD: CLUSTERFORGE_PROBES\n"
    )


def _root_probes() -> list[Probe]:
    found = sorted((e.spec for e in probes.PROBES.values() if e.spec.root), key=lambda p: p.name)
    for probe in found:
        if probe.per_interface:
            # sudoers could only grant it with a wildcard: any argument at all.
            raise TargetError(f"probe {probe.name!r} needs root and takes an argument")
    return found


def _sudo_escape(arg: str) -> str:
    for char in "\\,:=":
        arg = arg.replace(char, f"\\{char}")
    return arg


def forced_command(
    access: AuditAccess, allowed: Mapping[str, Sequence[tuple[str, ...]]] | None = None
) -> str:
    """The POSIX sh script sshd runs for every command of the audit key; the file probes may
    be given only a list of `allowed` (by probe), else they are refused."""
    # An EOS CLI command is never the forced command's: EOS runs it in its own CLI.
    cases = "".join(
        _case(entry.spec, (allowed or {}).get(name, ()))
        for name, entry in sorted(probes.PROBES.items())
        if entry.spec.scope != "eos"
    )
    limit = access.probe_timeout_s
    digits = " | ".join("[1-9]" + "[0-9]" * n for n in range(_WITHIN_DIGITS))
    return f"""#!/bin/sh
# clusterforge-probe: the forced command of the drift audit's account {access.user}
# (generated by clusterforge from contract/probes/; do not edit). sshd runs it for every
# command the audit key sends; the command is read, never run: SSH_ORIGINAL_COMMAND is
#     [--within SECONDS] PROBE [ARGUMENT]
# and names one allowlisted probe, which runs for at most SECONDS (at most {limit}), ended by
# timeout(1) even when the audit has hung up. Anything else: exit {REFUSED}, nothing run.
set -f
LC_ALL=C
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL PATH
refuse() {{
    printf 'clusterforge-probe: refused: %s\\n' "$1" >&2
    exit {REFUSED}
}}
within={limit}
# Split at spaces only, never globbed (set -f): the words are data, checked below.
IFS=' '
# shellcheck disable=SC2086
set -- ${{SSH_ORIGINAL_COMMAND-}}
if [ "${{1-}}" = --within ]; then
    case "${{2-}}" in
    {digits}) ;;
    *) refuse "--within takes whole seconds, 1 to 9999" ;;
    esac
    if [ "$2" -lt "$within" ]; then within=$2; fi
    shift 2
fi
[ $# -ge 1 ] || refuse "no probe named"
probe=$1
shift
root=no
case $probe in
{cases}*)
    refuse "not an allowlisted probe"
    ;;
esac
if [ "$root" = yes ] && [ "$(id -u)" != 0 ]; then
    set -- /usr/bin/sudo -n -- "$@"
fi
exec timeout -k {_KILL_AFTER_S} "$within" "$@"
"""


# How the forced command checks each unit name systemctl_show is asked for: the rules of
# contract.probes.spec._ARGUMENT, as sh patterns (C locale).
_TAKES = {
    "units": (
        "        case $a in\n"
        '        *[!A-Za-z0-9@_.-]* | *..*) refuse "{name}: not a unit name" ;;\n'
        "        {suffixes}) ;;\n"
        '        *) refuse "{name}: not a unit name" ;;\n'
        "        esac\n"
    ),
}


def _case(probe: Probe, allowed: Sequence[tuple[str, ...]] = ()) -> str:
    words = [probe.program, *(_sh_word(a) for a in probe.argv[1:])]
    if probe.takes == "paths":
        if not allowed:
            return (
                f'{probe.name})\n    refuse "{probe.name}: no files of this role to read"\n    ;;\n'
            )
        # The words as split at spaces, joined again: exactly one list a host of the role
        # has, so no path outside a deploy map, nor a subset to probe for files one by one.
        lists = " |\n    ".join(_sh_word(" ".join(paths), quote=True) for paths in allowed)
        forbidden = " | ".join(f"*\\ {root}/* | {root}/*" for root in FORBIDDEN_ROOTS)
        check = (
            '    case "$*" in\n'
            f'    {forbidden}) refuse "{probe.name}: a device or kernel file" ;;\n'
            f"    {lists}) ;;\n"
            f'    *) refuse "{probe.name}: not the files of a host of this role" ;;\n'
            "    esac\n"
        )
        words += ["--", '"$@"']
    elif probe.takes is not None:
        suffixes = " | ".join(f"?*.{s}" for s in UNIT_SUFFIXES)
        check = (
            f'    [ $# -ge 1 ] || refuse "{probe.name} takes {probe.takes}"\n'
            "    for a; do\n"
            + _TAKES[probe.takes].format(name=probe.name, suffixes=suffixes)
            + "    done\n"
        )
        words += ["--", '"$@"']
    elif probe.per_interface:
        check = (
            f'    [ $# -eq 1 ] || refuse "{probe.name} takes one interface name"\n'
            "    case $1 in\n"
            f"    '' | -* | *[!{IFACE_CHARS}]*) refuse \"{probe.name}: not an interface name\" ;;\n"
            "    esac\n"
            f'    [ ${{#1}} -le {IFACE_MAX} ] || refuse "{probe.name}: not an interface name"\n'
        )
        words = [w if w != _sh_word(IFACE) else '"$1"' for w in words]
    else:
        check = f'    [ $# -eq 0 ] || refuse "{probe.name} takes no argument"\n'
    root = "    root=yes\n" if probe.root else ""
    return f"{probe.name})\n{check}    set -- {' '.join(words)}\n{root}    ;;\n"


def _sh_word(arg: str, quote: bool = False) -> str:
    if arg == IFACE:
        return arg
    if not quote and all(c.isalnum() or c in "-_./=,:@" for c in arg):
        return arg
    return "'" + arg.replace("'", "'\\''") + "'"

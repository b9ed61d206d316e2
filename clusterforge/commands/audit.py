"""The commands that judge the machines: `audit` (live, replayed, sharded, merged,
its history) and `accept`."""

from __future__ import annotations

import argparse
import json
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterforge.commands import Command, Progress
from common.errors import EXIT_OK

if TYPE_CHECKING:
    from draw.report import Renderer


def add(command: Command) -> None:
    """Declare this module's commands."""
    a = command(
        "audit",
        _audit,
        help="what the machines and the fabric really run, against generated/expected/",
    )
    a.add_argument(
        "merge",
        nargs="*",
        metavar="merge DIR | history REPORT",
        help="`audit merge DIR...`: fold the report folders of shards 1..N into one report; "
        "`audit history R1.json R2.json ...`: what changed along reports, oldest first",
    )
    a.add_argument(
        "--shard",
        type=_shard,
        metavar="K/N",
        help="audit shard K of N: every Nth rack by name (shard 1 also scans the fabric)",
    )
    a.add_argument("--hosts", metavar="SPEC", help="only these hosts, e.g. gpu[001-010],login01")
    a.add_argument(
        "--replay", type=Path, metavar="DIR", help="audit a recording (audits/collect.py layout)"
    )
    a.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where the report goes (default: build/audit-report/ in the repository, which "
        "git ignores)",
    )
    live = a.add_argument_group("live collection over SSH (without --replay)")
    live.add_argument("--ssh-key", type=Path, metavar="FILE", help="private key to log in with")
    live.add_argument(
        "--known-hosts", type=Path, metavar="FILE", help="the hosts' keys; no other is accepted"
    )
    live.add_argument(
        "--inventory",
        type=Path,
        metavar="FILE",
        help="JSON host -> address[:port] (default: each host's mgmt address, port 22)",
    )
    live.add_argument(
        "--key-passphrase-env",
        metavar="NAME",
        help="the environment variable holding --ssh-key's passphrase (an encrypted key)",
    )
    live.add_argument(
        "--key-passphrase-file", type=Path, metavar="FILE", help="or the file holding it"
    )
    live.add_argument(
        "--ssh-agent",
        action="store_true",
        default=None,
        help="log in with the keys of the agent at $SSH_AUTH_SOCK (interactive use)",
    )
    live.add_argument(
        "--user",
        metavar="NAME",
        help="login name: the account of generated/access/ (default: clusterforge-audit)",
    )
    live.add_argument(
        "--max-output",
        type=int,
        metavar="BYTES",
        help="bytes kept of one probe's output; more makes the host error (default: 16 MiB)",
    )
    live.add_argument("--concurrency", type=int, metavar="N", help="hosts at once (default: 32)")
    live.add_argument(
        "--timeout", type=float, metavar="SECONDS", help="per host, all probes (default: 120)"
    )
    live.add_argument(
        "--probe-timeout",
        type=float,
        metavar="SECONDS",
        help="per probe, within the host's (default: 60); a probe that hangs fails alone, "
        "the host's other answers are kept",
    )
    live.add_argument(
        "--fabric-from",
        metavar="HOST",
        help="the host to scan the fabric from (default: the first subnet-manager host)",
    )
    live.add_argument(
        "--record", type=Path, metavar="DIR", help="the recording (default: OUT/recording)"
    )
    a.add_argument("--textfile", type=Path, metavar="PATH", help="Prometheus metrics to write")
    a.add_argument(
        "--previous",
        type=Path,
        metavar="REPORT",
        help="the last run's report.json: say what is new, resolved, flapping since",
    )
    a.add_argument(
        "--now",
        type=_instant,
        metavar="ISO-8601",
        help="the clock for rollout windows (default: when the state was collected)",
    )
    acc = command(
        "accept",
        _accept,
        help="judge an acceptance run's logs: per-node and per-cable readiness",
    )
    acc.add_argument("results", type=Path, metavar="RESULTS_DIR", help="the run's logs")
    acc.add_argument("--out", type=Path, default=Path("acceptance-report"), metavar="DIR")
    acc.add_argument("--textfile", type=Path, metavar="PATH", help="Prometheus metrics to write")


_LIVE = (
    "ssh_key",
    "known_hosts",
    "inventory",
    "record",
    "user",
    "concurrency",
    "timeout",
    "probe_timeout",
    "fabric_from",
    "max_output",
    "key_passphrase_env",
    "key_passphrase_file",
    "ssh_agent",
)


def _audit(args: argparse.Namespace) -> int:
    from audits import pipeline as audit
    from audits import ssh
    from audits.model import AuditError

    # The documents come from `draw`, handed in: `audits` never imports it.
    renderer = _renderer(args.repo / "generated")
    # Inside the repository but under build/, which git ignores: a report is not source.
    args.out = args.out or args.repo / "build" / "audit-report"
    given = {k: v for k, v in vars(args).items() if v is not None and k != "out"}
    live = [f"--{o.replace('_', '-')}" for o in _LIVE if o in given]
    part = (args.shard, args.hosts)
    if args.merge and args.merge[0] == "history":
        return _history(args.merge)
    if args.merge:
        if args.merge[0] != "merge" or len(args.merge) < 2:
            raise AuditError(
                "usage: clusterforge audit merge DIR... [--out DIR] | audit history REPORT..."
            )
        others = [o for o in (*live, "replay", "shard", "hosts", "now") if o in given]
        if others:
            raise AuditError(
                "audit merge takes report folders, --out, --textfile and --previous only"
            )
        report = audit.merge(
            [Path(d) for d in args.merge[1:]],
            args.out,
            args.textfile,
            args.previous,
            renderer=renderer,
        )
    elif args.replay is not None:
        if live:
            raise AuditError(f"{', '.join(live)}: for live collection, not with --replay")
        report = audit.audit_replay(
            args.repo,
            args.replay,
            args.out,
            args.textfile,
            args.now,
            part,
            args.previous,
            renderer=renderer,
        )
    elif (args.ssh_key is None and not args.ssh_agent) or args.known_hosts is None:
        raise AuditError(
            "live collection needs --ssh-key FILE (or --ssh-agent) and --known-hosts FILE "
            "(an unknown host key is never accepted); or audit a recording with --replay DIR"
        )
    else:
        agent = None
        if args.ssh_agent:
            agent = os.environ.get("SSH_AUTH_SOCK")
            if not agent:
                raise AuditError("--ssh-agent: $SSH_AUTH_SOCK names no agent")
        bounds = {
            k: given[k]
            for k in ("user", "concurrency", "timeout", "probe_timeout", "max_output")
            if k in given
        }
        options = ssh.SshOptions(
            args.ssh_key,
            args.known_hosts,
            passphrase_env=args.key_passphrase_env,
            passphrase_file=args.key_passphrase_file,
            agent=agent,
            **bounds,
        )
        record = args.record or args.out / "recording"
        report = ssh.audit_live(
            args.repo,
            options,
            args.inventory,
            args.fabric_from,
            record,
            args.out,
            args.textfile,
            args.now,
            part,
            Progress("audit, hosts done"),
            args.previous,
            renderer=renderer,
        )
    status = ", ".join(f"{n} {s}" for s, n in report["summary"]["status"].items())
    print(f"{args.out}: {status}; fabric {report['summary']['fabric']}")
    return report["exit_code"]


def _renderer(generated: Path) -> Renderer:
    """The report's renderings, with the scene compiled into `generated`: the audit never
    re-plans cluster/, which may have moved on since the expectations were compiled."""
    from contract import scene
    from draw.report import Renderer

    path = generated / scene.PATH
    try:
        facts = scene.Scene.from_json(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        return Renderer(None, missing=f"{path} cannot be read ({exc.strerror}): compile again")
    except scene.SceneError as exc:
        return Renderer(None, missing=str(exc))
    try:
        source = json.loads((generated / "MANIFEST.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        source = {}  # the audit itself refuses a tree without a readable manifest
    return Renderer(facts, source.get("source_sha256"))


def _accept(args: argparse.Namespace) -> int:
    from audits.accept import accept
    from draw.report import readiness

    report = accept(args.repo, args.results, args.out, readiness, args.textfile)
    s = report["summary"]
    nodes = ", ".join(f"{n} {status}" for status, n in s["nodes"].items())
    cables = ", ".join(f"{n} {status}" for status, n in s["cables"].items())
    suspects = f"; suspect cables: {', '.join(s['suspects'])}" if s["suspects"] else ""
    print(f"{args.out}: nodes {nodes}; cables {cables}{suspects}")
    code: int = report["exit_code"]
    return code


def _history(words: list[str]) -> int:
    """`audit history REPORT...`: what changed along a chain of reports, oldest first."""
    from audits import history, pipeline
    from audits.model import AuditError
    from draw.report import markdown

    if words[0] != "history" or len(words) < 2:
        raise AuditError("usage: clusterforge audit history REPORT.json... (oldest first)")
    reports: list[Any] = [pipeline.read_previous(Path(w)) for w in words[1:]]
    last = reports[-1] | {"history": history.chain(reports)}
    print(markdown.changes(last) or "One report: nothing to compare it with.")
    # What changed on the devices between runs, from the snapshots beside each report.
    runs = [(r["collected_at"], Path(w).parent) for r, w in zip(reports, words[1:], strict=True)]
    lines = history.config_changes(runs)
    if lines:
        print("\n".join(["", "## Configuration changes between runs", "", *lines]))
    return EXIT_OK


def _instant(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        when = None
    if when is None or when.utcoffset() is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not ISO 8601 with a UTC offset")
    return when


def _shard(text: str) -> tuple[int, int]:
    from audits.shard import parse_shard

    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

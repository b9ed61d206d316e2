"""The `ForceCommand` of the lab's sshd: one lab host answering one command.

    python3 -I -S responder.py STATE

sshd runs it for every command a client sends, with the command line in
`$SSH_ORIGINAL_COMMAND`, as the lab user. One sshd listens on the addresses of many hosts:
the host is the one whose address the connection came to (the third word of
`$SSH_CONNECTION`), looked up in `STATE/addresses.json`. `STATE/hosts/<host>/answers.json`
maps command lines (words re-quoted with `shlex.join`, so quoting style does not matter) to
what answers them: `{"text": "..."}` is printed as it is,
`{"run": [argv], "env": {...}}` runs a real program (the fabric scans, against ibsim). Any
other command is "command not found", exit 127, as a shell says it. `hang.json` there, if
present, maps command lines (or "*", every command) to seconds to wait before answering,
null for ever: until the session is gone (sshd's session process, our parent, exits when the
client hangs up or the lab stops, and nobody is left to wait for the answer).

Every command is appended to `STATE/commands.log` as `<monotonic ns> <host> <command>` before
it is answered: the lab's witness of what the audit ran, and when.

Standard library only, and started with `-I -S`: sshd starts it once per command.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

_RUN_LIMIT = "60"  # seconds: a fabric scan whose ibsim is gone would retry for ever


def main(argv: list[str]) -> int:
    state = Path(argv[0])
    local = os.environ.get("SSH_CONNECTION", "").split()[2:3]
    addresses: dict[str, str] = json.loads((state / "addresses.json").read_text("utf-8"))
    host = addresses.get(local[0]) if local else None
    if host is None:
        print(f"lab: no host at {local}", file=sys.stderr)
        return 255
    line = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    try:
        words = shlex.split(line)
    except ValueError:  # unbalanced quotes: no such command, as far as this host knows
        words = [line]
    command = shlex.join(words)
    # One write(2) of one line with O_APPEND: lines of parallel sessions never interleave.
    fd = os.open(state / "commands.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{time.monotonic_ns()} {host} {command}\n".encode())
    finally:
        os.close(fd)
    folder = state / "hosts" / host
    hang = folder / "hang.json"
    if hang.is_file():
        waits: dict[str, float | None] = json.loads(hang.read_text("utf-8"))
        if command in waits or "*" in waits:
            _wait(waits.get(command, waits.get("*")))
    answers: dict[str, dict[str, Any]] = json.loads((folder / "answers.json").read_text("utf-8"))
    answer = answers.get(command)
    if answer is None:
        print(f"bash: {words[0] if words else ''}: command not found", file=sys.stderr)
        return 127
    if "run" in answer:
        run = ["timeout", "-s", "KILL", _RUN_LIMIT, *answer["run"]]
        os.execvpe(run[0], run, {**os.environ, **answer.get("env", {})})
    sys.stdout.write(answer["text"])
    return 0


def _wait(seconds: float | None) -> None:
    parent = os.getppid()
    until = None if seconds is None else time.monotonic() + seconds
    while until is None or time.monotonic() < until:
        if os.getppid() != parent:  # orphaned: the session is over
            sys.exit(0)
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

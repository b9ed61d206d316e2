"""The `ForceCommand` of a lab sshd (tests/lab/sshlab.py): one node answering one command.

    python3 -I -S responder.py STATE LOG

sshd runs it for every command a client sends, with the command line in
`$SSH_ORIGINAL_COMMAND`. `STATE/answers.json` maps command lines (words re-quoted with
`shlex.join`, so quoting style does not matter) to files in `STATE`: a known command prints its
file and exits 0; any other is "command not found", exit 127, as a shell says it. A number in
`STATE/delay` makes every answer wait that many seconds first (a slow or hung node), or until
the session is gone: sshd's session process, our parent, exits when the client hangs up or
the lab stops, and nobody is left to wait for the answer.
Every command is appended to `LOG` as `<monotonic ns> <host> <command>`, host = STATE's
name, before it is answered: the lab's witness of what the audit ran, and when.

Standard library only, and started with `-I -S`: sshd starts it once per command.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    state, log = Path(argv[0]), argv[1]
    line = os.environ.get("SSH_ORIGINAL_COMMAND", "")
    try:
        words = shlex.split(line)
    except ValueError:  # unbalanced quotes: no such command, as far as this node knows
        words = [line]
    command = shlex.join(words)
    # One write(2) of one line with O_APPEND: lines of parallel sessions never interleave.
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{time.monotonic_ns()} {state.name} {command}\n".encode())
    finally:
        os.close(fd)
    delay = state / "delay"
    if delay.is_file():
        parent, until = os.getppid(), time.monotonic() + float(delay.read_text(encoding="utf-8"))
        while time.monotonic() < until:
            if os.getppid() != parent:  # orphaned: the session is over
                return 0
            time.sleep(0.1)
    answers: dict[str, str] = json.loads((state / "answers.json").read_text(encoding="utf-8"))
    if command not in answers:
        print(f"bash: {words[0] if words else ''}: command not found", file=sys.stderr)
        return 127
    sys.stdout.write((state / answers[command]).read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Every probe program of a lab node (tests/lab/sshlab.py): one node answering one command.

    python3 -I -S responder.py STATE LOG PROGRAM [ARG...]

The node's forced command (generated/access/clusterforge-probe) runs it, through a shim named
after the program, for every probe it lets through. `STATE/answers.json` maps command lines
(words joined with `shlex.join`) to files in `STATE`: a known command prints its
file and exits 0; any other is "command not found", exit 127, as a shell says it. A number in
`STATE/delay` makes every answer wait that many seconds first (a slow or hung node), or until
it is killed: by the forced command's timeout(1), its parent, when the audit's time for the
host is up. While it waits, its pid is in `STATE/waiting`, so a test can see it gone.
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
    state, log, words = Path(argv[0]), argv[1], argv[2:]
    command = shlex.join(words)
    # One write(2) of one line with O_APPEND: lines of parallel sessions never interleave.
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{time.monotonic_ns()} {state.name} {command}\n".encode())
    finally:
        os.close(fd)
    delay = state / "delay"
    if delay.is_file():
        with open(state / "waiting", "a", encoding="utf-8") as waiting:
            waiting.write(f"{os.getpid()}\n")
        # Deaf to the session ending: only a signal ends the wait early, as with a hung tool.
        time.sleep(float(delay.read_text(encoding="utf-8")))
    answers: dict[str, str] = json.loads((state / "answers.json").read_text(encoding="utf-8"))
    if command not in answers:
        print(f"bash: {words[0] if words else ''}: command not found", file=sys.stderr)
        return 127
    sys.stdout.write((state / answers[command]).read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/bin/sh
# The ForceCommand of the lab's sshd (clusterforge/lab/lab.py): one lab host answering one
# command, as the lab user.
#
#     exec /bin/sh STATE/respond.sh STATE
#
# It is not sshd's to run: sshd runs the audit account's forced command (generated/access/
# clusterforge-probe, the key's `restrict,command=`), and that runs the probe's program, which
# in the lab is a shim in STATE/bin that runs this with the program's command line as
# SSH_ORIGINAL_COMMAND (see `_access` in lab.py).
#
# One sshd listens on the addresses of many hosts: the host is the one whose address the
# connection came to, the third word of $SSH_CONNECTION; STATE/at/<address> is its folder.
# Its answers.sh is a `case` over the command lines the audit sends (shlex.join of a probe's
# argv, matched exactly): each prints the host's output with the builtin printf, or runs a
# real program (the fabric scans, on ibsim); anything else is "command not found", exit 127,
# as a shell says it. A probe staged to hang calls `hang` first: it waits until the session
# is gone (sshd's session process, our parent, exits when the client hangs up or the lab
# stops), and nobody is left to wait for the answer.
#
# Every command is appended to STATE/commands.log as `<ns since the epoch> <host> <command>`
# before it is answered: the lab's witness of what the audit ran, and when. Plain sh and
# builtins but for `date`: sshd starts this once per command, ~1,700 times per audit of the
# reference cluster, and a Python start-up each time doubled the audit's time.
set -f
state=$1
set -- $SSH_CONNECTION
dir=$state/at/$3
if ! read -r host < "$dir/name"; then
    echo "lab: no host at $3" >&2
    exit 255
fi
printf '%s %s %s\n' "$(date +%s%N)" "$host" "$SSH_ORIGINAL_COMMAND" >> "$state/commands.log"

hang() {
    echo "$$" >> "$dir/waiting"  # the test of a hung probe checks it is gone after the audit
    while kill -0 "$PPID" 2> /dev/null; do
        sleep 0.1
    done
    exit 0
}

. "$dir/answers.sh"

"""The drift audit's account on every host, as the compiler makes it (`compiler/targets/
access.py`), the audit logs in to it (`audits/ssh.py`) and the lab plays it: the names all
three must agree on."""

from __future__ import annotations

USER = "clusterforge-audit"  # site.yaml's audit.user of the reference cluster: the default login
# sshd runs this for every command of the audit's key: it runs only allowlisted probes.
PROBE_COMMAND = "/usr/local/libexec/clusterforge-probe"
# The per-role files of generated/access/<role>/: the forced command and sudoers.
FORCED, SUDOERS = "clusterforge-probe", "sudoers"

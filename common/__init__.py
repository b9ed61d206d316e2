"""What every layer of clusterforge shares, and nothing else: the error root and its located
diagnostics (`errors`), the rule ids they name (`rules`), host ranges (`hostlist`), the one
atomic writer (`atomic`), the one registry that refuses a name given twice (`registry`) and
the hardened YAML reader of files people type (`yaml`: cluster/'s, a lab's faults file).

A leaf: it imports the standard library and ruamel.yaml (for `yaml`) alone, so the compiler,
the audit, the lab and draw may all import it without importing each other.
"""

"""Drawing for people: label sheets, rack elevations, fabric maps, report and diff pages.

Facts in (a plan, a diff, an audit report), a document out; pure, deterministic bytes. Nothing
in `compiler/` or `audits/` imports this package: only the CLI does.
"""

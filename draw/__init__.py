"""Drawing for people: label sheets, rack elevations, fabric maps, report and diff pages.

Records in (the compiled scene, the cabling, a diff report, an audit report: `contract/` and
the audit's report), a document out; pure, deterministic bytes. It knows nothing of the
compiler's plan, so a page drawn at audit time shows what generated/ holds. Only the CLI
uses this package; neither the compiler nor the audit does.
"""

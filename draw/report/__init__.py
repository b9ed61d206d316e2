"""Renderings of the audit's report data: Markdown for people, JUnit XML for CI, Prometheus
metrics, and report.html (`draw.pages`).

Each module has one pure `render(report) -> str`; `report.json` itself is `audits.report.to_json`.
`Renderer` is what the CLI hands the audit (`audits.pipeline.Renderer`): `audits` never imports
`draw`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from audits.report import Report
from contract.scene import Scene
from draw.pages import audit_page
from draw.report import junit, markdown, textfile


@dataclass(frozen=True)
class Renderer:
    """The report folder's documents. report.html's pictures are of `scene`, compiled into
    the generated/ the audit read (`source_sha256` its MANIFEST's), never of cluster/ as it
    is when the audit runs; without a scene, `missing` says why there are no pictures."""

    scene: Scene | None
    source_sha256: str | None = None
    missing: str | None = None

    def files(self, report: Report) -> Mapping[str, str]:
        return {
            "report.md": markdown.render(report),
            "junit.xml": junit.render(report),
            "report.html": audit_page(report, self.scene, self._note(report)),
        }

    def _note(self, report: Report) -> str | None:
        if self.scene is None:
            return f"No pictures: {self.missing or 'no compiled scene'}."
        if self.source_sha256 != report["expectations"]["source_sha256"]:
            # A merge of shard reports audited against another compile than this one.
            return (
                "The pictures are drawn from generated/ as it is now, which was not compiled "
                "from the source this report's expectations were: audit again."
            )
        return None

    def metrics(self, report: Report) -> str:
        return textfile.render(report)

"""Renderings of the audit's report data: Markdown for people, JUnit XML for CI, Prometheus
metrics, and report.html (`draw.pages`).

Each module has one pure `render(report) -> str`; `report.json` itself is `audits.report.to_json`.
`Renderer` is what the CLI hands the audit (`audits.pipeline.Renderer`): `audits` never imports
`draw`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from audits.report import Report
from draw.pages import audit_page_for_repo
from draw.report import junit, markdown, textfile


@dataclass(frozen=True)
class Renderer:
    """The report folder's documents; `repo`'s cluster/ gives report.html its pictures."""

    repo: Path

    def files(self, report: Report) -> Mapping[str, str]:
        return {
            "report.md": markdown.render(report),
            "junit.xml": junit.render(report),
            "report.html": audit_page_for_repo(self.repo, report),
        }

    def metrics(self, report: Report) -> str:
        return textfile.render(report)

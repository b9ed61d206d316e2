"""Renderings of the report data: Markdown for people, JUnit XML for CI, Prometheus metrics.

Each module has one pure `render(report) -> str`; `report.json` itself is `audits.report.to_json`.
"""

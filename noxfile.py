"""Task runner. Sessions only call pytest, the linters or the clusterforge CLI."""

from __future__ import annotations

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "tests", "check"]
PYTHON = "3.11"


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The whole suite (run tests/install-tools first for the real programs)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-n", "2", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    session.install("-e", ".[test]")
    session.run("ruff", "check", ".")
    packages = ("common", "compiler", "contract", "audits", "draw", "clusterforge")
    session.run("ruff", "format", "--check", *packages)
    session.run("mypy")


@nox.session(python=PYTHON)
def compile(session: nox.Session) -> None:
    session.install("-e", ".")
    session.run("clusterforge", "compile", *session.posargs)


@nox.session(python=PYTHON)
def check(session: nox.Session) -> None:
    """Fail when generated/ is not what cluster/ compiles to."""
    session.install("-e", ".")
    session.run("clusterforge", "compile", "--check")


@nox.session(python=PYTHON)
def diff(session: nox.Session) -> None:
    """What a change does: `nox -s diff -- BASE HEAD` (Markdown on stdout)."""
    session.install("-e", ".")
    session.run("clusterforge", "diff", *(session.posargs or ["HEAD~1", "HEAD"]))


@nox.session(python=PYTHON)
def labels(session: nox.Session) -> None:
    """Cable label sheets and pull sheets as PDFs into build/labels/."""
    session.install("-e", ".")
    session.run("clusterforge", "labels", *session.posargs)


@nox.session(python=PYTHON)
def draw(session: nox.Session) -> None:
    """Rack elevations, the row view and the fabric map as SVG into build/draw/."""
    session.install("-e", ".")
    session.run("clusterforge", "draw", *session.posargs)


@nox.session(python=PYTHON)
def audit(session: nox.Session) -> None:
    """The drift audit: `nox -s audit -- --replay DIR` reproduces a recorded run."""
    session.install("-e", ".")
    session.run("clusterforge", "audit", *session.posargs, success_codes=[0, 1, 2])


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Speed and memory of compile and audit; prints medians and ratios, asserts nothing."""
    session.install("-e", ".[test]")
    session.run("python", "tests/bench.py", *session.posargs)


@nox.session(python=PYTHON)
def schema(session: nox.Session) -> None:
    """The contract's JSON Schemas into contract/schema/ (commit them)."""
    session.install("-e", ".")
    session.run("python", "-m", "contract.schema")

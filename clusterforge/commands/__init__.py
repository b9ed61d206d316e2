"""The commands of `clusterforge`, grouped by what they serve (build, review, audit, lab):
each module's `add` declares its commands with their options and the function that runs
each. A function returns an exit code for a result (stale, drift, conflicts); an error it
raises carries its own (`exit_code`), which `clusterforge.cli.main` maps, once for all.

They import what they need when they run, so `compile` does not pay for SSH or git."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, TextIO

from common import atomic
from common.errors import OutputError

Run = Callable[[argparse.Namespace], int]  # a command: its parsed arguments to its exit code


class Command(Protocol):
    """Declares a command with the options every command takes; returns its parser."""

    def __call__(self, name: str, run: Run, help: str) -> argparse.ArgumentParser: ...


class Progress:
    """`what: done/total` redrawn in place on stderr, only when stderr is a terminal and not
    in CI: a log file or a CI console gets no carriage returns, only the final summary."""

    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self.what = what
        self.stream = stream or sys.stderr
        self.shown = self.stream.isatty() and os.environ.get("CI") != "true"

    def __call__(self, done: int, total: int) -> None:
        if self.shown:
            end = "\n" if done == total else ""
            self.stream.write(f"\r{self.what}: {done}/{total}{end}")
            self.stream.flush()


_batch_run = False  # a compiling command ran: see `run`


def batch() -> None:
    """A compile builds a few hundred thousand objects that live until exit, with no reference
    cycles to speak of; the cyclic collector rescanning them made a 2,000-server compile a
    fifth slower (and grow worse than linearly). A one-shot command does without it."""
    global _batch_run
    _batch_run = True
    gc.disable()
    # pydantic looks for plugins (its experimental observability hooks) by reading the entry
    # points of every installed distribution when it builds the first validator: a few
    # percent of a cold compile, for models no plugin has business with. PYDANTIC_DISABLE_PLUGINS
    # is pydantic's own switch (pydantic#8767); one set by the operator wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def write_files(out: Path, files: Mapping[str, str] | Mapping[str, bytes], what: str) -> None:
    """Write each file under `out` whole (a reader never sees half of one); raises
    OutputError, the set-up's like any output that cannot be written."""
    try:
        for name, data in files.items():
            atomic.replace(out / name, data)
    except OSError as exc:
        raise OutputError(f"cannot write {what}: {exc}") from None


def batch_ran() -> bool:
    """Whether a compiling command ran in this process (see `clusterforge.cli.run`)."""
    return _batch_run

"""The one writer: a file or a folder replaced whole, the old one kept when anything fails."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from common import atomic


def test_a_file_is_replaced_whole_at_its_mode_and_leaves_nothing_beside(tmp_path: Path) -> None:
    path = tmp_path / "new" / "metrics.prom"
    atomic.replace(path, "a 1\n", 0o644)
    inode = path.stat().st_ino
    atomic.replace(path, b"a 2\n", 0o640)
    assert path.read_bytes() == b"a 2\n"
    assert path.stat().st_ino != inode, "a new file renamed over the old, never rewritten"
    assert path.stat().st_mode & 0o777 == 0o640
    assert os.listdir(path.parent) == ["metrics.prom"]


def test_a_file_that_cannot_be_written_keeps_the_old_and_leaves_no_partial(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sheet.pdf"
    path.write_bytes(b"old")
    # The partial's name taken by a folder: open(2) fails (EISDIR), for root as for anyone.
    (tmp_path / f".sheet.pdf.partial-{os.getpid()}").mkdir()
    with pytest.raises(IsADirectoryError):
        atomic.replace(path, b"new")
    assert path.read_bytes() == b"old"


def test_a_folder_is_swapped_in_whole_or_not_at_all(tmp_path: Path) -> None:
    folder = tmp_path / "recording"

    def fill(text: str) -> Callable[[Path], str]:
        def write(staging: Path) -> str:
            (staging / "meta.json").write_text(text)
            if text == "broken":
                raise OSError("disk full")
            return text

        return write

    assert atomic.replace_folder(folder, fill("one"), 0o755) == "one"
    assert (folder / "meta.json").read_text() == "one"
    assert folder.stat().st_mode & 0o777 == 0o755
    with pytest.raises(OSError, match="disk full"):
        atomic.replace_folder(folder, fill("broken"))
    assert (folder / "meta.json").read_text() == "one", "the old tree stays when a fill fails"
    atomic.replace_folder(folder, fill("two"))
    assert (folder / "meta.json").read_text() == "two"
    assert os.listdir(tmp_path) == ["recording"], "no staging or old folder left"

"""generated/gpudirect/: the NVIDIA module options, read by the real modprobe (kmod) where the
bundle puts them, beside the driver package's own modprobe file.

The driver's file is NVIDIA's nvidia-kmod-common `nvidia.conf`, installed on RHEL 8 as
/usr/lib/modprobe.d/nvidia.conf (its spec's `_modprobe_d` for rhel >= 8); the copy in
tests/stock/ is that file. kmod reads /etc/modprobe.d before /usr/lib/modprobe.d and a file
in /etc of the same name replaces the other whole, so ours must have a name of its own.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compiler.pipeline import Compiled, compile_repo
from tests.conftest import REPO, require_tool

DRIVER_FILE = REPO / "tests/stock/nvidia-kmod-common/nvidia.conf"


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    return compile_repo(REPO)


@pytest.mark.realtool
def test_modprobe_reads_the_driver_s_file_and_ours(compiled: Compiled, tmp_path: Path) -> None:
    modprobe = require_tool("modprobe")
    require_tool("unshare")
    placed = next(
        f for f in compiled.deploys["gpu001"].files if f.source.endswith("/modprobe.conf")
    )
    etc, lib = tmp_path / "etc/modprobe.d", tmp_path / "usr/lib/modprobe.d"
    for folder in (etc, lib):
        folder.mkdir(parents=True)
    (tmp_path / placed.path.lstrip("/")).write_bytes(compiled.files[placed.source])
    (lib / "nvidia.conf").write_bytes(DRIVER_FILE.read_bytes())
    # modprobe's own search paths, with only these two folders in them (a private mount
    # namespace; /lib is /usr/lib on Rocky 8 and on Debian).
    script = (
        'mount --bind "$1" /etc/modprobe.d && mount --bind "$2" /usr/lib/modprobe.d && exec "$3" -c'
    )
    done = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(etc),
         str(lib), modprobe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    config = done.stdout.splitlines()
    ours = [ln for ln in compiled.files[placed.source].decode().splitlines() if ln[:1] != "#"]
    assert ours and all(line in config for line in ours)
    # The driver's blacklist and softdep are still read.
    assert "blacklist nouveau" in config
    assert "softdep nvidia post: nvidia-uvm" in config

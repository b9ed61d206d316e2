"""The git edge of `diff`: compile `cluster/` of a revision straight from git's object store.

Blobs are read from the commit's tree; nothing is checked out, so the working tree and the
index stay untouched and a dirty checkout does not leak into either side. A shallow clone
works as long as the revision's commit was fetched (`git fetch --depth 1 origin <sha>`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import git
from git.exc import ODBError

from common import memo
from common.errors import Diagnostic, InputError, Location, SourceError
from common.rules import Rule
from compiler import diff, load, pipeline
from compiler.pipeline import Compiled
from contract import Deploy


class RevisionError(InputError):
    """Raised when `repo` is not in a git repository or a revision does not name a commit
    there (in a shallow clone: a commit that was not fetched)."""


def _open(repo: Path) -> git.Repo:
    try:
        return git.Repo(repo, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise RevisionError(f"{repo} is not in a git repository") from None


def _commit(r: git.Repo, rev: str) -> git.Commit:
    try:
        return r.commit(rev)
    except (ODBError, ValueError):
        if Path(r.git_dir, "shallow").exists():
            hint = "in a shallow clone, fetch it first"
        else:
            found = _default_branch(r)
            hint = f"the default branch here is {found!r}" if found else "no default branch"
        raise RevisionError(f"{rev!r} is not a commit in {r.working_dir} ({hint})") from None


# Names a default branch has had, tried in this order when git does not say.
_USUAL_DEFAULTS = ("main", "master", "trunk")


def _default_branch(r: git.Repo) -> str | None:
    heads = {h.name for h in r.heads}
    # A clone knows its remote's default (origin/HEAD); a local branch of that name is the
    # one being worked on, else the remote-tracking one.
    try:
        target = str(r.git.symbolic_ref("--quiet", "--short", "refs/remotes/origin/HEAD"))
    except git.GitCommandError:
        target = ""
    if target:
        name = target.split("/", 1)[1] if "/" in target else target
        return name if name in heads else target
    try:
        configured = str(r.git.config("--get", "init.defaultBranch"))
    except git.GitCommandError:
        configured = ""
    for name in (configured, *_USUAL_DEFAULTS):
        if name and name in heads:
            return name
    return None


def default_branch(repo: Path) -> str:
    """The branch a change is compared with when none is named: origin's default branch (a
    clone's origin/HEAD), else init.defaultBranch, main, master or trunk, the first there is.
    Raises RevisionError when there is none."""
    with _open(repo) as r:
        found = _default_branch(r)
        if found is None:
            raise RevisionError(
                f"cannot tell the default branch of {r.working_dir}: name the base revision"
            )
        return found


def resolve(repo: Path, rev: str) -> str:
    """The full SHA of the commit `rev` names; raises RevisionError."""
    with _open(repo) as r:
        return _commit(r, rev).hexsha


def _folder(r: git.Repo, repo: Path, rev: str, name: str) -> tuple[PurePosixPath, git.Tree | None]:
    """`repo`'s folder `name` in revision `rev` (its path in the git tree, and the tree, None
    when the revision has no such folder); `repo` may be a folder inside a larger repository."""
    top = Path(r.working_dir).resolve()
    prefix = PurePosixPath(repo.resolve().relative_to(top).as_posix(), name)
    try:
        tree = _commit(r, rev).tree / str(prefix)
    except KeyError:
        return prefix, None
    return prefix, tree if isinstance(tree, git.Tree) else None


def read_cluster(repo: Path, rev: str) -> dict[str, bytes | load.Refused]:
    """The `cluster/` YAML files of revision `rev`, as `load.parse` takes them.

    `repo` may be a folder inside a larger git repository; its `cluster/` is read at the same
    place in the revision. Raises RevisionError, or SourceError when the revision has no
    `cluster/` folder there."""
    with _open(repo) as r:
        prefix, tree = _folder(r, repo, rev, "cluster")
        if tree is None:
            raise SourceError(
                [
                    Diagnostic(
                        Location("cluster"), Rule.MISSING_SOURCE, f"no cluster/ folder in {rev}"
                    )
                ]
            )
        paths = {PurePosixPath(b.path): b for b in tree.traverse() if isinstance(b, git.Blob)}
        return {
            load.escaped(name): _blob(blob) if name.isprintable() else load.NAME_REFUSAL
            for path, blob in paths.items()
            if path.suffix in (".yaml", ".yml") or blob.mode == _LINK
            for name in [f"cluster/{path.relative_to(prefix)}"]
        }


def read_generated(repo: Path, rev: str) -> dict[str, bytes]:
    """The committed `generated/` of revision `rev`, path under it -> bytes; empty when the
    revision has none. What CI built and shipped from that commit: the change plan compares
    these, since a compile from git alone does not continue the committed DNS serials."""
    with _open(repo) as r:
        prefix, tree = _folder(r, repo, rev, "generated")
        if tree is None:
            return {}
        return {
            str(PurePosixPath(b.path).relative_to(prefix)): b.data_stream.read()
            for b in tree.traverse()
            if isinstance(b, git.Blob) and b.mode != _LINK
        }


def as_shipped(repo: Path, side: diff.Side, facts: Compiled | None = None) -> Compiled | None:
    """`side`'s compile with its commit's committed generated/ files and deploy maps in
    place of the compiled ones, where the commit has them (else the compile as it is). A
    side that does not compile (a commit from before this clusterforge, whose cluster/ lacks
    a home for a newer target's files) is still its committed files, with the devices'
    facts of `facts` (HEAD's compile), if it has committed ones."""
    compiled = side.compiled or facts
    if compiled is None:
        return None
    committed = read_generated(repo, side.commit)
    deploys = {
        path.removeprefix("deploy/").removesuffix(".json"): Deploy.from_json(data, path)
        for path, data in committed.items()
        if path.startswith("deploy/") and path.endswith(".json")
    }
    if not deploys:
        return side.compiled
    return replace(compiled, files=committed, deploys=deploys)


_LINK = 0o120000  # git's mode for a symbolic link: its blob is the link's target path


def _blob(blob: git.Blob) -> bytes | load.Refused:
    """A file's bytes as `load.read_dir` takes them from disk: a link or an outsized file is
    refused the same way, so `diff` judges a tree as `compile` would."""
    if blob.mode == _LINK:
        return load.read_link_refusal()
    if blob.size > load.MAX_FILE_BYTES:
        return load.too_large(blob.size)
    data: bytes = blob.data_stream.read()
    return data


def compile_revision(repo: Path, rev: str) -> diff.Side:
    """Compile `cluster/` at `rev`: a Side holding the compile or the located errors."""
    commit = resolve(repo, rev)
    # No environment: secrets stay placeholders on both sides, so a diff never shows one.
    try:
        return diff.Side(
            rev, commit, pipeline.compile_source(load.parse(read_cluster(repo, commit)))
        )
    except SourceError as exc:
        return diff.Side(rev, commit, None, tuple(exc.diagnostics))


class Compared(NamedTuple):
    """A diff and the two compiled sides it was made from (their plans draw the picture)."""

    report: diff.DiffReport
    base: diff.Side
    head: diff.Side

    @property
    def sides(self) -> tuple[diff.Side, diff.Side]:
        return self.base, self.head


def diff_revisions(
    repo: Path, base: str | None, head: str, share_limit: float = diff.DEFAULT_SHARE_LIMIT
) -> Compared:
    """Compile both revisions of `repo` and compare them; see `compiler.diff`. No `base`
    means the default branch (`default_branch`). Raises RevisionError."""
    with memo.shared():  # what the two sides agree on is computed once
        base_side, head_side = (
            compile_revision(repo, rev) for rev in (base or default_branch(repo), head)
        )
    return Compared(diff.diff(base_side, head_side, share_limit), base_side, head_side)

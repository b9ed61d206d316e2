from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from common.hostlist import compact, expand


def test_compacts_runs_and_keeps_width() -> None:
    names = ["gpu001", "gpu002", "gpu003", "gpu005", "login01", "login02", "prov01", "x"]
    assert compact(names) == "gpu[001-003,005],login[01-02],prov01,x"


@given(st.sets(st.integers(min_value=0, max_value=999), min_size=1))
def test_expand_inverts_compact(numbers: set[int]) -> None:
    names = [f"gpu{n:03d}" for n in numbers]
    assert sorted(expand(compact(names))) == sorted(names)

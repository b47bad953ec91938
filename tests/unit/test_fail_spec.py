"""`cellfabric run --fail`: a link (a-b) or a switch (all of its links), down and up times."""

from __future__ import annotations

from pathlib import Path

import pytest

from cellfabric.run_cli import parse_fail
from topologies.model import load_topology

FAT_TREE = load_topology(Path(__file__).resolve().parents[2] / "topologies" / "fat-tree.yaml")


def test_a_switch_fails_with_all_its_links() -> None:
    down, up = parse_fail("c1@2:5", FAT_TREE)
    assert (down.link, down.at_s, down.up, up.at_s, up.up) == ("c1", 2.0, False, 5.0, True)
    assert sorted(down.links) == ["a11-c1", "a21-c1", "a31-c1", "a41-c1"] == sorted(up.links)
    (agg,) = parse_fail("a12@1", FAT_TREE)
    assert sorted(agg.links) == ["a12-c3", "a12-c4", "e11-a12", "e12-a12"]


def test_a_link_is_itself() -> None:
    (ev,) = parse_fail("a11-c1@0.5")
    assert (ev.link, ev.links, ev.at_s) == ("a11-c1", ("a11-c1",), 0.5)


@pytest.mark.parametrize("spec, message", [
    ("zz@1", "no switch 'zz' (switches: c1, c2"),
    ("c1", "expected LINK@SECONDS[:UP_SECONDS] (e.g. l1-s1@2:5) or SWITCH@SECONDS"),
    ("c1@3:2", "must come up after it went down"),
])
def test_bad_specs_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_fail(spec, FAT_TREE)
    assert message in str(info.value) and "\n" not in str(info.value)

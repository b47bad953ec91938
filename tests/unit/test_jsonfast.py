"""cellfabric.core.jsonfast.dumps_indent1 against json.dumps(indent=1): the same text."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, is_dataclass
from enum import IntEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellfabric.core.jsonfast import dumps_indent1

scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
           | st.text(max_size=8))
keys = st.text(max_size=6) | st.integers() | st.floats() | st.booleans() | st.none()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                      | st.tuples(inner, inner)
                      | st.dictionaries(keys, inner, max_size=5), max_leaves=40)


@settings(max_examples=400, deadline=None)
@given(values)
def test_any_json_value_is_encoded_as_json_dumps_does(value: Any) -> None:
    assert dumps_indent1(value) == json.dumps(value, indent=1)


class Level(IntEnum):
    HIGH = 3


@dataclass
class Point:
    t: float
    v: int


def _default(o: Any) -> Any:
    if is_dataclass(o) and not isinstance(o, type):
        return asdict(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


class Ratio(float):
    pass


@pytest.mark.parametrize("value", [
    {"samples": [[0.0, 1], [1e-9, 2], [float("nan"), 3], [math.inf, -math.inf]],
     "empty": [[], {}, ()], "nested": [[[1, 2]], [[]]], "level": Level.HIGH,
     "ratio": [Ratio(0.5), Ratio(1 / 3)], "point": Point(0.25, 7), "points": [Point(1.0, 2)],
     "text": ["caf\u00e9", "a\"b\\c\n", "\U0001f600"], True: 1, 2.5: None, None: False,
     7: [True, False, None, 10**30, -0.0]},
    [[1, 2.0], [3, True], (4, 5), [Level.HIGH, 1]],
    "top-level string", 1.5, [], {},
])
def test_metrics_like_values_and_edge_cases(value: Any) -> None:
    assert dumps_indent1(value, _default) == json.dumps(value, indent=1, default=_default)


def test_errors_are_json_dumps_errors() -> None:
    for bad in ({(1, 2): 3}, [object()], {"a": {1, 2}}):
        with pytest.raises(TypeError):
            json.dumps(bad, indent=1)
        with pytest.raises(TypeError):
            dumps_indent1(bad)
    with pytest.raises(TypeError):
        dumps_indent1([object()], _default)

"""``json.dumps(obj, indent=1, default=...)``'s text, made faster: with an indent the standard
library encodes in pure Python, through a generator per container (a k=8 run's 5.5 MB
metrics.json took 1 CPU s); here one recursive function appends the same pieces to a list.

The output is the standard library's, character for character (``tests/unit/
test_jsonfast.py`` holds it to that): ASCII-escaped strings, ``NaN``/``Infinity`` for the
non-finite floats, ``int.__repr__``/``float.__repr__`` for numbers and their subclasses,
dict keys as ``json`` converts them, ``default`` for anything else. Circular references are
not detected (RecursionError instead of ValueError); metrics have none.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _string  # type: ignore[attr-defined]
from typing import Any

_INF = float("inf")


def _float(o: float) -> str:
    if o != o:
        return "NaN"
    if o == _INF:
        return "Infinity"
    if o == -_INF:
        return "-Infinity"
    return float.__repr__(o)


def _key(key: Any) -> str:
    if isinstance(key, str):
        return _string(key)
    if isinstance(key, float):
        return _string(_float(key))
    if key is True:
        return '"true"'
    if key is False:
        return '"false"'
    if key is None:
        return '"null"'
    if isinstance(key, int):
        return _string(int.__repr__(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def dumps_indent1(obj: Any, default: Callable[[Any], Any] | None = None) -> str:
    """``json.dumps(obj, indent=1, default=default)``."""
    parts: list[str] = []
    _encode(obj, 0, parts, default)
    return "".join(parts)


def _encode(o: Any, level: int, parts: list[str], default: Callable[[Any], Any] | None) -> None:
    if isinstance(o, str):
        parts.append(_string(o))
    elif o is None:
        parts.append("null")
    elif o is True:
        parts.append("true")
    elif o is False:
        parts.append("false")
    elif isinstance(o, int):
        parts.append(int.__repr__(o))
    elif isinstance(o, float):
        parts.append(_float(o))
    elif isinstance(o, list | tuple):
        _encode_list(o, level, parts, default)
    elif isinstance(o, dict):
        _encode_dict(o, level, parts, default)
    else:
        if default is None:
            raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")
        _encode(default(o), level, parts, default)


def _numbers(o: list | tuple) -> list[str] | None:
    """The items' texts if every one is a finite float or an int (exact types), else None."""
    out = []
    for x in o:
        kind = type(x)
        if kind is float:
            if x != x or x == _INF or x == -_INF:
                return None
        elif kind is not int:
            return None
        out.append(repr(x))
    return out


def _encode_list(o: list | tuple, level: int, parts: list[str],
                 default: Callable[[Any], Any] | None) -> None:
    if not o:
        parts.append("[]")
        return
    inner = "\n" + " " * (level + 1)
    sep = "," + inner
    close = "\n" + " " * level + "]"
    numbers = _numbers(o)
    if numbers is not None:  # a run's samples: lists of numbers, and lists of those
        parts.append("[" + inner + sep.join(numbers) + close)
        return
    parts.append("[" + inner)
    first = True
    for item in o:
        if not first:
            parts.append(sep)
        first = False
        if type(item) is list and item and (numbers := _numbers(item)) is not None:
            deeper = "\n" + " " * (level + 2)
            parts.append("[" + deeper + ("," + deeper).join(numbers) + inner + "]")
        else:
            _encode(item, level + 1, parts, default)
    parts.append(close)


def _encode_dict(o: dict, level: int, parts: list[str],
                 default: Callable[[Any], Any] | None) -> None:
    if not o:
        parts.append("{}")
        return
    inner = "\n" + " " * (level + 1)
    parts.append("{" + inner)
    sep = "," + inner
    first = True
    for key, value in o.items():
        if not first:
            parts.append(sep)
        first = False
        parts.append(_key(key) + ": ")
        _encode(value, level + 1, parts, default)
    parts.append("\n" + " " * level + "}")

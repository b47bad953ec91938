"""One description per host setting: a dataclass field carries its flag, help text and text
form, and the ``cellfabric host`` parser, the config built from a parsed command line and the
command line of a config are all derived from those fields.

A knob's default is the field's default (never repeated in argparse: an option left out is
``None`` there and takes the field's default), and a config's command line lists only what
differs from the defaults, every value in a text form that parses back to the same value
(``repr`` of floats), so ``config_from_args(cls, parse(to_argv(cfg))) == cfg``.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass
from typing import Any

# knob shapes: one value; a repeated flag (a list); a flag without value (True when given);
# repeated NAME=VALUE pairs (a dict)
ONE, MANY, SWITCH, PAIRS = "one", "many", "switch", "pairs"


@dataclass(frozen=True)
class Knob:
    flag: str
    help: str | Callable[[], str]  # a callable: read when a parser is built (live choices)
    parse: Callable[[str], Any] = str  # text -> value; ValueError("why") on bad text
    render: Callable[[Any], str] = str  # value -> text that ``parse`` gives back exactly
    shape: str = ONE
    metavar: str | None = None
    # parses with the other fields' values at hand (a rate given in packets per second needs
    # the frame size); runs after every plain knob
    parse_with: Callable[[str, Mapping[str, Any]], Any] | None = None


def knob(flag: str, help: str | Callable[[], str], default: Any = MISSING, *,
         default_factory: Callable[[], Any] | Any = MISSING, **how: Any) -> Any:
    """A dataclass field described by a ``Knob`` (``how``: its other attributes)."""
    meta = {"knob": Knob(flag, help, **how)}
    if default_factory is not MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _knobs(cls: type) -> list[tuple[dataclasses.Field[Any], Knob]]:
    return [(f, f.metadata["knob"]) for f in dataclasses.fields(cls) if "knob" in f.metadata]


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return MISSING


def add_knobs(parser: argparse.ArgumentParser, cls: type) -> None:
    """One option per knob of dataclass ``cls``; a knob without default is required."""
    for f, k in _knobs(cls):
        default = _default(f)
        required = default is MISSING
        unset = default is None or default is False or default == [] or default == {}
        shown = "" if required or unset else f" (default {k.render(default)})"
        text = k.help() if callable(k.help) else k.help
        opts: dict[str, Any] = {"dest": f.name, "help": text + shown, "default": None}
        if k.shape == SWITCH:
            opts.update(action="store_true", default=False)
        else:
            opts.update(metavar=k.metavar or k.flag.removeprefix("--").upper(), required=required)
            if k.shape in (MANY, PAIRS):
                opts["action"] = "append"
        parser.add_argument(k.flag, **opts)


def _parsed(k: Knob, text: str, parse: Callable[[str], Any]) -> Any:
    try:
        return parse(text)
    except ValueError as exc:
        raise ValueError(f"{k.flag} '{text}': {exc}") from None


def _pair(k: Knob, text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"{k.flag} '{text}': expected NAME=VALUE")
    return key, _parsed(k, text, lambda _: k.parse(value))


def config_from_args(cls: type, args: argparse.Namespace) -> Any:
    """The ``cls`` of a parsed command line: each knob given, else the field's default."""
    values: dict[str, Any] = {}
    later: list[tuple[dataclasses.Field[Any], Knob, str]] = []
    for f, k in _knobs(cls):
        given = getattr(args, f.name, None)
        if given is None or given is False:
            continue
        if k.shape == SWITCH:
            values[f.name] = True
        elif k.shape == MANY:
            values[f.name] = [_parsed(k, t, k.parse) for t in given]
        elif k.shape == PAIRS:
            values[f.name] = dict(_pair(k, t) for t in given)
        elif k.parse_with is not None:
            later.append((f, k, given))
        else:
            values[f.name] = _parsed(k, given, k.parse)
    if later:
        context = {f.name: values.get(f.name, _default(f)) for f in dataclasses.fields(cls)}
        for f, k, text in later:
            values[f.name] = _parsed(k, text, lambda t, k=k: k.parse_with(t, context))
    return cls(**values)


def to_argv(cfg: Any) -> list[str]:
    """The options that give ``cfg`` back: every knob that differs from its default."""
    argv: list[str] = []
    for f, k in _knobs(type(cfg)):
        value = getattr(cfg, f.name)
        if value == _default(f):
            continue
        if k.shape == SWITCH:
            argv.append(k.flag)
        elif k.shape == MANY:
            for item in value:
                argv += _option(k.flag, k.render(item))
        elif k.shape == PAIRS:
            for key, item in value.items():
                argv += _option(k.flag, f"{key}={k.render(item)}")
        else:
            argv += _option(k.flag, k.render(value))
    return argv


def _option(flag: str, text: str) -> list[str]:
    # a value that starts like an option ('-1', '-x') must be attached, or argparse takes
    # it for the next option
    return [f"{flag}={text}"] if text.startswith("-") else [flag, text]


# -- text forms shared by the host configs ------------------------------------------------------
def integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError("expected an integer") from None


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError("expected a number") from None


_TIME_UNITS = (("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("s", 1.0))


def seconds(text: str) -> float:
    """'0.05' or '0.05s', '2ms', '50us', '500ns' -> seconds."""
    value = text.strip()
    for unit, scale in _TIME_UNITS:
        if value.endswith(unit):
            return number(value[: -len(unit)]) * scale
    return number(value)


def int_or_float(text: str) -> int | float:
    """A rate-control parameter: an integer if written as one, else a float."""
    return integer(text) if text.strip().lstrip("-").isdigit() else number(text)


def render_number(value: float) -> str:
    return repr(value)

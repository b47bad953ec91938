"""Choosing the data plane path at program load, and keeping the native copy of the tables
current: ``auto`` (native when a C compiler and cffi are present and the generator covers the
program), ``native`` or ``python``; ``$P4SIM_DATAPLANE`` gives the default."""

from __future__ import annotations

import functools
import os
import random
import sys
from typing import Any

MODES = ("auto", "native", "python")
_said: set[str] = set()  # what was already said once in this process


def mode(requested: str | None) -> str:
    value = (requested or os.environ.get("P4SIM_DATAPLANE") or "auto").strip().lower()
    if value not in MODES:
        raise ValueError(f"data plane {value!r}: expected one of {', '.join(MODES)}")
    return value


def _say_once(key: str, message: str) -> None:
    """One line on stderr (not the packet log, which carries the program's log_msg)."""
    if key in _said:
        return
    _said.add(key)
    print(message, file=sys.stderr)


def new_rng(seed: Any = None, selected: str | None = None) -> random.Random:
    """A switch's ``random.Random`` (seeded with ``seed``): one whose state the native path
    draws from in C (crandom.SharedRandom, the same sequence) unless the Python path is chosen
    (``selected``, default $P4SIM_DATAPLANE) or C cannot be built here."""
    if mode(selected) == "python":
        return random.Random(seed)
    from p4sim.switch.native import crandom

    return crandom.new(seed)


def native_state(selected: str, json_bytes: bytes, cp: Any, rng: Any, trace: Any) -> Any:
    """The native state for this program, or None to run it on the Python path (saying why
    once, naming the first feature the native path lacks)."""
    if selected == "python":
        return None
    if trace is not None:  # the packet trace instruments the Python path's functions
        if selected == "native":
            _say_once("trace", "p4sim: the packet log runs on the Python path")
        return None
    from p4sim.switch.native import build

    why = build.available()
    if why is not None:
        if selected == "native":
            _say_once("env", f"p4sim: native data plane unavailable ({why}); "
                      "running on the Python path")
        return None
    from p4sim.switch.native.cgen import Unsupported
    from p4sim.switch.native.runtime import NativeState, native_program

    try:
        prog = native_program(json_bytes, cp)
    except Unsupported as e:
        _say_once(build.cache_key(json_bytes), f"p4sim: the native data plane does not cover "
                  f"{e} in {_name(cp)}; running it on the Python path")
        return None
    except Exception as e:  # a build or load failure (disk, compiler): the Python path
        _say_once(build.cache_key(json_bytes), f"p4sim: the native data plane could not be "
                  f"built for {_name(cp)} ({type(e).__name__}: {e}); running it on the "
                  "Python path")
        return None
    return NativeState(prog, cp, rng)


def _name(cp: Any) -> str:
    doc = cp.p.doc
    return str(doc.get("program") or "the program") if isinstance(doc, dict) else "the program"


def native_flow(*args: Any) -> Any:
    from p4sim.switch.native.flow import NativeFlow

    return NativeFlow(*args)


# DataPlane methods that change what the C copy of the tables holds, and how to find the
# tables affected from their first argument.
_TABLE_CALLS = ("table_insert", "table_modify", "table_delete", "table_clear",
                "table_set_default", "direct_counter_write", "direct_meter_set")
_PROFILE_CALLS = ("member_add", "member_modify", "member_delete", "group_add", "group_modify",
                  "group_delete")
_PORT_CALLS = ("set_port_up", "set_link_up")
_READ_CALLS = ("table_entries", "check_idle")


def install_control_hooks(cls: type) -> None:
    """Wrap ``cls``'s control calls: counters flushed from C first, affected tables marked
    for copying after (under the data plane's lock, as the calls themselves)."""
    def wrap(name: str, how: str) -> None:
        fn = getattr(cls, name)

        @functools.wraps(fn)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            state = self._native
            if state is None:
                return fn(self, *args, **kwargs)
            with self.lock:
                state.flush()
                try:
                    return fn(self, *args, **kwargs)
                finally:
                    if how == "table":
                        state.mark(table=args[0] if args else kwargs.get("table"))
                    elif how == "profile":
                        state.mark(profile=args[0] if args else kwargs.get("profile"))
                    elif how == "port":
                        state.mark()
        setattr(cls, name, call)

    for name in _TABLE_CALLS:
        wrap(name, "table")
    for name in _PROFILE_CALLS:
        wrap(name, "profile")
    for name in _PORT_CALLS:
        wrap(name, "port")
    for name in _READ_CALLS:
        wrap(name, "read")

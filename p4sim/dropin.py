"""`p4sim dropin DIR`: p4sim under the p4lang tools' names, for programs that call them.

Writes, under DIR:
- `bin/p4c-bm2-ss`, `bin/simple_switch_grpc`, `bin/simple_switch_CLI`: wrappers running
  `p4sim compile`, `p4sim switch` and `p4sim ctl` with this installation's Python;
- `python/p4/tmp/p4config_pb2.py`: PI's legacy `p4.tmp.P4DeviceConfig` message, which old
  P4Runtime clients (p4lang/tutorials' `p4runtime_lib`) import and no wheel ships. PI builds it
  from its proto/p4/tmp/p4config.proto; here it is p4sim's copy of the same message. The `p4`
  package beside it extends itself over the installed `p4runtime` wheel's `p4`, so `p4.v1` and
  `p4.config` still come from there.

and prints the two lines to put them first: `export PATH=DIR/bin:$PATH` and
`export PYTHONPATH=DIR/python...`.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

TOOLS = {"p4c-bm2-ss": "compile", "simple_switch_grpc": "switch", "simple_switch_CLI": "ctl"}

_P4_PACKAGE = (
    "# Written by `p4sim dropin`: this `p4` spans every `p4` directory on sys.path, so the\n"
    "# p4runtime wheel's p4.v1 and p4.config stay importable beside p4.tmp.\n"
    "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n")
_P4CONFIG_MODULE = (
    "# Written by `p4sim dropin`: PI's p4.tmp.P4DeviceConfig, as p4sim declares it.\n"
    "from p4sim.switch.p4runtime.p4config import DESCRIPTOR, P4DeviceConfig  # noqa: F401\n")


def write_dropin(root: Path) -> tuple[Path, Path]:
    """Writes the wrappers and the Python module under ``root``; returns (bin, python) dirs."""
    bin_dir, py_dir = root / "bin", root / "python"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (py_dir / "p4" / "tmp").mkdir(parents=True, exist_ok=True)
    python = shlex.quote(sys.executable)
    for tool, sub in TOOLS.items():
        path = bin_dir / tool
        # -c keeps the wrapper independent of where the `p4sim` console script was installed.
        path.write_text(f"#!/bin/sh\nexec {python} -c 'import sys; from p4sim.cli import main; "
                        f"sys.exit(main())' {sub} \"$@\"\n")
        path.chmod(0o755)
    (py_dir / "p4" / "__init__.py").write_text(_P4_PACKAGE)
    (py_dir / "p4" / "tmp" / "__init__.py").write_text("")
    (py_dir / "p4" / "tmp" / "p4config_pb2.py").write_text(_P4CONFIG_MODULE)
    return bin_dir, py_dir


def dropin_env(root: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the drop-in first on PATH and PYTHONPATH."""
    bin_dir, py_dir = write_dropin(root)
    out = dict(os.environ if env is None else env)
    out["PATH"] = f"{bin_dir}:{out.get('PATH', '/usr/bin:/bin')}"
    out["PYTHONPATH"] = str(py_dir) + (f":{out['PYTHONPATH']}" if out.get("PYTHONPATH") else "")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: p4sim dropin DIR   (then eval the two export lines it prints)",
              file=sys.stderr)
        return 2 if argv[:1] not in (["-h"], ["--help"]) else 0
    try:
        bin_dir, py_dir = write_dropin(Path(argv[0]).resolve())
    except OSError as e:
        print(f"p4sim dropin: error: {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"export PATH={shlex.quote(str(bin_dir))}:\"$PATH\"")
    print(f"export PYTHONPATH={shlex.quote(str(py_dir))}${{PYTHONPATH:+:$PYTHONPATH}}")
    return 0

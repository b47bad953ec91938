"""Where the tier's outside inputs are: the p4lang toolchain and p4lang/tutorials, both in
../shared beside the repository (or $CELLFABRIC_SHARED); absent on a user's machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("CELLFABRIC_SHARED", ROOT.parent / "shared"))
TUTORIALS_DIR = SHARED / "clients" / "p4lang-tutorials"


def toolchain_env() -> dict[str, str] | None:
    """This environment with the real toolchain activated (for child processes), or None."""
    activate = SHARED / "toolchains" / "activate.sh"
    if not activate.is_file():
        return None
    proc = subprocess.run(["bash", "-c", f'eval "$("{activate}")" && env -0'],
                          capture_output=True, timeout=600)
    if proc.returncode != 0:
        return None
    return dict(line.split("=", 1) for line in proc.stdout.decode().split("\0") if "=" in line)


def tutorials_tarball() -> Path | None:
    found = sorted(TUTORIALS_DIR.glob("*.tar.xz"))
    return found[-1] if found else None

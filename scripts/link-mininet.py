"""Make Debian's Mininet importable from the project venv.

Mininet 2.3 comes from Debian as /usr/lib/python3/dist-packages/mininet; the venv does not see
system site-packages (that would drag in Debian's own protobuf/grpc), so only the mininet
package is linked into the venv's site-packages.
"""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

CANDIDATES = [Path("/usr/lib/python3/dist-packages/mininet"),
              Path("/usr/local/lib/python3/dist-packages/mininet")]


def main() -> int:
    source = next((p for p in CANDIDATES if (p / "__init__.py").exists()), None)
    if source is None:
        print("link-mininet: error: Debian's mininet package not found "
              "(run scripts/install-deps.sh as root)", file=sys.stderr)
        return 1
    link = Path(sysconfig.get_paths()["purelib"]) / "mininet"
    if link.is_symlink() and link.resolve() == source.resolve():
        return 0
    if link.is_symlink():
        link.unlink()
    link.symlink_to(source)
    print(f"link-mininet: {link} -> {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

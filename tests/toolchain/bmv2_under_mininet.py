"""What a test that runs a fabric of real simple_switch_grpc under Mininet needs: the real
toolchain on PATH (`make test-toolchain` puts it there), root, and Mininet. Importing this
module skips the importing test module when Mininet is absent; ``NEEDS`` is its pytestmark."""

from __future__ import annotations

import os
import shutil

import pytest

NEEDS = [
    pytest.mark.skipif(not (shutil.which("simple_switch_grpc") and shutil.which("p4c-bm2-ss")),
                       reason="real BMv2 toolchain not on PATH"),
    pytest.mark.skipif(os.geteuid() != 0, reason="Mininet needs root"),
]
pytest.importorskip("mininet.net", reason="Mininet (Debian package) not importable")

"""The Python API's tests (tests/CMakeLists.txt runs them as python.pytest,
with PYTHONPATH at the build tree's python/ and WEFT_CLI the weft
program, which some tests compare results with)."""

import os
import shutil

import pytest


@pytest.fixture
def weft_cli():
    cli = os.environ.get("WEFT_CLI") or shutil.which("weft")
    if not cli:
        pytest.fail("set WEFT_CLI to the weft program (tests/CMakeLists.txt does)")
    return cli

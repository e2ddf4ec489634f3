"""The pure parsers of csrc/parse/, on string literals: builds csrc/tests/parse_test.cpp with g++ and runs it.

The binary holds one block of CHECKs per parser (valid inputs with exact fields, too few fields, garbage,
huge numbers, missing keys); it exits 0 when all hold and prints each failing CHECK otherwise.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CSRC = ROOT / "csrc"


@pytest.fixture(scope="module")
def parse_test(tmp_path_factory):
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("no g++ on this machine")
    exe = tmp_path_factory.mktemp("parse_test") / "parse_test"
    cmd = [gxx, "-std=c++17", "-O1", "-Wall", "-Wextra", f"-I{CSRC}", str(CSRC / "tests" / "parse_test.cpp"),
           "-o", str(exe)]
    build = subprocess.run(cmd, capture_output=True, text=True, timeout=600)  # a loaded machine compiles slowly
    assert build.returncode == 0, f"{' '.join(cmd)} failed:\n{build.stdout}{build.stderr}"
    return exe


def test_parsers(parse_test):
    run = subprocess.run([str(parse_test)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"parse_test failed (exit {run.returncode}):\n{run.stdout}{run.stderr}"
    assert " 0 failed" in run.stdout, run.stdout

"""tests/recipe_venv.py: a recipe's venv is built once, by one of two runs that want it at the same time; its folder
follows the recipe's text; ``$SYSPROF_<NAME>_VENV`` names another. A fake recipe stands for the real ones (minutes)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import recipe_venv
from cli_support import HANG_S, wait_for

TESTS = pathlib.Path(__file__).resolve().parent

#: a recipe that logs what it does, and (when not ready) builds until the file GO exists
FAKE_RECIPE = textwrap.dedent("""\
    set -eu
    dir=$1; log=$(dirname "$0")/log
    if [ -e "$dir/ready" ]; then echo ready >> "$log"; exit 0; fi
    echo enter >> "$log"
    mkdir -p "$dir/bin" && ln -sf "$(command -v python3)" "$dir/bin/python"
    while [ ! -e "$(dirname "$0")/GO" ]; do sleep 0.05; done
    touch "$dir/ready" && echo built >> "$log"
""")

#: one test run asking for the fake venv: prints its folder
ASK = textwrap.dedent("""
    import pathlib, sys, tempfile
    sys.path.insert(0, sys.argv[1])
    import recipe_venv
    tempfile.tempdir = sys.argv[2]
    recipe_venv.RECIPES["fake"] = pathlib.Path(sys.argv[3])
    print(recipe_venv.build("fake"))
""")


def _fake(tmp_path):
    recipe = tmp_path / "recipes" / "fake.sh"
    recipe.parent.mkdir()
    recipe.write_text(FAKE_RECIPE)
    return recipe


def _ask(tmp_path, recipe, stderr):
    env = {k: v for k, v in os.environ.items() if k != "SYSPROF_FAKE_VENV"}
    with open(stderr, "w") as err:
        return subprocess.Popen([sys.executable, "-c", ASK, str(TESTS), str(tmp_path), str(recipe)], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)


def test_two_runs_at_once_build_the_venv_once(tmp_path):
    recipe = _fake(tmp_path)
    log = recipe.parent / "log"
    first = _ask(tmp_path, recipe, tmp_path / "first.err")
    wait_for(lambda: log.exists() and log.read_text() == "enter\n", HANG_S, "the first run to start the recipe")
    second = _ask(tmp_path, recipe, tmp_path / "second.err")
    try:  # the second run finds the lock held and waits (without the lock it would enter the recipe meanwhile)
        wait_for(lambda: "sysprof tests: waiting for another run building " in (tmp_path / "second.err").read_text(),
                 HANG_S, "the second run to wait")
    finally:
        (recipe.parent / "GO").touch()
    out = [p.communicate(timeout=HANG_S)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], [(tmp_path / f).read_text() for f in ("first.err",
                                                                                                  "second.err")]
    assert log.read_text() == "enter\nbuilt\nready\n"  # the second run found it ready: built once
    folder = out[0].strip()
    assert out[1].strip() == folder and os.path.basename(folder).startswith("sysprof-fake-venv-")
    assert os.path.dirname(folder) == str(tmp_path)


def test_the_folder_follows_the_recipe_and_the_variable(tmp_path, monkeypatch):
    recipe = _fake(tmp_path)
    monkeypatch.setitem(recipe_venv.RECIPES, "fake", recipe)
    monkeypatch.delenv("SYSPROF_FAKE_VENV", raising=False)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    before = recipe_venv.venv_path("fake")
    assert before == recipe_venv.venv_path("fake") and before.parent == tmp_path
    recipe.write_text(FAKE_RECIPE + "# changed\n")
    assert recipe_venv.venv_path("fake") != before
    monkeypatch.setenv("SYSPROF_FAKE_VENV", str(tmp_path / "mine"))
    assert recipe_venv.venv_path("fake") == tmp_path / "mine"

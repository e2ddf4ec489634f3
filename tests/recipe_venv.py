"""Virtual environments that a recipe script builds (tests/recipes/frameworks-venv.sh, ../shared/recipes/
composer-venv.sh), kept in the temporary directory for later test runs, and safe when two runs need one at once.

A venv's folder is named by a key: the recipe's text, this interpreter's version and machine, and the user
(``<tmpdir>/sysprof-<name>-venv-<key>``), so a changed recipe or another Python gets a venv of its own instead of a
wrong one; ``$SYSPROF_<NAME>_VENV`` names a folder instead. The recipe runs under an exclusive lock (flock on
``<folder>.lock``): a second run waits for the first, then finds the venv ready (each recipe checks that and exits
at once). The venv is built in place, not in a temporary folder renamed at the end, because a venv cannot be moved
(its scripts name its path); under the lock nobody uses it before the recipe's check passes, and the next run
finishes a build that was killed. No test writes into a ready venv: sysprof is not installed into it; a child runs
the sysprof this test session imported, first on its ``PYTHONPATH`` (:func:`sysprof_env`).

``.venv/bin/python tests/recipe_venv.py composer|frameworks`` builds (or finds) one and prints its folder;
``... composer SCRIPT [ARG...]`` runs SCRIPT with its python and this sysprof (benchmarks/bench_density.py).
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
RECIPES = {"composer": REPO.parent / "shared" / "recipes" / "composer-venv.sh",
           "frameworks": REPO / "tests" / "recipes" / "frameworks-venv.sh"}


def env_var(name: str) -> str:
    return f"SYSPROF_{name.upper()}_VENV"


def venv_path(name: str) -> pathlib.Path:
    """The folder of venv ``name`` (built or not); the recipe must exist."""
    given = os.environ.get(env_var(name))
    if given:
        return pathlib.Path(given)
    key = hashlib.sha256()
    key.update(RECIPES[name].read_bytes())
    key.update(f"\0{sys.version}\0{platform.machine()}\0{os.getuid()}".encode())
    return pathlib.Path(tempfile.gettempdir()) / f"sysprof-{name}-venv-{key.hexdigest()[:12]}"


@functools.lru_cache(maxsize=None)
def build(name: str, timeout: float = 3600) -> pathlib.Path:
    """Venv ``name``, built by its recipe unless ready (once per test session); waits for another run building it."""
    venv = venv_path(name)
    deadline = time.monotonic() + timeout
    with open(f"{venv}.lock", "a") as lock:
        waiting = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waiting:
                    print(f"sysprof tests: waiting for another run building {venv}", file=sys.stderr, flush=True)
                    waiting = True
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another run has held {venv}.lock for {timeout:.0f} s (building {venv})")
                time.sleep(1)
        # the recipe's `python3` is this session's interpreter: the venv runs this session's extension
        env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]))
        subprocess.run(["bash", str(RECIPES[name]), str(venv)], check=True, env=env,
                       timeout=max(1.0, deadline - time.monotonic()))
    python = venv / "bin" / "python"
    theirs = subprocess.run([str(python), "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                            text=True, check=True, timeout=120).stdout.strip()
    if theirs != str(sys.version_info[:2]):
        raise RuntimeError(f"{venv} runs Python {theirs}, this session {sys.version_info[:2]}: its children could "
                           f"not load this sysprof's extension (unset ${env_var(name)} or point it at another venv)")
    return venv


def sysprof_env(workdir: pathlib.Path, base=None) -> dict:
    """``base`` (default: this environment) for a child in another venv: the sysprof this session imported (the
    installed package, with its extension) first on ``PYTHONPATH`` through a folder in ``workdir`` holding only a
    link to it (no other package of this venv leaks in), and no inherited SYSPROF_MARKERS."""
    import sysprof

    link_dir = pathlib.Path(workdir) / "pythonpath"
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "sysprof"
    if not link.exists():
        link.symlink_to(pathlib.Path(sysprof.__file__).resolve().parent, target_is_directory=True)
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in ("SYSPROF_MARKERS", "PYTHONPATH")}
    env["PYTHONPATH"] = str(link_dir)
    return env


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in RECIPES:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(RECIPES)} [SCRIPT [ARG...]]")
    folder = build(sys.argv[1])
    if len(sys.argv) == 2:
        print(folder)
    else:
        with tempfile.TemporaryDirectory(prefix="sysprof-recipe-venv-") as work:
            sys.exit(subprocess.run([str(folder / "bin" / "python"), *sys.argv[2:]],
                                    env=sysprof_env(pathlib.Path(work))).returncode)

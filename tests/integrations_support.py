"""The frameworks venv for tests/test_integrations_lightning.py, test_integrations_transformers.py and
benchmarks/bench_integrations.py: PyTorch Lightning and Hugging Face transformers over the CPU torch on disk.

Built (or reused) with ``tests/recipes/frameworks-venv.sh`` in ``$SYSPROF_FRAMEWORKS_VENV`` or
``<tmpdir>/sysprof-frameworks-venv``; skipped only when the recipe is absent. sysprof is not installed into it: the
child runs the sysprof this test session imported (the installed package, with its extension), put first on its
``PYTHONPATH`` through a directory holding only a link to it, so nothing is rebuilt and no other package of the
test venv leaks in.
"""
from __future__ import annotations

import functools
import json
import os
import pathlib
import subprocess
import tempfile

import sysprof

REPO = pathlib.Path(__file__).resolve().parents[1]
RECIPE = REPO / "tests" / "recipes" / "frameworks-venv.sh"
VENV_ENV = "SYSPROF_FRAMEWORKS_VENV"


@functools.lru_cache(maxsize=None)
def _venv() -> pathlib.Path:
    venv = pathlib.Path(os.environ.get(VENV_ENV) or os.path.join(tempfile.gettempdir(), "sysprof-frameworks-venv"))
    subprocess.run(["bash", str(RECIPE), str(venv)], check=True, timeout=3600)
    return venv


def venv_python() -> pathlib.Path:
    if not RECIPE.exists():
        import pytest

        pytest.skip(f"{RECIPE} not found")
    return _venv() / "bin" / "python"


def child_env(workdir: pathlib.Path) -> dict:
    """The environment of a training child: this sysprof first on the path, no hub access, quiet, one thread."""
    link_dir = workdir / "pythonpath"
    link_dir.mkdir(exist_ok=True)
    link = link_dir / "sysprof"
    if not link.exists():
        link.symlink_to(pathlib.Path(sysprof.__file__).resolve().parent, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("SYSPROF_MARKERS", "PYTHONPATH")}
    env.update(PYTHONPATH=str(link_dir), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               HF_HOME=str(workdir / "hf_home"), WANDB_MODE="disabled", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", CUDA_VISIBLE_DEVICES="")
    return env


def run_child(script: str, workdir: pathlib.Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    path = workdir / "train.py"
    path.write_text(script)
    return subprocess.run([str(venv_python()), str(path), str(workdir), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=workdir, env=child_env(workdir))


def result(proc: subprocess.CompletedProcess, workdir: pathlib.Path) -> dict:
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-8000:]
    return json.loads((workdir / "result.json").read_text())


def expected_summaries(channels) -> set:
    """The default summary names for a trace's channels (DEFAULT_SUMMARIES, resolved as the callbacks do)."""
    from sysprof.integrations.summaries import SummaryWindow

    w = SummaryWindow()
    w.bind(channels)
    return set(w.names)

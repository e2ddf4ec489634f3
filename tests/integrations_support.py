"""The frameworks venv for tests/test_integrations_lightning.py, test_integrations_transformers.py and
benchmarks/bench_integrations.py: PyTorch Lightning and Hugging Face transformers over the CPU torch on disk.

Built (or reused) by ``tests/recipes/frameworks-venv.sh`` through tests/recipe_venv.py (``$SYSPROF_FRAMEWORKS_VENV``
or ``<tmpdir>/sysprof-frameworks-venv-<key>``; safe for two runs at once); skipped only when the recipe is absent.
sysprof is not installed into it: the child runs the sysprof this test session imported, first on its
``PYTHONPATH`` (``recipe_venv.sysprof_env``), so nothing is rebuilt and no other package of the test venv leaks in.
"""
from __future__ import annotations

import json
import pathlib
import subprocess

import recipe_venv

RECIPE = recipe_venv.RECIPES["frameworks"]


def _venv() -> pathlib.Path:
    return recipe_venv.build("frameworks", timeout=3600)


def venv_python() -> pathlib.Path:
    if not RECIPE.exists():
        import pytest

        pytest.skip(f"{RECIPE} not found")
    return _venv() / "bin" / "python"


def child_env(workdir: pathlib.Path) -> dict:
    """The environment of a training child: this sysprof first on the path, no hub access, quiet, one thread."""
    env = recipe_venv.sysprof_env(workdir)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
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

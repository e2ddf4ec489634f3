"""Which GPU is which (issue 13, item 5): Sampler(gpus=...), CUDA_VISIBLE_DEVICES and MIG, on both backends
against the fake NVML library (tests/fake_nvml/fake_nvml.c: device d has UUID GPU-fa4e0000-...-00000000000<d>,
PCI bus id 00000000:<17 + d>:00.0, and with FAKE_NVML_MIG=<mask> two MIG instances MIG-fa4e0000-...-0000000000<d><i>).
"""
from __future__ import annotations

import argparse
import gc

import pytest

import sysprof
from sysprof.sampling.gpus import check_gpus, native_options, selection
from sysprof.sampling.sampler import native_available

from fake_nvml.support import (  # noqa: F401 - fake_builds, fake and fresh_pynvml are fixtures
    ALL_CHANNELS, DEVICES, fake, fake_builds, fresh_pynvml, gpu_sampler)

BACKENDS = ["native", "psutil"]
UUID = "GPU-fa4e0000-0000-0000-0000-00000000000{}"
MIG = "MIG-fa4e0000-0000-0000-0000-0000000000{}{}"


def _sampler(backend: str, **kw):
    if backend == "native" and not native_available()[0]:
        pytest.skip("native extension unavailable")
    return gpu_sampler(backend, **kw)


def _order(s):
    return [d["index"] for d in s.devices]


def test_selection_rule():
    assert selection(None, {}) == (None, False)
    assert selection(None, {"CUDA_VISIBLE_DEVICES": "1,GPU-ab12,MIG-cd,0000:18:00.0"}) == (
        [("index", "1"), ("uuid", "GPU-AB12"), ("mig", "MIG-CD"), ("pci", "00000000:18:00.0")], True)
    # CUDA stops at the first entry it cannot parse; an empty list hides every GPU.
    assert selection(None, {"CUDA_VISIBLE_DEVICES": "1,x,0"}) == ([("index", "1")], True)
    assert selection(None, {"CUDA_VISIBLE_DEVICES": ""}) == ([], True)
    assert native_options(None, {"CUDA_VISIBLE_DEVICES": ""}) == ["gpu:select:none", "gpu:select:cuda"]
    # gpus= wins over the environment; "all" reads every GPU.
    assert selection([0, "2"], {"CUDA_VISIBLE_DEVICES": "1"}) == ([("index", "0"), ("index", "2")], False)
    assert selection("all", {"CUDA_VISIBLE_DEVICES": "1"}) == (None, False)
    assert native_options(["00000000:17:00.0"], {}) == ["gpu:select:pci:00000000:17:00.0"]
    for bad in (["cuda:0"], [], [True], 3, ["GPU-"]):
        with pytest.raises(ValueError, match="gpus"):
            check_gpus(bad)


def test_cli_gpus_flag():
    from sysprof.cli.common import CLIError
    from sysprof.cli.sources import gpus_from_args
    assert gpus_from_args(argparse.Namespace(gpus=None)) is None
    assert gpus_from_args(argparse.Namespace(gpus="1, GPU-ab")) == ["1", "GPU-ab"]
    assert gpus_from_args(argparse.Namespace(gpus="all")) == "all"
    with pytest.raises(CLIError, match="--gpus: 'x'"):
        gpus_from_args(argparse.Namespace(gpus="0,x"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gpus_in_the_order_asked(fake, fresh_pynvml, backend):
    fake(devices=3)
    s = _sampler(backend, gpus=[2, UUID.format(0)])
    assert _order(s) == [2, 0]
    assert s.channels == tuple(f"gpu/{d}/{c}" for d in (2, 0) for c in ALL_CHANNELS)
    row = s.sample()
    assert row["gpu/2/power_limit_watts"] == 500.0 and row["gpu/0/power_limit_watts"] == 700.0
    assert "cuda_index" not in s.devices[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_pci_bus_id_and_unmatched_entries(fake, fresh_pynvml, backend):
    fake()
    s = _sampler(backend, gpus=["0000:18:00.0", "7", "GPU-ffff"])
    assert s.devices == [DEVICES[1]]
    assert "gpu selection: no GPU matches index 7, uuid GPU-FFFF" in s.errors["gpu"].split("; ")


@pytest.mark.parametrize("backend", BACKENDS)
def test_cuda_visible_devices(fake, fresh_pynvml, backend, monkeypatch):
    fake()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{UUID.format(1)},0")
    s = _sampler(backend)
    assert s.devices == [dict(DEVICES[1], cuda_index=0), dict(DEVICES[0], cuda_index=1)]
    assert s.channels[0].startswith("gpu/1/")
    del s
    gc.collect()
    s = _sampler(backend, gpus="all")  # every GPU, whatever the environment says
    assert s.devices == DEVICES
    del s
    gc.collect()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    s = sysprof.Sampler(gpu=True, memory=True, cpu=False, disk=False, net=False, backend=backend)
    assert not [c for c in s.channels if c.startswith("gpu/")] and "memory/total_bytes" in s.channels
    assert "no GPU is visible under CUDA_VISIBLE_DEVICES" in s.errors["gpu"]  # psutil: prefixed by the backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_mig_enabled_device(fake, fresh_pynvml, backend):
    fake(mig=2)  # device 1 in MIG mode
    s = _sampler(backend)
    assert s.devices == [DEVICES[0], dict(DEVICES[1], mig_instances=[MIG.format(1, 0), MIG.format(1, 1)])]
    assert s.sample()["gpu/1/memory_total_bytes"] > 0  # the parent's metrics
    del s
    gc.collect()
    s = _sampler(backend, gpus=[MIG.format(1, 1)])  # a MIG instance selects its parent
    assert _order(s) == [1] and s.devices[0]["mig_instances"] == [MIG.format(1, 0), MIG.format(1, 1)]

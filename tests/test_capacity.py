"""The ring's default size (Sampler(capacity=None)): about 4 s of rows at the interval, at most 4 MiB of them, within
[64, 65536] rows; an explicit capacity is taken as given."""
import math

import pytest

import sysprof
from sysprof.sampling import sampler as sampler_mod

native_ok, _ = sampler_mod.native_available()
pytestmark = pytest.mark.skipif(not native_ok, reason="native backend unavailable")


def expected(interval, width):
    rows = min(65536, max(64, math.ceil(4.0 / interval)))
    return max(2, min(rows, (4 << 20) // (8 * (width + 1))))


@pytest.mark.parametrize("interval", [1e-5, 1e-4, 1e-3, 1e-2, 0.5, 10.0])
def test_default_capacity_by_time_and_bytes(interval):
    s = sysprof.Sampler(interval)
    assert s.capacity == expected(interval, len(s.channels))
    assert s.capacity * 8 * (len(s.channels) + 1) <= 4 << 20 or s.capacity == 64


def test_default_capacity_values():
    # 4 s at 1 ms is 4000 rows; a 5-channel sampler fits them in 4 MiB, so time decides
    s = sysprof.Sampler(0.001, cpu=False, memory=False, disk=False, net=False, load=True)
    assert len(s.channels) == 5
    assert s.capacity == 4000
    assert sysprof.Sampler(0.5, cpu=False, memory=False, disk=False, net=False, load=True).capacity == 64
    # 10 µs: 400,000 rows by time, 65536 by the row bound; 65536 x 48 B = 3 MiB < 4 MiB
    assert sysprof.Sampler(1e-5, cpu=False, memory=False, disk=False, net=False, load=True).capacity == 65536


def test_explicit_capacity_is_kept():
    s = sysprof.Sampler(0.001, capacity=100_000)
    assert s.capacity == 100_000
    with pytest.raises(ValueError, match="capacity"):
        sysprof.Sampler(0.001, capacity=1)

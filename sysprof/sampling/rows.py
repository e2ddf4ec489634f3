"""What a sampler hands out: :class:`Batch` (rows drained, as arrays) and :class:`Row` (one row, as
``Sampler.latest()`` and ``Sampler.wait_next()`` return it). Both backends make the same ones."""
from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Dict, Iterator, Optional, Tuple

import numpy as np

try:
    from .. import _native
except ImportError:  # the extension is missing: Row stands on _RowData (sampler.py says why)
    _native = None

__all__ = ["Batch", "Row"]


@dataclass(frozen=True)
class Batch:
    """Rows drained from a sampler.

    Attributes:
        timestamps_ns: int64 array of shape (n,): wall-clock time (ns since the Unix epoch, as
            ``time.time_ns()``) at which each row was sampled.
        values: float64 array of shape (n, len(channels)); NaN where a value was unavailable.
        channels: the channel names, one per column.
        interval: the sampler's interval in seconds (None where not known).
    """

    timestamps_ns: np.ndarray
    values: np.ndarray
    channels: Tuple[str, ...]
    interval: Optional[float] = None

    def __len__(self) -> int:
        return int(self.timestamps_ns.shape[0])

    def column(self, channel: str) -> np.ndarray:
        """float64 array (n,) of one channel. Raises KeyError for an unknown channel."""
        try:
            i = self.channels.index(channel)
        except ValueError:
            raise KeyError(channel) from None
        return self.values[:, i]

    def to_pandas(self):
        """The rows as a pandas DataFrame: a UTC ``DatetimeIndex`` named ``time`` of the sampled times
        (``timestamps_ns``, exactly), one float64 column per channel in ``channels`` order (NaN: unknown), the
        units in ``df.attrs["units"]`` (channel -> unit, from the registry) and the interval in
        ``df.attrs["interval_s"]``. The values are not copied (the frame is a view of ``values``).

        Raises:
            ImportError: pandas is missing (``pip install 'sysprof[pandas]'``).
        """
        from ..frames import batch_frame

        return batch_frame(self)


_unpack_double = struct.Struct("d").unpack_from


class _RowData:
    """Row's fields where the extension (and its _native.RowData, which latest() makes without running
    Python code) is missing."""

    __slots__ = ("seq", "timestamp_ns", "_raw", "_layout")

    def __init__(self, seq: int, timestamp_ns: int, raw: bytes, layout) -> None:
        self.seq, self.timestamp_ns, self._raw, self._layout = seq, timestamp_ns, raw, layout


class Row(_RowData if _native is None else _native.RowData, Mapping):
    """One row the sampling thread took, as ``Sampler.latest()`` and ``Sampler.wait_next()`` return it: a
    read-only mapping channel -> float (``row["memory/used_bytes"]``; KeyError for an unknown channel).

    Attributes:
        seq: the row's number: 1 for the first row this Sampler's thread took, counting every row as
            ``stats["taken"]`` does (restarts continue the count; rows dropped by a full ring count too).
        timestamp_ns: wall-clock time (ns since the Unix epoch, as ``Batch.timestamps_ns``) of the row.
        array: read-only float64 array of shape (len(channels),), in channel order (made on each access).
        channels: the channel names, as ``Sampler.channels``.

    It is built without copying the values into Python objects, so ``latest()`` stays cheap; a value is
    unpacked when read. ``to_dict()`` gives a plain dict of all of them at once.
    """

    __slots__ = ()

    @property
    def channels(self) -> Tuple[str, ...]:
        return self._layout[0]

    @property
    def array(self) -> np.ndarray:
        return np.frombuffer(self._raw, dtype=np.float64)  # a view of immutable bytes: read-only

    def __getitem__(self, channel: str) -> float:
        return _unpack_double(self._raw, 8 * self._layout[1][channel])[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self._layout[0])

    def __len__(self) -> int:
        return len(self._layout[0])

    def __contains__(self, channel: object) -> bool:
        return channel in self._layout[1]

    def to_dict(self) -> Dict[str, float]:
        return dict(zip(self._layout[0], self.array.tolist()))

    def __repr__(self) -> str:
        return f"Row(seq={self.seq}, timestamp_ns={self.timestamp_ns}, {len(self)} channels)"

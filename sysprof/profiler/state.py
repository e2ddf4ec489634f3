"""The training-state stand-ins for running sysprof's profiler without Composer: :class:`State` and its
:class:`Timestamp` of :class:`Time` counts (the subset of Composer's that schedules, markers and handlers read).
Re-exported by :mod:`sysprof.profiler.profiler` and ``sysprof``."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["State", "Timestamp", "Time"]


class Time(int):
    """A training-time count (an ``int``); ``.value`` gives the plain ``int`` like Composer's ``Time``."""

    __slots__ = ()

    @property
    def value(self) -> int:
        return int(self)


class Timestamp:
    """Immutable training-progress snapshot for standalone use (a subset of Composer's ``Timestamp``).

    Attributes (all :class:`Time`): ``epoch``, ``batch``, ``batch_in_epoch``, ``sample``, ``sample_in_epoch``,
    ``token``, ``token_in_epoch``.
    """

    __slots__ = ("epoch", "batch", "batch_in_epoch", "sample", "sample_in_epoch", "token", "token_in_epoch")

    def __init__(self, epoch: int = 0, batch: int = 0, batch_in_epoch: int = 0, sample: int = 0,
                 sample_in_epoch: int = 0, token: int = 0, token_in_epoch: int = 0) -> None:
        for name, value in zip(self.__slots__, (epoch, batch, batch_in_epoch, sample, sample_in_epoch, token,
                                                token_in_epoch)):
            object.__setattr__(self, name, Time(value))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Timestamp is immutable; use to_next_batch() / to_next_epoch()")

    def to_next_batch(self, samples: int = 0, tokens: int = 0) -> "Timestamp":
        """The timestamp after one more batch of ``samples`` samples and ``tokens`` tokens."""
        return Timestamp(self.epoch, self.batch + 1, self.batch_in_epoch + 1, self.sample + samples,
                         self.sample_in_epoch + samples, self.token + tokens, self.token_in_epoch + tokens)

    def to_next_epoch(self) -> "Timestamp":
        """The timestamp at the start of the next epoch (in-epoch counters reset to 0)."""
        return Timestamp(self.epoch + 1, self.batch, 0, self.sample, 0, self.token, 0)

    def __repr__(self) -> str:
        return f"Timestamp(epoch={int(self.epoch)}, batch={int(self.batch)}, batch_in_epoch={int(self.batch_in_epoch)})"


class State:
    """The few ``State`` attributes sysprof's profiler, schedules and handlers read (standalone use).

    Attributes:
        run_name (str): fills ``{run_name}`` in trace folder/file names.
        timestamp (Timestamp): current training progress.
        profiler (Profiler | None): the bound profiler.
        dataloader_len (int | None): batches per epoch, if known (used by :func:`cyclic_schedule`).
        callbacks (list): objects receiving events (filled by :meth:`Profiler.bind_to_state`).
    """

    def __init__(self, run_name: str = "sysprof", dataloader_len: Optional[int] = None) -> None:
        self.run_name = run_name
        self.timestamp = Timestamp()
        self.profiler: Any = None
        self.dataloader_len = dataloader_len
        self.callbacks: list = []

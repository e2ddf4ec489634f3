"""PyTorch Lightning: ``SysprofCallback`` records system metrics and Lightning's phases while ``fit`` runs, and logs
summaries into every logger the trainer has (TensorBoard, W&B, MLflow, CSV, ...)::

    import lightning as L
    from sysprof.integrations.lightning import SysprofCallback

    trainer = L.Trainer(max_epochs=3, callbacks=[SysprofCallback()])
    trainer.fit(model, train_loader, val_loader)
    # trainer.log_dir/sysprof-rank0.json: `sysprof report` it, or open it in Perfetto

Needs ``lightning`` (``lightning.pytorch``) or ``pytorch_lightning``, imported when this module is; sysprof does not
depend on either. The callback derives from the one that imports (``lightning.pytorch`` first).

* **Recording**: from ``on_fit_start`` to ``on_fit_end``; ``on_exception`` (any exception, KeyboardInterrupt
  included) stops it too, with the exception's name as the stop event's ``reason``; should neither come, the
  recording stops once ``Trainer.fit`` has left the stack (checked every 0.5 s) or at interpreter exit. Options,
  ranks and the default file (``trainer.log_dir``, else ``default_root_dir``): :class:`Session`. With ``flight=``
  (a flight recorder, :mod:`sysprof.flight`), ``on_exception`` and slow ``train_batch`` phases trigger dumps.
* **Phases** (``X`` events on the training thread): ``train_batch`` (``on_train_batch_start`` to
  ``on_train_batch_end``), ``backward`` (``on_before_backward`` to ``on_after_backward``), ``optimizer_step``
  (``on_before_optimizer_step``, after the closure's backward, to the batch's end), ``validation``
  (``on_validation_start`` to ``on_validation_end``, the sanity check included) and ``dataloader`` (one
  batch's end, or the epoch's or a validation's end, to the next batch's start: the fetch of the next batch,
  which Lightning does between them).
* **Summaries**: at each step where Lightning writes to its loggers (every ``log_every_n_steps`` batches that
  stepped, as the trainer decides), ``log_metrics(summaries, step)`` of every logger in ``trainer.loggers``, at
  the step Lightning logs that batch's metrics at, with the window since the previous one
  (:mod:`sysprof.integrations.summaries`); other steps do no summary work. Straight to the loggers rather than
  through ``LightningModule.log_dict``, whose per-value checks and tensors took ~5 ms per log step for the
  default set (benchmarks/bench_integrations.py's machine); so they are not in ``trainer.callback_metrics``. ``log_summaries=False`` keeps them out of
  the loggers (the trace is still written).
"""
from __future__ import annotations

import time
from typing import Any

try:
    import lightning.pytorch as _pl
except ImportError:  # pragma: no cover - the older package name
    try:
        import pytorch_lightning as _pl
    except ImportError:
        raise ImportError("sysprof.integrations.lightning needs PyTorch Lightning: pip install lightning") from None

from sysprof.integrations.phase_log import steps
from sysprof.integrations.session import Session, guarded, outermost_frame

__all__ = ["SysprofCallback"]

time_ns = time.time_ns
# what each hook does to the phases (module docstring), as PhaseLog steps
_FETCH = steps(("tentative", "dataloader"))
_BATCH = steps(("end", "dataloader"), ("begin", "train_batch"))
_BACKWARD = steps(("begin", "backward"))
_BACKWARD_END = steps(("end", "backward"))
_OPTIMIZER = steps(("begin", "optimizer_step"))
_BATCH_END = steps(("end", "optimizer_step"), ("end", "train_batch"), ("tentative", "dataloader"))
_RESTART_FETCH = steps(("restart", "dataloader"))
_VALIDATION = steps(("cancel", "dataloader"), ("begin", "validation"))  # the gap before a validation is no fetch
_VALIDATION_END = steps(("end", "validation"))
_VALIDATION_END_TRAINING = steps(("end", "validation"), ("tentative", "dataloader"))


def _logs_this_step(trainer) -> bool:
    """Whether the trainer writes to its loggers at the end of the batch now ending (its own rule where it has
    one: ``_logger_connector.should_update_logs``, else every ``log_every_n_steps`` global steps)."""
    if not trainer.loggers:
        return False
    connector = getattr(trainer, "_logger_connector", None)
    should = getattr(connector, "should_update_logs", None)
    if isinstance(should, bool):
        return should
    every = max(1, int(getattr(trainer, "log_every_n_steps", 50) or 1))
    return (trainer.global_step % every == 0) or bool(getattr(trainer, "should_stop", False))


def _logging_step(trainer) -> int:
    """The step Lightning gives its loggers for this batch (batches that stepped so far, before this one's
    increment), else ``global_step``."""
    loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    step = getattr(loop, "_batches_that_stepped", None)
    return int(step) if isinstance(step, int) else int(trainer.global_step)


class SysprofCallback(_pl.Callback):
    """Records a sysprof trace of ``fit`` with Lightning's phases, and logs summaries (module docstring).

    Args:
        path, interval, sources, intervals, devices, backend, summaries, ranks, overwrite, options:
            :class:`sysprof.integrations.session.Session`.
        log_summaries: log the summaries into the trainer's loggers (default True).
    """

    def __init__(self, path=None, *, log_summaries: bool = True, **options: Any) -> None:
        super().__init__()
        self.session = Session(path, **options)
        self.log_summaries = bool(log_summaries)

    @property
    def trace_path(self):
        """The file this rank wrote (or writes) its trace into (with ``flight=``: the dumps' folder); None when it
        records nothing."""
        return self.session.last_path

    # ---- the run ----
    @guarded
    def on_fit_start(self, trainer, pl_module) -> None:
        folder = getattr(trainer, "log_dir", None) or trainer.default_root_dir
        fit = outermost_frame(lambda f: f.f_code.co_name == "fit" and f.f_locals.get("self") is trainer)
        self.session.start(folder, "lightning", rank=int(trainer.global_rank), local_rank=int(trainer.local_rank),
                           watch=fit)

    @guarded
    def on_fit_end(self, trainer, pl_module) -> None:
        self.session.stop("end")

    @guarded
    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self.session.stop(type(exception).__name__, exception)

    @guarded
    def teardown(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit":
            self.session.stop("end")

    # ---- phases: each hook one clock read and one append (PhaseLog.push), nothing that can raise ----
    def on_train_epoch_start(self, trainer, pl_module) -> None:
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_FETCH, time_ns()))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_BATCH, time_ns()))

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_BACKWARD, time_ns()))

    def on_after_backward(self, trainer, pl_module) -> None:
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_BACKWARD_END, time_ns()))

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_OPTIMIZER, time_ns()))

    @guarded
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        rec = self.session.recorder
        if rec is None:
            return
        rec.phases.push((_BATCH_END, time_ns()))
        if self.log_summaries and rec.window is not None and _logs_this_step(trainer):
            values = rec.summaries()
            if values:
                step = _logging_step(trainer)
                for logger in trainer.loggers:
                    logger.log_metrics(values, step=step)
            rec.phases.push((_RESTART_FETCH, time_ns()))  # the log's own time is no fetch

    def on_validation_start(self, trainer, pl_module) -> None:
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_VALIDATION, time_ns()))

    @guarded
    def on_validation_end(self, trainer, pl_module) -> None:
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_VALIDATION_END_TRAINING if trainer.training else _VALIDATION_END, time_ns()))

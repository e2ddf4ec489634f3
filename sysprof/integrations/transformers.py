"""Hugging Face ``transformers``: ``SysprofCallback`` records system metrics and the ``Trainer``'s phases while
``train`` runs, and adds summaries to the ``logs`` of every ``on_log``, so each reporting integration (W&B,
MLflow, TensorBoard, Comet, ..., and the console) receives them with the trainer's own metrics::

    from transformers import Trainer, TrainingArguments
    from sysprof.integrations.transformers import SysprofCallback

    trainer = Trainer(model=model, args=TrainingArguments("out", logging_steps=10), train_dataset=ds,
                      callbacks=[SysprofCallback()])
    trainer.train()
    # out/sysprof-rank0.json: `sysprof report` it, or open it in Perfetto

Needs ``transformers`` (imported when this module is); sysprof does not depend on it.

* **Recording**: from ``on_train_begin`` to ``on_train_end``. The Trainer has no exception hook: an exception or
  KeyboardInterrupt that leaves ``Trainer.train`` stops the recording within 0.5 s (the recorder's thread sees the
  call gone from the stack; the stop event's ``reason`` says ``training call ended``), or at interpreter exit;
  the trace on disk is flushed every second meanwhile. Options, ranks and the default file
  (``args.output_dir``): :class:`~sysprof.integrations.session.Session`. With ``flight=`` (a flight recorder,
  :mod:`sysprof.flight`), slow ``step`` phases and a ``train`` call that ends without ``on_train_end`` (an exception)
  trigger dumps.
* **Phases** (``X`` events on the training thread): ``step`` (``on_step_begin`` to ``on_step_end``),
  ``optimizer_step`` (``on_pre_optimizer_step`` to ``on_optimizer_step``, where the Trainer has them),
  ``evaluate`` and ``save`` (the Trainer calls ``on_evaluate`` and ``on_save`` once they are done, so each starts
  at the callback event before it: the step's end or the log), ``dataloader`` (a step's end, or the epoch's
  start, a log, an evaluation or a save, to the next ``on_step_begin``: the fetch of the next batch).
* **Summaries**: at each ``on_log`` the window since the previous log is added to ``logs``
  (:mod:`sysprof.integrations.summaries`); nothing is done at steps that do not log. To be in the ``logs`` the
  integrations receive, the callback moves itself to the front of the Trainer's callbacks at ``on_train_begin``.
  ``log_summaries=False`` leaves ``logs`` alone.
"""
from __future__ import annotations

import time
from typing import Any

try:
    import transformers as _transformers
    from transformers import TrainerCallback as _TrainerCallback
except ImportError:
    raise ImportError("sysprof.integrations.transformers needs Hugging Face transformers: "
                      "pip install transformers") from None

from sysprof.integrations.phase_log import steps
from sysprof.integrations.session import Session, guarded, outermost_frame

__all__ = ["SysprofCallback"]

time_ns = time.time_ns
# what each per-step hook does to the phases (module docstring), as PhaseLog steps
_FETCH = steps(("tentative", "dataloader"))
_STEP = steps(("end", "dataloader"), ("begin", "step"))
_OPTIMIZER = steps(("begin", "optimizer_step"))
_OPTIMIZER_END = steps(("end", "optimizer_step"))
_STEP_END = steps(("end", "step"), ("tentative", "dataloader"))


def _is_train_call(frame) -> bool:
    return frame.f_code.co_name == "train" and isinstance(frame.f_locals.get("self"), _transformers.Trainer)


class SysprofCallback(_TrainerCallback):
    """Records a sysprof trace of ``Trainer.train`` with its phases, and adds summaries to ``on_log``'s ``logs``
    (module docstring).

    Args:
        path, interval, sources, intervals, devices, backend, summaries, ranks, overwrite, options:
            :class:`sysprof.integrations.session.Session`.
        log_summaries: add the summaries to ``logs`` (default True).
    """

    def __init__(self, path=None, *, log_summaries: bool = True, **options: Any) -> None:
        self.session = Session(path, **options)
        self.log_summaries = bool(log_summaries)
        self._last_ns = 0  # the latest callback event (the start of evaluate and save)
        self._evaluating = False

    @property
    def trace_path(self):
        """The file this rank wrote (or writes) its trace into (with ``flight=``: the dumps' folder); None when it
        records nothing."""
        return self.session.last_path

    def _event(self):
        """The recorder (None: not recording) and the time now, which becomes the latest event's."""
        now = time.time_ns()
        self._last_ns, last = now, self._last_ns
        return self.session.recorder, now, last

    # ---- the run ----
    @guarded
    def on_train_begin(self, args, state, control, **kwargs):
        self._evaluating = False
        train = outermost_frame(_is_train_call)
        trainer = train.f_locals.get("self") if train is not None else None
        callbacks = getattr(getattr(trainer, "callback_handler", None), "callbacks", None)
        if isinstance(callbacks, list) and self in callbacks:  # first, so that on_log's additions reach all
            callbacks.remove(self)
            callbacks.insert(0, self)
        del trainer
        self.session.start(args.output_dir, "transformers", rank=int(args.process_index),
                           local_rank=int(args.local_process_index), watch=train)
        self._last_ns = time.time_ns()

    @guarded
    def on_train_end(self, args, state, control, **kwargs):
        self.session.stop("end")

    # ---- phases: the per-step hooks are one clock read and one append each (PhaseLog.push) ----
    def on_epoch_begin(self, args, state, control, **kwargs):
        self._last_ns = now = time_ns()
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_FETCH, now))

    def on_step_begin(self, args, state, control, **kwargs):
        self._last_ns = now = time_ns()
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_STEP, now))

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        self._last_ns = now = time_ns()
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_OPTIMIZER, now))

    def on_optimizer_step(self, args, state, control, **kwargs):
        self._last_ns = now = time_ns()
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_OPTIMIZER_END, now))

    def on_step_end(self, args, state, control, **kwargs):
        self._last_ns = now = time_ns()
        rec = self.session.recorder
        if rec is not None:
            rec.phases.push((_STEP_END, now))

    @guarded
    def on_prediction_step(self, args, state, control, **kwargs):
        rec, now, last = self._event()
        if rec is not None and not self._evaluating:  # the first batch of an evaluation: it began at `last`
            self._evaluating = True
            rec.phase_cancel("dataloader")
            rec.phase_begin("evaluate", last)

    @guarded
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        rec, now, last = self._event()
        if rec is None:
            return
        if not self._evaluating:  # an evaluation without batches
            rec.phase_cancel("dataloader")
            rec.phase_begin("evaluate", last)
        self._evaluating = False
        rec.phase_end("evaluate", now)
        rec.phase_begin("dataloader", now, tentative=True)

    @guarded
    def on_save(self, args, state, control, **kwargs):
        rec, now, last = self._event()
        if rec is not None:
            rec.phase_cancel("dataloader")
            rec.add_span("save", last, now)
            rec.phase_begin("dataloader", now, tentative=True)

    @guarded
    def on_log(self, args, state, control, logs=None, **kwargs):
        rec, now, _ = self._event()
        if rec is None:
            return
        if self.log_summaries and isinstance(logs, dict) and rec.window is not None:
            logs.update(rec.summaries())
        rec.phase_restart("dataloader")  # the log's own time is no fetch
        self._last_ns = time.time_ns()

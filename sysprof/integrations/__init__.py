"""Trainer integrations: callbacks that record a sysprof trace of a training run with the trainer's phases, and
log summaries of the samples into the trainer's own loggers.

* :mod:`sysprof.integrations.lightning`: ``SysprofCallback`` for PyTorch Lightning (needs ``lightning``);
* :mod:`sysprof.integrations.transformers`: ``SysprofCallback`` for the Hugging Face ``Trainer`` (needs
  ``transformers``);
* Composer: ``sysprof.SystemProfiler(log_summaries=True)``;
* :mod:`sysprof.integrations.summaries`: the summaries all three log; :mod:`sysprof.integrations.recorder`: the
  in-process recorder the callbacks share.

Importing this package imports neither trainer: each module imports its own when it is imported.
"""

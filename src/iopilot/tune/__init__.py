"""Tuning the I/O stack of a program without changing it: the tools that
choose the settings files (``iopilot.settings``) a run applies.

``tuning.tune`` runs one whole study (``iopilot tune``), ``optimize`` the
trace-tune-compare loop, ``efficiency`` the bench of the strategies;
``study`` drives the trials, ``search`` proposes points (its strategies:
``STRATEGIES``), ``space`` and ``generate`` say what may be tried,
``objective`` measures a trial, ``launch`` starts it (a launcher registers
with ``@register``), ``output`` prints and plots."""

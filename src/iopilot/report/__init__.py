"""Reporters: render a :class:`~iopilot.checks.Diagnosis`; they never analyse."""

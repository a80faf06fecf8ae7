"""Capture: run programs under the iopilot runtime (``libiopilot.so``)."""

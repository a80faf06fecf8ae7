"""iopilot: capture, diagnose, show and tune the I/O of HPC applications."""

__version__ = "0.1.0"

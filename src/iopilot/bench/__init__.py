"""Benchmarks: of iopilot itself now, of I/O systems later (kernels)."""

"""Overlap: asynchronous I/O that runs beside the program's computation
(``engine``: the C engine's event sets from Python), and the advisor that
predicts from a trace whether it pays (``advise``)."""

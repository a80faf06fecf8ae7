"""Timeline view: operations (or exact bins) per rank over time."""

from __future__ import annotations

from typing import Any

from .context import PageContext


def data(ctx: PageContext) -> dict[str, Any] | None:
    """Drawn from the shared records (sample and bins); None without records."""
    if ctx.records is None:
        return None
    return {"span": [ctx.t_lo, ctx.t_hi]}

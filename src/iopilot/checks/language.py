"""The program's language, so that advice is code the user can paste.

The source fills ``Job.language`` when it can tell (an iopilot trace knows
the interpreter behind a launcher, the Fortran runtime, C++); otherwise the
command line decides between Python (whatever launches it) and C.  Every check that gives a
snippet passes one per language it knows through :func:`in_language`.
"""

from __future__ import annotations

from ..model.command import command_language
from .base import Context

LANGUAGES = ("c", "c++", "fortran", "python")


def language(ctx: Context) -> str:
    """"python", "fortran", "c++" or "c" (also when unknown)."""
    lang = ctx.trace.job.language
    if lang in LANGUAGES:
        return lang
    return command_language(ctx.trace.job.executable) or "c"


def is_python(ctx: Context) -> bool:
    """The traced program is Python (advice in Python's idiom)."""
    return language(ctx) == "python"


def in_language(ctx: Context, python: str, c: str, *, fortran: str | None = None,
                cpp: str | None = None) -> tuple[str, str]:  # fmt: skip
    """(snippet, language) for the program: its own language's snippet when
    the check has one.  C++ takes the C snippet (the C APIs of MPI and HDF5
    are C++ too) unless a C++ one is given; a Fortran program without a
    Fortran snippet gets the C one, labelled as C."""
    lang = language(ctx)
    if lang == "python":
        return python, "python"
    if lang == "fortran" and fortran:
        return fortran, "fortran"
    if lang == "c++":
        return (cpp or c), "c++"
    return c, "c"


def snippet_fields(ctx: Context, python: str, c: str, *, fortran: str | None = None,
                   cpp: str | None = None) -> dict[str, str]:  # fmt: skip
    """:func:`in_language` as a finding's ``snippet`` and ``snippet_lang``
    keyword arguments."""
    snippet, lang = in_language(ctx, python, c, fortran=fortran, cpp=cpp)
    return {"snippet": snippet, "snippet_lang": lang}

"""Files a user hands to iopilot: opened only when regular (never waiting on
a FIFO), and settings files (thresholds, settings, tuning spaces, benchmark
set-ups) read within bounds: at most ``SETTINGS_LIMIT`` bytes and
``MAX_DEPTH`` levels of nesting.  Every error is an :class:`InputError` of
one short line naming the file, the reason and at most a clipped piece of
what is wrong, never a traceback.

Only the standard library here: ``iopilot run --settings`` reads a settings
file before it starts the program.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import InputError

SETTINGS_LIMIT = 1 << 20  # bytes of a settings file
MAX_DEPTH = 32  # levels of tables and arrays in a settings document
# An error's line stays near 200 characters: ``iopilot: error: PATH: REASON (HINT)``.
# A message longer than LONG_CHARS (it quotes too much of a file) is cut to
# MESSAGE_CHARS, the reason first.
PATH_CHARS = 80
LONG_CHARS = 150
MESSAGE_CHARS = 100
QUOTE_CHARS = 30  # a piece of the file quoted in an error


def kind_of(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symbolic link"),
             (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))  # fmt: skip
    for test, what in kinds:
        if test(mode):
            return what
    return "of an unknown kind"


def open_regular(p: str | Path, limit: int | None, *, follow_links: bool = False,
                 name: str | None = None, hint: str = "") -> tuple[int, int]:  # fmt: skip
    """A descriptor on ``p`` and its size, if it is a regular file within
    ``limit`` bytes; never waits on a FIFO, and follows a link only with
    ``follow_links`` (then the file it names must be regular).  Errors name
    the file as ``name`` (default: ``p`` as given); ``hint`` goes with a
    file that is too large."""
    import errno

    where = name if name is not None else str(p)
    try:
        st = os.stat(p) if follow_links else os.lstat(p)
    except OSError as e:
        raise InputError(where, f"cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(where, f"not a regular file ({kind_of(st.st_mode)})")
    # Non-blocking: a FIFO put in the file's place after the check above
    # opens at once, and the check below refuses it.
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(p, flags)
    except OSError as e:
        why = "not a regular file (a symbolic link)" if e.errno == errno.ELOOP else (
            f"cannot read: {e.strerror}")  # fmt: skip
        raise InputError(where, why) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (limit is not None and st.st_size > limit):
        os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(where, f"not a regular file ({kind_of(st.st_mode)})")
        raise InputError(where, f"too large: {st.st_size:,} bytes, limit {limit:,}", hint)
    return fd, st.st_size


def read_opened(fd: int, size: int, limit: int, where: str, hint: str = "") -> bytes:
    """What ``fd`` (from :func:`open_regular`, closed here) holds: ``size``
    bytes, or more if the file grew since, but never more than ``limit``."""
    chunks, got = [], 0
    try:
        while got <= limit:
            b = os.read(fd, min(max(size - got, 0) + 1, limit + 1 - got, 1 << 24))
            if not b:
                break
            chunks.append(b)
            got += len(b)
    except OSError as e:
        raise InputError(where, f"cannot read: {e.strerror}") from None
    finally:
        os.close(fd)
    if got > limit:
        raise InputError(where, f"too large: more than {limit:,} bytes, limit {limit:,}", hint)
    return b"".join(chunks)


# ---------------------------------------------------------------------------
# Short, one-line messages


def clip(text: str, chars: int = QUOTE_CHARS) -> str:
    """``text`` on one printable line of at most ``chars`` characters; a cut
    keeps the start and the end, with ``…`` between."""
    if len(text) > 8 * chars:  # the part the cut below removes, dropped first
        text = text[: 4 * chars] + text[-4 * chars:]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) <= chars:
        return text
    head = (chars - 1) * 2 // 3
    return f"{text[:head]}…{text[len(text) - (chars - 1 - head):]}"


def quote(value: Any, chars: int = QUOTE_CHARS) -> str:
    """``value`` as Python writes it (strings in quotes), clipped: for
    errors that show a user's value."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxlong, r.maxother = 2, chars, chars, chars
    r.maxlist = r.maxdict = r.maxtuple = 4
    return clip(r.repr(value), chars)


def suggest(word: str, known: Sequence[str], otherwise: str) -> str:
    """``did you mean X?`` when ``word`` is close to a known name, else ``otherwise``."""
    import difflib

    close = difflib.get_close_matches(word[:200], known, n=2)
    return f"did you mean {' or '.join(close)}?" if close else otherwise


@contextmanager
def short_errors() -> Iterator[None]:
    """An InputError raised inside comes out on one line of about 200
    characters at most, however much of a file went into it."""
    try:
        yield
    except InputError as e:
        hint_len = len(e.hint) + 3 if e.hint else 0
        if (len(e.path) <= PATH_CHARS and len(e.reason) + hint_len <= LONG_CHARS
                and f"{e.path}{e.reason}{e.hint}".isprintable()):  # fmt: skip
            raise
        reason = clip(_clip_words(e.reason), MESSAGE_CHARS)
        room = MESSAGE_CHARS - len(reason) - 3  # " (HINT)"
        hint = clip(_clip_words(e.hint), room) if e.hint and room >= 20 else ""
        raise InputError(clip(e.path, PATH_CHARS), reason, hint) from None


def _clip_words(text: str) -> str:
    """Each run of more than ``QUOTE_CHARS`` characters without a space, clipped."""
    import re

    return re.sub(rf"\S{{{QUOTE_CHARS + 1},}}", lambda m: clip(m.group()), text)


# ---------------------------------------------------------------------------
# Settings files


def settings_text(path: str | Path, bad: str) -> str:
    """The text of a settings file: a regular file (a link to one is
    followed) of at most ``SETTINGS_LIMIT`` bytes, in UTF-8; ``bad`` starts
    the error of a file that is not."""
    where = str(path)
    hint = f"a settings file holds at most {SETTINGS_LIMIT >> 20} MiB"
    fd, size = open_regular(path, SETTINGS_LIMIT, follow_links=True, hint=hint)
    data = read_opened(fd, size, SETTINGS_LIMIT, where, hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(where, f"{bad}: not UTF-8 (byte {e.start:,})") from None


def load_toml(path: str | Path) -> dict[str, Any]:
    """A TOML settings file as a dict, within the size and depth limits."""
    import tomllib

    text = settings_text(path, "not valid TOML")
    # Before the parser: its time and memory grow with the square of a
    # dotted key's length (a.a.a...: 40,000 parts take 20 s).
    if deep := _long_dotted_key(text):
        raise _too_deep(path, deep)
    return _parsed(path, text, tomllib.loads, "not valid TOML")


def load_json(path: str | Path) -> Any:
    """A JSON settings file, within the size and depth limits."""
    import json

    return _parsed(path, settings_text(path, "not JSON"), json.loads, "not JSON")


def _parsed(path: str | Path, text: str, parse: Callable[[str], Any], bad: str) -> Any:
    try:
        doc = parse(text)
    except RecursionError:  # deeper than the parser goes
        raise _too_deep(path, "") from None
    except ValueError as e:  # a syntax error, or an integer of thousands of digits
        raise InputError(str(path), f"{bad}: {clip(str(e), 100)}") from None
    check_depth(doc, path)
    return doc


# TOML strings and comments, which may hold anything: what opens one, and
# what closes it (a multi-line string may end in up to two more quotes).
_TOML_OPEN = r"\"\"\"|'''|[\"'#]"
_TOML_CLOSE = {'"""': r'(?:\\.|[^\\])*?"{3,5}', "'''": r"(?s:.*?)'{3,5}",
               '"': r'(?:\\.|[^"\\\n])*"', "'": r"[^'\n]*'", "#": r"[^\n]*"}  # fmt: skip
# A key of more than MAX_DEPTH dotted parts (bare or, once strings are
# blanked, ""): it nests deeper than the limit wherever it stands.
_KEY_PART = r'(?:(?<![A-Za-z0-9_-])[A-Za-z0-9_-]++|"")'
_LONG_KEY = rf"{_KEY_PART}(?:[ \t]*+\.[ \t]*+{_KEY_PART}){{{MAX_DEPTH},}}"


def _long_dotted_key(text: str) -> str:
    """The first dotted key of ``text`` with more than ``MAX_DEPTH`` parts, or ''."""
    import re

    m = re.search(_LONG_KEY, _blank_strings(text))
    return m.group() if m else ""


def _blank_strings(text: str) -> str:
    """``text`` with each string as ``""`` and no comments, in one pass: an
    unterminated string ends it (the parser stops there too)."""
    import re

    opening = re.compile(_TOML_OPEN)
    out, i = [], 0
    while m := opening.search(text, i):
        out.append(text[i : m.start()])
        close = re.compile(_TOML_CLOSE[m.group()]).match(text, m.end())
        if close is None:
            return "".join(out)
        out.append("" if m.group() == "#" else '""')
        i = close.end()
    out.append(text[i:])
    return "".join(out)


def check_depth(doc: Any, path: str | Path) -> None:
    """InputError when tables and arrays nest deeper than ``MAX_DEPTH``
    (the document itself is level 1); walked without recursion."""
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(doc, 1, ())]
    while stack:
        v, depth, at = stack.pop()
        if not isinstance(v, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(path, ".".join(at[:MAX_DEPTH + 1]))
        items = v.items() if isinstance(v, dict) else enumerate(v)
        stack.extend((x, depth + 1, (*at, str(k))) for k, x in items
                     if isinstance(x, dict | list))  # fmt: skip


def _too_deep(path: str | Path, at: str) -> InputError:
    where = f" at {clip(at)}" if at else ""
    return InputError(str(path), f"nested too deeply{where}: "
                      f"more than {MAX_DEPTH} levels of tables and arrays")  # fmt: skip

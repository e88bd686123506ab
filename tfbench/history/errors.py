"""Why a history store could not be opened or written, in words a user can act on (never the
driver's exception text)."""

from __future__ import annotations

from tfbench.errors import UsageError

# (text the SQLite or PostgreSQL driver's message holds, lower case) -> what it means.
_CAUSES = (
    ("database is locked", "another process held it locked for over %g s"),
    ("lock timeout", "another process held it locked for over %g s"),
    ("readonly database", "the file is read-only for this user"),
    ("read-only", "the file is read-only for this user"),
    ("permission denied", "this user may not write there"),
    ("disk is full", "the disk is full"),
    ("no space left", "the disk is full"),
    ("disk i/o error", "the disk reported an I/O error"),
    ("unable to open database file", "the file cannot be opened or created"),
    ("file is not a database", "the file is not a SQLite database"),
    ("database disk image is malformed", "the SQLite file is damaged"),
    ("connection refused", "the server refused the connection: is it running?"),
    ("could not translate host name", "the server's host name is unknown"),
    ("name or service not known", "the server's host name is unknown"),
    ("timeout expired", "the server did not answer within 10 s"),
    ("password authentication failed", "the server refused the user name or password"),
    ("does not exist", "the database named in the URL does not exist on the server"),
)


# How long a writer waits for another's lock before the store counts as locked (the store
# sets it on each connection; the locked store's phrase says it).
LOCK_WAIT_S = 60.0


class HistoryVersionError(UsageError):
    """A store written by a newer tfbench."""


def why(exc: BaseException) -> str:
    """One phrase for an exception raised while opening or writing the history."""
    if isinstance(exc, HistoryVersionError):
        return str(exc).split(":", 1)[0]
    if isinstance(exc, ModuleNotFoundError):
        return ("the %s module is not installed: pip install 'tfbench[postgresql]'"
                % (exc.name or "database driver"))
    if isinstance(exc, OSError) and exc.strerror:   # the SQLite file's directory (engine_for)
        return "its directory cannot be created (%s%s)" % (
            "%s: " % exc.filename if exc.filename else "", exc.strerror.lower())
    text = str(exc).lower()
    for needle, meaning in _CAUSES:
        if needle in text:
            return meaning % LOCK_WAIT_S if "%g" in meaning else meaning
    return "the database refused the write"

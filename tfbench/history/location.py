"""Where the results history is: --history, else TFBENCH_HISTORY, else the user's data directory.

A value is a SQLite file path, a `sqlite:///PATH` URL or a PostgreSQL URL (`postgresql://...`);
an empty value turns the history off. A malformed value is refused before anything runs.
Standard library only until a URL is checked (SQLAlchemy parses it).
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

from tfbench.errors import UsageError

ENV_VAR = "TFBENCH_HISTORY"
FILE_NAME = "history.sqlite"
SCHEMES = ("sqlite", "postgresql")


def default_path(environ: Optional[Mapping[str, str]] = None) -> str:
    """$XDG_DATA_HOME/tfbench/history.sqlite, XDG's default ~/.local/share when it is unset or
    not absolute (as the XDG Base Directory specification says)."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_DATA_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(base, "tfbench", FILE_NAME)


def chosen(flag: Optional[str], environ: Optional[Mapping[str, str]] = None) -> str:
    """The value in force: the flag when given (None: not given), else TFBENCH_HISTORY when
    set, else the default file. '' means off."""
    environ = os.environ if environ is None else environ
    if flag is not None:
        return flag
    if ENV_VAR in environ:
        return environ[ENV_VAR]
    return default_path(environ)


def url_for(value: str, what: str = "--history") -> Optional[str]:
    """The SQLAlchemy URL of a history value, None when it is '' (off). Raises UsageError, one
    line, for a value that is neither a path nor a URL of a supported database."""
    value = value.strip()
    if not value:
        return None
    if "://" not in value:
        if value.endswith(os.sep) or os.path.isdir(value):
            raise UsageError("%s=%s is a directory; give a file (e.g. %s) or a "
                             "postgresql:// URL" % (what, value, os.path.join(value, FILE_NAME)))
        return "sqlite:///" + os.path.abspath(os.path.expanduser(value))
    scheme = value.split("://", 1)[0].split("+", 1)[0].lower()
    if scheme == "postgres":   # the spelling libpq and many hosting services use
        value, scheme = "postgresql" + value[len("postgres"):], "postgresql"
    if scheme not in SCHEMES:
        raise UsageError("%s=%s: tfbench keeps its history in SQLite (a file path) or "
                         "PostgreSQL (postgresql://user@host/db), not %s" % (what, value, scheme))
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError
    try:
        url = make_url(value)
    except (ArgumentError, ValueError):
        raise UsageError("%s=%s is not a database URL (postgresql://user@host:port/database)"
                         % (what, value)) from None
    if scheme == "postgresql":
        if not url.host and not (url.query or {}).get("host"):
            raise UsageError("%s=%s names no server (postgresql://user@host:port/database)"
                             % (what, value))
        # psycopg 3 is the driver the [postgresql] extra installs.
        url = url.set(drivername="postgresql+psycopg")
    elif not url.database:
        raise UsageError("%s=%s names no file (sqlite:////absolute/path.sqlite)" % (what, value))
    return url.render_as_string(hide_password=False)


def describe(url: str) -> str:
    """The store as the console names it: the file of a SQLite store, a server URL without its
    password."""
    if url.startswith("sqlite:///"):
        return url[len("sqlite:///"):]
    from sqlalchemy.engine import make_url
    parsed = make_url(url)
    return parsed.set(drivername=parsed.get_backend_name()).render_as_string(hide_password=True)


def resolve(flag: Optional[str], environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """The URL of the history in force (None: off); UsageError for a malformed value."""
    environ = os.environ if environ is None else environ
    what = "--history" if flag is not None else (
        ENV_VAR if ENV_VAR in environ else "the default history")
    return url_for(chosen(flag, environ), what)

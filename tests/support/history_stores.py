"""The history stores the history's tests run on: every store test runs twice, on SQLite (a file
in the test's temporary directory) and on PostgreSQL (a database of its own, created for the
test on the server TFBENCH_TEST_POSTGRES_URL names and dropped after it). Without that variable
the PostgreSQL case skips in one line: .ci/run starts a throwaway server (.ci/postgres.sh).

  from history_stores import store_url, store   # noqa: F401 - fixtures
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from typing import Iterator

import pytest

from tfbench.history import location
from tfbench.history.store import Store

POSTGRES_VAR = "TFBENCH_TEST_POSTGRES_URL"


def _admin_engine(server: str):
    import sqlalchemy as sa
    return sa.create_engine(location.url_for(server), isolation_level="AUTOCOMMIT",
                            poolclass=sa.pool.NullPool)


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """The URL of a new, empty database on the test server (skips without one); dropped after,
    with whatever connection a test left open."""
    server = os.environ.get(POSTGRES_VAR, "")
    if not server:
        pytest.skip("no PostgreSQL server: %s is unset (.ci/run starts one with "
                    ".ci/postgres.sh)" % POSTGRES_VAR)
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url
    name = "tfbench_test_%s" % uuid.uuid4().hex[:16]
    admin = _admin_engine(server)
    with admin.connect() as conn:
        conn.execute(sa.text('CREATE DATABASE "%s"' % name))
    try:
        url = make_url(location.url_for(server)).set(database=name)
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name))
        admin.dispose()


@contextlib.contextmanager
def store_of(backend: str, directory) -> Iterator[str]:
    """The URL of a new store on `backend` ('sqlite': a file in `directory`)."""
    if backend == "sqlite":
        yield location.url_for(os.path.join(str(directory), "history.sqlite"))
    else:
        with postgres_database() as url:
            yield url


# A database of its own costs PostgreSQL about half a second to create and drop: those cases
# are slow ones (`-m "not slow"` runs the SQLite case of every store test).
PARAMS = [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.slow)]


@pytest.fixture(params=PARAMS)
def store_url(request, tmp_path) -> Iterator[str]:
    """A new store's URL, on SQLite and on PostgreSQL (nothing is created before it opens)."""
    with store_of(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def store(store_url) -> Iterator[Store]:
    """The new store, open."""
    s = Store(store_url)
    try:
        yield s
    finally:
        s.close()


def backend(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgresql"


def sqlite_path(url: str) -> str:
    return url[len("sqlite:///"):]


@contextlib.contextmanager
def read_only(path: str) -> Iterator[None]:
    """The file at `path` read-only for this process: mode 0444 in a 0555 directory, and for
    root, whom modes do not stop, the immutable attribute (chattr +i); skips where neither
    holds. Restored after."""
    folder = os.path.dirname(path)
    modes = {p: os.stat(p).st_mode & 0o7777 for p in (path, folder)}
    os.chmod(path, 0o444)
    os.chmod(folder, 0o555)
    immutable = False
    try:
        if os.geteuid() == 0:
            done = subprocess.run(["chattr", "+i", path], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, check=False)
            if done.returncode != 0:
                pytest.skip("running as root, and chattr +i is refused here: no file is "
                            "read-only to root")
            immutable = True
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", path], check=False)
        for p, mode in modes.items():
            os.chmod(p, mode)

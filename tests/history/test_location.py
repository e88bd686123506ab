"""history.location: which store a run adds to (--history, else TFBENCH_HISTORY, else the XDG
data directory), an empty value turning it off, a malformed one refused in one line."""

import os

import pytest

from tfbench.errors import UsageError
from tfbench.history import location


def test_the_flag_wins_over_the_variable_and_the_variable_over_the_default(tmp_path):
    env = {"TFBENCH_HISTORY": str(tmp_path / "env.sqlite"), "XDG_DATA_HOME": str(tmp_path)}
    flag = str(tmp_path / "flag.sqlite")
    assert location.resolve(flag, env) == "sqlite:///" + flag
    assert location.resolve(None, env) == "sqlite:///" + str(tmp_path / "env.sqlite")
    del env["TFBENCH_HISTORY"]
    assert location.resolve(None, env) == "sqlite:///" + str(
        tmp_path / "tfbench" / "history.sqlite")


def test_an_empty_value_turns_the_history_off(tmp_path):
    env = {"TFBENCH_HISTORY": str(tmp_path / "env.sqlite")}
    assert location.resolve("", env) is None          # --history= beats the variable
    assert location.resolve("  ", env) is None
    assert location.resolve(None, {"TFBENCH_HISTORY": ""}) is None


def test_the_default_is_in_the_xdg_data_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert location.default_path({"XDG_DATA_HOME": str(tmp_path / "data")}) == str(
        tmp_path / "data" / "tfbench" / "history.sqlite")
    # Unset, empty or relative: the specification's default, ~/.local/share.
    default = str(tmp_path / "home" / ".local" / "share" / "tfbench" / "history.sqlite")
    for env in ({}, {"XDG_DATA_HOME": ""}, {"XDG_DATA_HOME": "relative/data"}):
        assert location.default_path(env) == default


def test_a_path_becomes_an_absolute_sqlite_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert location.url_for("h.sqlite") == "sqlite:///" + str(tmp_path / "h.sqlite")
    assert location.url_for("~/h.sqlite") == "sqlite:///" + str(tmp_path / "home" / "h.sqlite")
    assert location.url_for("sqlite:////srv/h.sqlite") == "sqlite:////srv/h.sqlite"


def test_postgres_urls_take_the_psycopg_driver_and_the_libpq_spelling():
    assert location.url_for("postgresql://u:pw@db.example:5433/tfb") == \
        "postgresql+psycopg://u:pw@db.example:5433/tfb"
    assert location.url_for("postgres://u@db.example/tfb") == "postgresql+psycopg://u@db.example/tfb"
    # A socket directory given as libpq's host parameter names a server too.
    assert location.url_for("postgresql:///tfb?host=/run/postgresql").startswith(
        "postgresql+psycopg:///tfb")


def test_the_console_names_a_file_or_a_server_without_its_password():
    assert location.describe("sqlite:////srv/h.sqlite") == "/srv/h.sqlite"
    described = location.describe(location.url_for("postgresql://u:secret@db.example/tfb"))
    assert "secret" not in described and described.startswith("postgresql://u:")
    assert described.endswith("@db.example/tfb")


@pytest.mark.parametrize("value, says", [
    ("mysql://u@db/tfb", "SQLite (a file path) or PostgreSQL"),
    ("postgresql:///tfb", "names no server"),
    ("postgresql://u@db:notaport/tfb", "is not a database URL"),
    ("sqlite://", "names no file"),
    ("{dir}", "is a directory"),
    ("{dir}/", "is a directory"),
])
def test_a_malformed_value_is_refused_in_one_line(tmp_path, value, says):
    value = value.format(dir=tmp_path)
    with pytest.raises(UsageError) as caught:
        location.url_for(value)
    message = str(caught.value)
    assert says in message and "\n" not in message
    assert message.startswith("--history=")
    assert "Error" not in message and "Traceback" not in message   # no exception text


def test_the_refusal_names_where_the_value_came_from(tmp_path):
    with pytest.raises(UsageError, match=r"^TFBENCH_HISTORY=mysql://"):
        location.resolve(None, {"TFBENCH_HISTORY": "mysql://x/y"})
    with pytest.raises(UsageError, match=r"^--history=mysql://"):
        location.resolve("mysql://x/y", {"TFBENCH_HISTORY": str(tmp_path / "ok.sqlite")})


def test_nothing_is_created_by_resolving(tmp_path):
    location.resolve(str(tmp_path / "new" / "h.sqlite"), {})
    assert not os.path.exists(tmp_path / "new")

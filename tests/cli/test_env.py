import io
import json

import pytest

from tfbench.cli import env as env_cli
from tfbench.measure import environment
from tfbench.errors import UsageError


@pytest.fixture
def fast_capture(monkeypatch):
    """The real capture without importing TensorFlow (keeps this module quick)."""
    real = environment.capture
    seen = []

    def capture(argv=None, **kw):
        seen.append(argv)
        return real(argv, import_tf=False)

    monkeypatch.setattr(environment, "capture", capture)
    return seen


def test_json_format(fast_capture):
    out = io.StringIO()
    assert env_cli.main(["--format=json"], out=out) == 0
    env = json.loads(out.getvalue())
    assert env["tfbench"]["version"] and env["cpu"]["logical_cores"] >= 1
    assert env["command"] == "tfbench env --format=json"
    assert fast_capture == [["tfbench", "env", "--format=json"]]


def test_text_is_default(fast_capture):
    out = io.StringIO()
    assert env_cli.main([], out=out) == 0
    text = out.getvalue()
    assert text.startswith("tfbench ")
    assert "\nGPU: " in text and "\nCPU: " in text
    assert "cpu.logical_cores:" in text


def test_format_as_separate_argument(fast_capture):
    out = io.StringIO()
    env_cli.main(["--format", "json"], out=out)
    json.loads(out.getvalue())


def test_help():
    out = io.StringIO()
    assert env_cli.main(["--help"], out=out) == 0
    assert out.getvalue() == "usage: tfbench env [--format=text|json]\n"


@pytest.mark.parametrize("argv,message", [
    (["--format=yaml"], "--format=yaml is not one of text, json"),
    (["--format"], "--format needs a value: text or json"),
    (["--verbose"], "env: unknown argument '--verbose'"),   # tfbench: error: env: ...
])
def test_bad_arguments_are_usage_errors(argv, message):
    with pytest.raises(UsageError) as info:
        env_cli.main(argv, out=io.StringIO())
    assert str(info.value).startswith(message)

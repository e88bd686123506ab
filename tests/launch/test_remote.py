"""The hosts of `tfbench launch` (tfbench.launch.remote): --hosts read, the host program's
files; versions compared (tfbench.launch.versions)."""

import re

import pytest

from tfbench import errors
from tfbench.launch import remote as launch_remote, versions


def test_hosts_take_the_default_port_and_a_repeated_host_the_next_one():
    hosts = launch_remote.parse_hosts("gpu1, me@gpu2:2300,gpu1,[fe80::1]:9", 2222)
    assert [(h.target, h.address) for h in hosts] == [
        ("gpu1", "gpu1:2222"), ("me@gpu2", "gpu2:2300"), ("gpu1", "gpu1:2223"),
        ("fe80::1", "[fe80::1]:9")]


@pytest.mark.parametrize("text,needle", [
    ("", "--hosts needs at least one host"),
    ("h:1,h:1", "--hosts names h:1 more than once"),
    ("h:x", "'h:x' is not [user@]host[:port]"),
    ("h:70000", "port 70000 of 'h:70000' is out of range"),
])
def test_bad_hosts_are_usage_errors(text, needle):
    with pytest.raises(errors.UsageError, match=re.escape(needle)):
        launch_remote.parse_hosts(text)


def test_hosts_whose_versions_differ_from_the_chiefs_are_named():
    hosts = launch_remote.parse_hosts("a,b,c")
    same = "tfbench 0.1.0 | TensorFlow 2.21.0 | Keras 3.15.1 | Python 3.11.7"
    other = "tfbench 0.1.0 | TensorFlow 2.17.1 | Keras 3.15.1 | Python 3.10.12"
    answers = [versions.Answer(hosts[0], same), versions.Answer(hosts[1], same),
               versions.Answer(hosts[2], other)]
    assert versions.version_problems(answers) == [
        (hosts[2], "runs TensorFlow 2.17.1 where the chief (a:2222) runs TensorFlow 2.21.0")]


@pytest.mark.slow
def test_a_task_reads_files_sent_to_it_and_files_it_leaves_come_back_as_they_were(tmp_path):
    """The baseline a host's validation reads is written into the task's directory by the
    program itself, and its validate.json comes back between markers as it was."""
    import os

    from tfbench.launch.remote import RemoteTask
    task_cmd = tmp_path / "task.sh"
    # Copies --baseline into --out_dir/validate.json (out_dir made by the task, as validate
    # makes its own), leaves a second file without a final newline, exits 8.
    task_cmd.write_text(
        '#!/bin/sh\nfor a in "$@"; do case "$a" in --baseline=*) b=${a#--baseline=};; '
        '--out_dir=*) o=${a#--out_dir=};; esac; done\nmkdir -p "$o"\n'
        'cp "$b" "$o/validate.json"\nprintf "no newline" > "$o/tail.txt"\nexit 8\n')
    task_cmd.chmod(0o755)
    sent = 'line one\n  "100%" of it\\n, $HOME and `x` \'quoted\'\r\n\nlast\n'
    script = launch_remote.remote_script(
        str(task_cmd), ["validate", "--level=quick"], tag="t",
        files_in={"baseline.json": sent},
        dir_flags=[("out_dir", "validate"), ("baseline", "baseline.json")],
        files_back=["validate/validate.json", "validate/tail.txt", "validate/absent.json"])
    assert "\n" not in script
    (host,) = launch_remote.parse_hosts("127.0.0.1")
    task = RemoteTask(0, host, [], ["sh", "-c", script], str(tmp_path / "log" / "t.log"))
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp_path)
    try:
        task.start()
        task.finish()
    finally:
        if old is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = old
    assert task.exit_code == 8 and task.proc.returncode == 8
    # Text as it was, line ends read as newlines (the connection is read as text).
    assert task.file_text("validate/validate.json") == sent.replace("\r\n", "\n")
    assert task.file_text("validate/tail.txt") == "no newline"
    assert task.file_text("validate/absent.json") is None
    assert [p for p in os.listdir(tmp_path) if p.startswith("tfbench-launch.")] == []


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a b", "a;b", "$d"])
def test_task_file_names_stay_inside_its_directory(name):
    with pytest.raises(ValueError):
        launch_remote.remote_script("tfbench", [], files_back=[name])

"""The hosts of `tfbench launch` (tfbench.launch.remote): --hosts read, versions compared."""

import re

import pytest

from tfbench import errors
from tfbench.launch import remote as launch_remote


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
    answers = [launch_remote.Answer(hosts[0], same), launch_remote.Answer(hosts[1], same),
               launch_remote.Answer(hosts[2], other)]
    assert launch_remote.version_problems(answers) == [
        (hosts[2], "runs TensorFlow 2.17.1 where the chief (a:2222) runs TensorFlow 2.21.0")]

"""A validation over hosts (tfbench.launch.validate_hosts): how long a host may take. Its
steps end to end: cli/test_launch_validate.py (stand-ins), e2e/test_validate_hosts_localhost.py
(TensorFlow clusters); its rows: launch/test_hosts_verdicts.py."""

from tfbench.launch import validate_hosts as vh


def test_a_host_gets_three_times_its_levels_time_limit():
    assert vh.default_host_timeout("quick", None) == 360.0
    assert vh.default_host_timeout("standard", None) == 2700.0
    assert vh.default_host_timeout("long", 30.0) == 3.0 * (900.0 + 1800.0)
    assert vh.default_host_timeout("quick", 30.0) == 360.0     # a soak is long's alone

"""engine.actions: the probes after the timed steps, registered once, each deciding whether it
applies; run in order, the NCCL log discarded whatever happens."""

import types

import pytest

from tfbench.config.settings import make_settings
from tfbench.engine import actions, explain


def _flags(**given):
    return make_settings(given)


def test_the_registry_names_each_probe_by_its_flag_in_the_order_they_run():
    assert [a.name for a in actions.ACTIONS] == [
        "explain_scaling", "validate_devices", "validate_allreduce_json"]


@pytest.mark.parametrize("given, expected", [
    ({}, []),
    ({"validate_devices": True}, ["validate_devices"]),
    ({"validate_allreduce_json": "a.json"}, ["validate_allreduce_json"]),
    ({"validate_devices": True, "validate_allreduce_json": "a.json"},
     ["validate_devices", "validate_allreduce_json"]),
])
def test_the_validate_probes_apply_when_their_flag_asks(given, expected):
    context = types.SimpleNamespace(p=_flags(**given))
    assert [a.name for a in actions.ACTIONS[1:] if a.applies(context)] == expected


def test_explain_scaling_applies_by_explain_applies(monkeypatch):
    seen = []
    monkeypatch.setattr(explain, "applies", lambda p, plan, sp: seen.append((p, plan, sp)) or
                        True)
    context = types.SimpleNamespace(p="p", plan="plan", sp="sp")
    assert actions.ACTIONS[0].applies(context) is True
    assert seen == [("p", "plan", "sp")]


def _recording(name, applies, ran, fail=False):
    def run(context):
        ran.append(name)
        if fail:
            raise RuntimeError("probe failed")
    return actions.Action(name, lambda context: applies, run)


@pytest.fixture
def discarded(monkeypatch):
    calls = []
    monkeypatch.setattr(explain, "discard_nccl_log", lambda: calls.append("discarded"))
    monkeypatch.setattr(explain, "DeviceSteps", lambda runner: ("shared", runner))
    return calls


def test_only_the_actions_that_apply_run_in_order(discarded):
    ran = []
    registry = (_recording("a", True, ran), _recording("b", False, ran),
                _recording("c", True, ran))
    done = actions.run_all("p", "plan", "sp", "runner", "res", "log", registry)
    assert (done, ran, discarded) == (["a", "c"], ["a", "c"], ["discarded"])


def test_the_nccl_log_is_discarded_when_an_action_fails(discarded):
    ran = []
    registry = (_recording("a", True, ran, fail=True), _recording("b", True, ran))
    with pytest.raises(RuntimeError):
        actions.run_all("p", "plan", "sp", "runner", "res", "log", registry)
    assert (ran, discarded) == (["a"], ["discarded"])


def test_the_actions_share_one_set_of_device_steps(discarded):
    seen = []
    probe = actions.Action("x", lambda c: True, lambda c: seen.append(c.shared))
    actions.run_all("p", "plan", "sp", "the runner", "res", "log", (probe, probe))
    assert seen == [("shared", "the runner")] * 2 and seen[0] is seen[1]

"""tfbench.results: RunResult's run id, the figures a run never measured (empty, not 0), and its
plain-data form."""

import json
import re

from tfbench import results
from tfbench.results import RunResult


def test_each_run_id_is_its_utc_start_and_a_random_suffix():
    ids = {results.new_run_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", i) for i in ids)
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", RunResult().run_id)


def test_a_run_with_no_timed_step_measured_none_of_their_figures():
    stopped = RunResult(status="interrupted", warmup_times=[0.5])
    assert stopped.steps_run == 0
    assert stopped.unmeasured() == list(results.UNTIL_MEASURED)
    data = stopped.to_dict()
    assert all(data[name] is None for name in results.UNTIL_MEASURED)
    assert data["warmup_times"] == [0.5]
    # A figure set some other way (the steps timed before a stop) is not unmeasured.
    stopped.images_per_sec = 12.5
    assert "images_per_sec" not in stopped.unmeasured()


def test_a_run_with_timed_steps_keeps_its_zeros():
    ran = RunResult(step_times=[0.1, 0.2, 0.3])
    assert ran.steps_run == 3 and ran.unmeasured() == []
    assert ran.to_dict()["images_per_sec"] == 0.0 and ran.to_dict()["jitter"] == 0.0


def test_to_dict_is_plain_data_of_every_field():
    r = RunResult(model="resnet50", step_times=[0.1], notices=["a notice"])
    r.extra["device_name"] = "NVIDIA H100 80GB HBM3"
    data = r.to_dict()
    assert set(data) == {name for name in results.FIELD_NAMES if name != "steps_run"}
    assert json.loads(json.dumps(data)) == data
    assert data["extra"] == {"device_name": "NVIDIA H100 80GB HBM3"}
    assert data["notices"] == ["a notice"]
    data["notices"].append("changed")   # a copy: the result is unchanged
    assert r.notices == ["a notice"]

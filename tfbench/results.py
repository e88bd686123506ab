"""RunResult: the plain-data outcome of one run. No TensorFlow here.

The runner fills it; formatters (classic log, CSV, JSON, benchmark logs) read it.
"""

from __future__ import annotations

import dataclasses
import datetime
import socket
import uuid
from typing import Any, Optional


def new_run_id() -> str:
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return "%s-%s" % (stamp, uuid.uuid4().hex[:6])


@dataclasses.dataclass
class RunResult:
    run_id: str = dataclasses.field(default_factory=new_run_id)
    timestamp: str = dataclasses.field(
        default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"))
    hostname: str = dataclasses.field(default_factory=socket.gethostname)
    status: str = "ok"            # ok | oom | nan | interrupted | error
    error: str = ""
    # What ran (resolved, not as typed).
    model: str = ""
    dataset: str = ""
    mode: str = ""                # training | forward_only | eval | data_only
    precision: str = "fp32"
    xla: bool = False
    batch_size: int = 0           # per device
    global_batch_size: int = 0
    num_devices: int = 1
    device_kind: str = "cpu"
    num_workers: int = 1
    variable_update: str = ""
    data_source: str = "synthetic"
    data_format: str = "NHWC"
    image_size: int = 0
    num_batches: int = 0
    num_warmup_batches: int = 0
    accum_steps: int = 1
    # Measurements.
    step_times: list[float] = dataclasses.field(default_factory=list)  # seconds, timed steps
    warmup_times: list[float] = dataclasses.field(default_factory=list)  # seconds, warm-up steps
    losses: list[float] = dataclasses.field(default_factory=list)  # reported loss per timed step
    wall_time: float = 0.0        # timed loop wall time (legacy `total images/sec` denominator)
    images_per_sec: float = 0.0   # the `total images/sec` figure
    step_images_per_sec: float = 0.0
    step_images_per_sec_plusminus: float = 0.0
    jitter: float = 0.0
    first_step_sec: Optional[float] = None
    warmup_sec: Optional[float] = None
    final_loss: Optional[float] = None
    top_1_accuracy: Optional[float] = None
    top_5_accuracy: Optional[float] = None
    eval_examples: Optional[int] = None
    params: Optional[int] = None
    gflops_per_image: Optional[float] = None
    tflops_per_sec: Optional[float] = None
    step_line_batch: int = 0      # images one Step line's images/sec counts (this worker's)
    # How the run went, for the outputs (not figures).
    train_and_eval: bool = False  # evaluations beside training: no legacy total block
    server_task: str = ""         # a parameter-server cluster's ps or worker task it served as
    stopped_early: bool = False   # --stop_at_top_1_accuracy reached
    between_steps_sec: Optional[float] = None   # host time between timed steps, all repeats
    json_file: str = ""           # where its JSON manifest was written
    # Whether this process is the run's chief (sync.is_chief): on several workers, the chief
    # alone adds the run to the results history (tfbench launch adds its workers' rows to it).
    chief: bool = True
    # Every other figure (monitors, memory, studies, probes, the environment's changes), each
    # under its declared name (tfbench.figures).
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    notices: list[str] = dataclasses.field(default_factory=list)
    tf_version: str = ""
    keras_version: str = ""
    command: str = ""
    environment: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def steps_run(self) -> int:
        return len(self.step_times)

    def unmeasured(self) -> list[str]:
        """The figures of UNTIL_MEASURED this run never measured: those still at their 0.0
        when no timed step ran (a run stopped in warm-up or before); none once one ran."""
        if self.step_times:
            return []
        return [name for name in UNTIL_MEASURED if not getattr(self, name)]

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data; a figure never measured is None (an empty cell in the
        CSV), not 0."""
        data = dataclasses.asdict(self)
        data.update(dict.fromkeys(self.unmeasured()))
        return data


# The figures of the timed steps that RunResult holds as 0.0 until a timed step measures them.
# A run that timed none (stopped in warm-up) has no such figure: its CSV row and manifest leave
# them empty (RunResult.unmeasured), and its status says why.
UNTIL_MEASURED: tuple[str, ...] = ("images_per_sec", "step_images_per_sec",
                                   "step_images_per_sec_plusminus", "jitter")


# Names `extra` must never use: RunResult's fields and the figures derived from them. A figure
# has one name and one definition in the console, CSV and JSON (csv_out.row_for enforces it).
FIELD_NAMES: frozenset[str] = frozenset(
    [f.name for f in dataclasses.fields(RunResult)] + ["steps_run"])

"""The GPU evaluation method (`tfbench evaluate`): its configurations, each run in its own child
process (the sweep's, tfbench.sweep.study), resumable; tfbench.report.evaluation_report writes
its report.

The method, as practitioners publish GPU evaluations of image classifiers:
  * five models covering depth, compute intensity and operator types: ResNet-50, ResNet-101,
    MobileNetV3-Large, EfficientNet-B0 and a light Transformer classifier (ViT-Tiny);
  * three execution modes: native fp32 (TF32 where the GPU uses it), mixed precision (fp16 with
    dynamic loss scaling on GPUs, bf16 on CPUs) and mixed precision compiled with XLA; and,
    where TF-TRT runs (a GPU, TensorFlow built with TensorRT), a fourth for inference only:
    the fp32 model served as a TF-TRT converted SavedModel (--trt_mode, FP16 by default);
  * per model and mode, a training run (batch 32 per device, 200 timed steps after 20 warm-up)
    and an inference run (batch 1 on one device, 1,000 timed steps after 20 warm-up), each
    repeated 3 times (--num_runs: median, min, max, spread; unstable above 10%), one seed for all.

Repeats run inside each child (--num_runs=3), after one warm-up, not as 3 processes: every
repeat then measures the same compiled, autotuned program, so the spread shows what changes
while it runs (other processes, clocks, thermals), and the method stays 6 processes per model,
not 18 (on a GPU each start costs CUDA initialisation, autotuning and XLA compilation; on a
laptop CPU it would not fit the quick mode's 10 minutes). `tfbench sweep --repeats` is there to
measure start-to-start variance.

Resume: the directory's evaluation.csv says which configurations finished (any status but
interrupted); running the same command again in the same directory runs only the rest.
evaluation.json keeps the settings: another command line in that directory is refused, naming
the settings that differ, unless no run of it has succeeded yet (then it starts over; the old
rows move to evaluation.csv.replaced).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shlex
from typing import Optional, Sequence, TextIO

from tfbench import errors
from tfbench.children.process import DEFAULT_CHILD
from tfbench.config import flagdefs
from tfbench.config.argv import settings_of_flags
from tfbench.measure import nvml as nvml_lib
from tfbench.report import evaluation as ev
from tfbench.report import load
from tfbench.sweep.grid import Point
from tfbench.sweep.study import PointRecord, Sweep, SweepConfig

MODELS = ("resnet50", "resnet101", "mobilenet_v3_large", "efficientnet_b0", "vit_tiny")
MODES = ev.MODES
KINDS = ev.KINDS
SETTINGS_FILE = "evaluation.json"
ROWS_FILE = ev.ROWS_FILE

# Benchmark flags the method sets itself -> the evaluate option to use instead.
METHOD_FLAGS = {
    "model": "--models", "batch_size": "--train_batch_size (inference runs at batch 1)",
    "num_batches": "--train_steps and --latency_steps", "num_epochs": "--train_steps",
    "num_warmup_batches": "--warmup_steps", "num_runs": "--repeats", "tf_random_seed": "--seed",
    "precision": "--modes and --mixed_precision", "use_fp16": "--mixed_precision",
    "fp16_enable_auto_loss_scale": "--mixed_precision", "xla": "--modes",
    "xla_compile": "--modes", "forward_only": "--modes", "eval": "--modes",
    "csv_file": "--out_dir", "json_dir": "--out_dir",
    "trt_mode": "--modes (tftrt) and --tftrt_precision",
    "saved_model": "--modes (tftrt serves a SavedModel)",
}
TFTRT = "tftrt"   # the execution mode of TF-TRT inference (report.evaluation.MODES)


@dataclasses.dataclass(frozen=True)
class Method:
    """The settings of an evaluation (the defaults are the published method)."""

    models: tuple[str, ...] = MODELS
    modes: tuple[str, ...] = MODES
    train_batch_size: int = 32
    train_steps: int = 200
    warmup_steps: int = 20
    latency_steps: int = 1000
    repeats: int = 3
    seed: int = 1234
    image_size: int = 0            # 0: each model's default (224 for the five)
    mixed_precision: str = "auto"  # auto: fp16 on a GPU, bf16 on a CPU
    tftrt_precision: str = "FP16"  # --trt_mode of the tftrt mode's runs


# --quick: the whole method on a laptop CPU in about 10 minutes (given options win).
QUICK = {"train_steps": 5, "warmup_steps": 2, "latency_steps": 30, "image_size": 32}


@dataclasses.dataclass(frozen=True)
class Item:
    """One configuration of the method: a model, an execution mode, a run kind."""

    model: str
    mode: str
    kind: str

    @property
    def name(self) -> str:
        return "%s_%s_%s" % (self.model, self.mode, self.kind)


def configurations(method: Method, tftrt: bool = False) -> list[Item]:
    """Model by model (each model's figures complete together), modes in order, training then
    inference; the tftrt mode (inference only) when `tftrt`: where TF-TRT runs."""
    return [Item(m, mode, kind) for m in method.models for mode in method.modes for kind in KINDS
            if mode != TFTRT or (tftrt and kind == "inference")]


def item_flags(item: Item, method: Method, mixed: str, gpu_indices: str = "",
               replicate: bool = False) -> dict[str, str]:
    """The child's flags for one configuration; mixed is 'fp16' or 'bf16'; gpu_indices: the
    user's --gpu_indices (inference runs on the first of them); replicate: training on several
    GPUs keeps a copy of the variables on each (--variable_update=replicated) in every mode,
    because XLA cannot run with the default parameter_server (the engine would switch only
    mixed_xla, and its speed-up would then also measure the change of strategy)."""
    flags = {"model": item.model, "tf_random_seed": str(method.seed),
             "num_runs": str(method.repeats), "num_warmup_batches": str(method.warmup_steps)}
    if method.image_size:
        flags["image_size"] = str(method.image_size)
    if item.kind == "training":
        flags.update(batch_size=str(method.train_batch_size), num_batches=str(method.train_steps))
        if replicate:
            flags["variable_update"] = "replicated"
    else:  # latency at batch 1 is a one-device figure, whatever --num_gpus training uses
        flags.update(forward_only="true", batch_size="1", num_batches=str(method.latency_steps),
                     num_gpus="1")
        if gpu_indices:
            flags["gpu_indices"] = gpu_indices.split(",")[0].strip()
    if item.mode in ("native", TFTRT):
        flags["precision"] = "fp32"
        if item.mode == TFTRT:
            flags["trt_mode"] = method.tftrt_precision
    else:
        flags["precision"] = mixed
        if mixed == "fp16" and item.kind == "training":
            flags["fp16_enable_auto_loss_scale"] = "true"
        if item.mode == "mixed_xla":
            flags["xla"] = "true"
    return flags


def points(method: Method, mixed: str, base_flags: Sequence[str] = (),
           tftrt: bool = False) -> list[Point]:
    p = settings_of_flags(base_flags)
    replicate = (p.asks.devices > 1 and not p.is_explicit("variable_update")
                 and not (p.cluster.worker_hosts or p.cluster.ps_hosts))
    points = [Point(i, 1, {"model": it.model, "mode": it.mode, "kind": it.kind},
                    item_flags(it, method, mixed, p.devices.gpu_indices, replicate), it.name)
              for i, it in enumerate(configurations(method, tftrt))]
    if p.measurement.explain_scaling:   # inference runs on one GPU: no scaling to explain there
        for point in points:
            if point.values["kind"] != "training":
                point.flags["explain_scaling"] = "false"
    return points


def tftrt_unavailable(base_flags: Sequence[str], gpus: Optional[tuple[int, str]] = None,
                      tensorrt_reader=None) -> str:
    """Why the tftrt mode cannot run here ('' when it can): no GPU (read without TensorFlow,
    as the mixed precision is), else what TensorFlow says of its TensorRT (which imports it)."""
    from tfbench.measure import tensorrt
    if settings_of_flags(base_flags).asks.cpu:
        return "--device=cpu, and TensorRT runs on NVIDIA GPUs"
    count, why = gpus if gpus is not None else nvml_lib.cuda_gpus()
    if not count:
        return "no NVIDIA GPU visible (%s), and TensorRT runs on NVIDIA GPUs" % why
    return "; ".join(tensorrt.unavailable_reasons((tensorrt_reader or tensorrt.read)(), "gpu"))


def check_flags(base_flags: Sequence[str]) -> None:
    """UsageError naming a benchmark flag the method sets itself (and what to use instead)."""
    for token in base_flags:
        if not token.startswith("--"):
            continue
        name = token[2:].split("=", 1)[0]
        if name.startswith("no") and name[2:] in METHOD_FLAGS:
            name = name[2:]
        if name in METHOD_FLAGS:
            raise errors.UsageError("--%s is set by the evaluation method; use %s"
                                    % (name, METHOD_FLAGS[name]))
        if name not in flagdefs.BY_NAME:
            raise errors.UsageError("unknown flag --%s (tfbench evaluate --help lists the "
                                    "evaluation's options; other flags go to every run)" % name)


def resolve_mixed_precision(choice: str, base_flags: Sequence[str],
                            gpus: Optional[tuple[int, str]] = None) -> tuple[str, str]:
    """(fp16 or bf16, why): fp16 with dynamic loss scaling on GPUs, bf16 on CPUs."""
    if choice in ("fp16", "bf16"):
        return choice, "--mixed_precision=%s" % choice
    if settings_of_flags(base_flags).asks.cpu:
        return "bf16", "--device=cpu"
    count, why = gpus if gpus is not None else nvml_lib.cuda_gpus()
    if count:
        return "fp16", "%d NVIDIA GPU%s visible" % (count, "s" if count > 1 else "")
    return "bf16", "no NVIDIA GPU visible: %s" % why


def settings_record(method: Method, quick: bool, base_flags: Sequence[str]) -> dict:
    """What identifies an evaluation: the options as given, and the flags for every run."""
    fields = dataclasses.asdict(method)
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    return {"options": {**fields, "quick": quick}, "flags": list(base_flags)}


def has_ok_rows(out_dir: str) -> bool:
    path = os.path.join(out_dir, ROWS_FILE)
    return os.path.exists(path) and (load.read_results([path])["status"] == "ok").any()


def check_settings(out_dir: str, settings: dict) -> Optional[dict]:
    """The stored record of an evaluation in out_dir; None for a new one, or for one started
    with other settings that has no ok row yet (say, its first run refused a flag): it starts
    over. UsageError when one with ok rows was started with other settings, naming them."""
    path = os.path.join(out_dir, SETTINGS_FILE)
    if not os.path.exists(path):
        if os.path.exists(os.path.join(out_dir, ROWS_FILE)):
            raise errors.UsageError("%s holds %s but no %s: not an evaluation directory; choose "
                                    "another --out_dir" % (out_dir, ROWS_FILE, SETTINGS_FILE))
        return None
    try:
        with open(path) as handle:
            stored = json.load(handle)
        old_options, old_flags = stored["settings"]["options"], stored["settings"]["flags"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise errors.UsageError("cannot read %s: %s" % (path, exc)) from None
    diffs = []
    new_options = settings["options"]
    for key in sorted(set(old_options) | set(new_options)):
        old, new = old_options.get(key), new_options.get(key)
        if old != new:
            diffs.append("--%s %s here, %s there" % (key, _show(new), _show(old)))
    added = [f for f in settings["flags"] if f not in old_flags]
    dropped = [f for f in old_flags if f not in settings["flags"]]
    if added or dropped:
        diffs.append("flags for every run: %s here, %s there" % (
            " ".join(added) or "not", " ".join(dropped) or "not"))
    if diffs and not has_ok_rows(out_dir):
        return None
    if diffs:
        raise errors.UsageError("%s holds an evaluation with other settings (%s); run its own "
                                "command again to continue it (%s), or choose another --out_dir"
                                % (out_dir, "; ".join(diffs), stored.get("command", "?")))
    return stored


def _show(value) -> str:
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def save_settings(out_dir: str, settings: dict, mixed: str, why: str, command: str) -> dict:
    from tfbench import __version__
    record = {"settings": settings, "mixed_precision": mixed, "mixed_precision_why": why,
              "command": command, "tfbench_version": __version__,
              "started": datetime.datetime.now(datetime.timezone.utc).isoformat(
                  timespec="seconds")}
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, SETTINGS_FILE), "w") as handle:
        json.dump(record, handle, indent=1)
        handle.write("\n")
    return record


def finished(out_dir: str, rerun_failed: bool = False, rerun_unstable: bool = False,
             gpu_expected: bool = False) -> set[str]:
    """The configurations whose latest row in evaluation.csv needs no new run: any status but
    interrupted; not ok ones when rerun_failed; unstable ones when rerun_unstable; none that
    ran on the CPU when gpu_expected (the run that stopped the evaluation, see
    Evaluation._check_device, runs again once TensorFlow uses the GPU)."""
    done = set()
    for name, row in _latest_rows(out_dir).items():
        if row["status"] == "interrupted" or (rerun_failed and row["status"] != "ok") or \
                (rerun_unstable and row["unstable"] == 1) or \
                (gpu_expected and row["device_kind"] == "cpu"):
            continue
        done.add(name)
    return done


def statuses(out_dir: str, todo: Sequence[Point]) -> list[str]:
    """The status of each configuration's latest row in evaluation.csv (earlier
    commands' included: the evaluation is the directory), 'not run' where it has none."""
    latest = _latest_rows(out_dir)
    return [latest[p.name]["status"] if p.name in latest else "not run" for p in todo]


def _latest_rows(out_dir: str) -> dict:
    """Item name -> the latest row of that configuration in evaluation.csv."""
    path = os.path.join(out_dir, ROWS_FILE)
    if not os.path.exists(path):
        return {}
    rows = ev.with_method_columns(load.read_results([path])).drop_duplicates(
        ["model", "execution_mode", "kind"], keep="last")
    return {Item(row["model"], row["execution_mode"], row["kind"]).name: row
            for _, row in rows.iterrows()}


class Evaluation:
    """Runs the method's pending points through the Sweep (sweep.study) and its progress bar."""

    def __init__(self, method: Method, base_flags: Sequence[str], out_dir: str, mixed: str,
                 child_cmd: Sequence[str] = DEFAULT_CHILD, stream: Optional[TextIO] = None,
                 timeout_sec: Optional[float] = None, gpu_expected: str = "",
                 tftrt: bool = False, tftrt_left_out: str = ""):
        """gpu_expected: why fp16 was chosen for a GPU (NVML saw one), '' when nothing was
        assumed: a run TensorFlow then put on the CPU stops the evaluation. tftrt: TF-TRT runs
        here, so the tftrt mode (when in method.modes) runs; tftrt_left_out: why it does not
        (tfbench.cli.evaluate says it)."""
        self.method, self.mixed, self.gpu_expected = method, mixed, gpu_expected
        self.sweep = Sweep(SweepConfig(list(base_flags), [], out_dir, child_cmd=tuple(child_cmd),
                                       timeout_sec=timeout_sec, rows_file=ROWS_FILE), stream)
        self.all_points = points(method, mixed, base_flags, tftrt)
        self.tftrt_left_out = tftrt_left_out

    def check(self) -> None:
        """UsageError, before anything runs, when a child would refuse its flags."""
        self.sweep.check(self.all_points)

    def pending(self, rerun_failed: bool = False, rerun_unstable: bool = False) -> list[Point]:
        done = finished(self.sweep.config.out_dir, rerun_failed, rerun_unstable,
                        bool(self.gpu_expected))
        return [p for p in self.all_points if p.name not in done]

    def run(self, todo: Sequence[Point]) -> None:
        """Runs `todo` with the progress bar (into a directory that may hold finished runs);
        a usage error in the first run stops it."""
        self.sweep.make_dirs()
        self.sweep.run_points(todo, "runs", lambda p: "%s %s %s" % (
            p.values["model"], p.values["mode"], p.values["kind"]), self._check_device)

    def _check_device(self, point: Point, record: PointRecord) -> None:
        """NVML can see a GPU that TensorFlow cannot use (a CPU-only wheel, CUDA libraries
        missing, a driver too old for them): the runs would be fp16 on the CPU."""
        if not (self.gpu_expected and any(r.get("device_kind") == "cpu" for r in record.rows)):
            return
        # Kept apart, so that the same command, once TensorFlow uses the GPU, starts over and
        # the GPU evaluation's report holds no CPU row.
        path = os.path.join(self.sweep.config.out_dir, ROWS_FILE)
        kept = "its row is in %s" % path
        if (load.read_results([path])["device_kind"] == "cpu").all():
            os.replace(path, path + ".cpu")
            kept = "its row is in %s.cpu" % path
        raise errors.UsageError(
            "--mixed_precision=auto chose fp16 (NVML: %s), but TensorFlow ran %s on the CPU "
            "(log: %s; %s): install TensorFlow with CUDA (pip install \".[gpu]\"; `tfbench env` "
            "shows what it sees), or evaluate the CPU with --device=cpu in another --out_dir"
            % (self.gpu_expected, point.name, record.log_path, kept))


def command_line(argv: Sequence[str]) -> str:
    return shlex.join(["tfbench", "evaluate"] + list(argv))

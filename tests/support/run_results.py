"""RunResults made by hand for the report's and validation's tests: a run on an A100 (the
report's), a run on 8 H100s with its RunKey (the baseline's), a run as `tfbench compare`
matches it (compare's), and a results CSV of them."""

from tfbench.output import csv_out
from tfbench.results import RunResult
from tfbench.validate.run_figures import RunKey

H100 = "NVIDIA H100 80GB HBM3"
RUN = RunKey("resnet50", "fp16", 64, H100, 8)


def a100_result(**kw) -> RunResult:
    """A training run of resnet50 on one A100 (fp32, batch 64, 224 px) unless `kw` says else."""
    extra = kw.pop("extra", {})
    r = RunResult(model=kw.pop("model", "resnet50"), mode=kw.pop("mode", "training"),
                  precision=kw.pop("precision", "fp32"), batch_size=kw.pop("batch_size", 64),
                  num_devices=kw.pop("num_devices", 1), image_size=kw.pop("image_size", 224),
                  device_kind="gpu", **kw)
    r.global_batch_size = r.batch_size * r.num_devices
    r.extra.update({"device_name": "NVIDIA A100-SXM4-40GB", **extra})
    return r


def h100_result(images_per_sec, *, model="resnet50", precision="fp16", batch=64, devices=8,
                gpu=H100, extra=None, **kw) -> RunResult:
    """A training run of RUN's configuration at `images_per_sec` unless the keywords say else."""
    r = RunResult(model=model, mode="training", precision=precision, batch_size=batch,
                  num_devices=devices, device_kind="gpu", images_per_sec=images_per_sec, **kw)
    r.global_batch_size = batch * devices
    r.extra.update({"device_name": gpu, **(extra or {})})
    return r


def write_results_csv(path, results) -> str:
    """The results CSV a run of each of `results` would append to, at `path`."""
    csv_out.append_rows(str(path), [csv_out.row_for(r) for r in results])
    return str(path)


def compared_result(model="resnet50", batch_size=64, ips=100.0, pm=0.0, device="V100",
                    status="ok", **extra) -> RunResult:
    """A training run as `tfbench compare` matches it: at `ips` images/sec, Step +/- `pm`, on
    `device`. `extra` sets RunResult fields by name (status, precision, num_devices, ...) and
    the other CSV columns through RunResult.extra (csv_out.row_for reads the fields first)."""
    fields = {k: extra.pop(k) for k in list(extra) if k in RunResult.__dataclass_fields__}
    r = RunResult(model=model, mode="training", batch_size=batch_size,
                  global_batch_size=batch_size, images_per_sec=ips,
                  step_images_per_sec_plusminus=pm, status=status, **fields)
    r.extra.update({"device_name": device, **extra})
    return r

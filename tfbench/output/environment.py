"""The environment manifest as text: the block printed before a run, the lines naming what
changed during it, and `tfbench env`'s full report. The capture and its figures are
tfbench.measure.environment's.
"""

from __future__ import annotations

from typing import Any, Sequence

from tfbench.measure import environment

GB = float(1 << 30)   # GiB: every *_gb figure is in 2**30 bytes


def _gpu_line(env: dict[str, Any]) -> str:
    nv = env.get("nvidia") or {}
    if not nv.get("available"):
        return "GPU: none visible to NVML (%s)" % (nv.get("reason") or "not available")
    groups: dict[str, list[dict]] = {}
    for gpu in nv.get("gpus", []):
        groups.setdefault(gpu.get("name") or "unknown GPU", []).append(gpu)
    parts = []
    for name, gpus in groups.items():
        g = gpus[0]
        detail = []
        if g.get("memory_total_bytes"):
            detail.append("%.1f GiB" % (g["memory_total_bytes"] / GB))
        if g.get("pcie_gen_max"):
            detail.append("PCIe gen%s x%s" % (g["pcie_gen_max"], g.get("pcie_width_max")))
        if g.get("nvlink_active_links"):
            detail.append("%d NVLinks" % g["nvlink_active_links"])
        parts.append("%d x %s%s" % (len(gpus), name, " (%s)" % ", ".join(detail) if detail
                                    else ""))
    line = "GPU: " + ", ".join(parts or ["none"])
    line += " | driver %s" % nv.get("driver_version")
    if nv.get("cuda_driver_version"):
        line += " (CUDA %s)" % nv["cuda_driver_version"]
    return line


def summary_lines(env: dict[str, Any]) -> list[str]:
    """A few lines describing the environment, printed before the run."""
    tb = env.get("tfbench") or {}
    tf = env.get("tensorflow") or {}
    build = tf.get("build") or {}
    first = "tfbench %s" % tb.get("version")
    if tb.get("git_hash"):
        first += " (git %s%s)" % (tb["git_hash"][:10], ", modified" if tb.get("git_dirty") else "")
    tf_text = "TensorFlow %s" % tf.get("version")
    extras = [x for x in (tf.get("git_version"),
                          "CUDA %s" % build["cuda_version"] if build.get("cuda_version") else None,
                          "cuDNN %s" % build["cudnn_version"] if build.get("cudnn_version")
                          else None) if x]
    if extras:
        tf_text += " (%s)" % ", ".join(extras)
    keras = (env.get("keras") or {}).get("version")
    first += " | %s | Keras %s | Python %s" % (tf_text, keras,
                                               (env.get("python") or {}).get("version"))
    lines = [first, _gpu_line(env)]

    cpu, mem, osinfo = env.get("cpu") or {}, env.get("memory") or {}, env.get("os") or {}
    host = "CPU: %s (%s logical / %s physical cores" % (cpu.get("model"), cpu.get("logical_cores"),
                                                        cpu.get("physical_cores"))
    if cpu.get("usable_cores") and cpu.get("usable_cores") != cpu.get("logical_cores"):
        host += ", %s usable" % cpu["usable_cores"]
    if cpu.get("cgroup_cpu_limit"):
        host += ", cgroup limit %g" % cpu["cgroup_cpu_limit"]
    host += ")"
    if mem.get("total_bytes"):
        host += ", %.1f GiB RAM" % (mem["total_bytes"] / GB)
    host += " | %s %s" % (osinfo.get("system"), osinfo.get("kernel"))
    if osinfo.get("distribution"):
        host += " (%s)" % osinfo["distribution"]
    virt, cont = env.get("virtualization") or {}, env.get("container") or {}
    if virt.get("is_vm"):
        what = environment.vm_names(virt)
        host += " | VM" + (": " + what if what else "")
    elif virt.get("cloud"):
        host += " | %s (bare metal)" % virt["cloud"]
    if cont.get("in_container"):
        host += " | container: %s" % cont.get("runtime")
        if cont.get("nvidia_image"):
            host += " (NVIDIA TensorFlow %s)" % cont["nvidia_image"]
    lines.append(host)

    env_vars = env.get("env_vars") or {}
    if env_vars:
        text = " ".join("%s=%s" % (k, v) for k, v in env_vars.items())
        lines.append("Env: " + (text if len(text) <= 200 else text[:197] + "..."))
    return lines


def change_lines(changes: Sequence[dict[str, Any]]) -> list[str]:
    """One line per changed field (measure.environment.diff's figures)."""
    return ["Environment changed during the run: %s: %s -> %s"
            % (c["field"], c.get("before", "<unset>"), c.get("after", "<unset>"))
            for c in changes]


def text_report(env: dict[str, Any]) -> str:
    """Every field of the manifest, one `path: value` line each (for `tfbench env`)."""
    flat = environment.flatten(env)
    width = min(max((len(k) + 1 for k in flat), default=0), 49)   # the label and its colon
    return "\n".join("%-*s  %s" % (width, k + ":", "" if v is None else v)
                     for k, v in flat.items())

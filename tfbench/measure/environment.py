"""The environment manifest: what a result was measured on, captured before and after a run.

capture() never raises and stays fast (well under a second without a GPU once TensorFlow is
imported): every probe is a small guarded function returning None when it cannot tell.
diff() compares two captures and lists the fields that changed during the run; cpu_model()
names the CPU. The lines that show a capture are tfbench.output.environment's. Longer than
the layout guide's 420 lines: one concept, what a result ran on, kept in one module.

Environment variables are recorded only for a fixed list of performance-relevant prefixes, and
never when the name suggests a secret (KEY, TOKEN, SECRET, PASSWORD, ...): manifests get shared.
"""

from __future__ import annotations

import datetime
import fnmatch
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import time
from typing import Any, Callable, Iterable, Optional

import tfbench
from tfbench.config import startup_env
from tfbench.measure import cpu_units
from tfbench.measure import nvml as nvml_mod
from tfbench.pins import TF_DISTRIBUTIONS

ENV_PREFIXES = ("TF_", "XLA_", "NCCL_", "OMP_", "KMP_", "MKL_", "ONEDNN_", "DNNL_", "CUDA_",
                "CUDNN_", "TPU_", "HOROVOD_")
ENV_EXACT = ("XLA_FLAGS", "CUDA_VISIBLE_DEVICES", "LD_PRELOAD", "KERAS_BACKEND",
             "PYTHONHASHSEED")
# TF_ is shared with Terraform; its variables say nothing about TensorFlow (and TF_VAR_* may
# hold secrets).
ENV_EXCLUDED_PREFIXES = ("TF_VAR_", "TF_CLI_", "TF_TOKEN_", "TF_LOG", "TF_WORKSPACE", "TF_INPUT",
                         "TF_IN_AUTOMATION", "TF_PLUGIN_", "TF_REGISTRY_", "TF_DATA_DIR",
                         "TF_IGNORE", "TF_APPEND_USER_AGENT")
SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
# Version variables NVIDIA's (and similar) containers set; NVIDIA_* are taken whole.
CONTAINER_VERSION_VARS = ("CUDA_VERSION", "CUDA_DRIVER_VERSION", "CUDNN_VERSION", "NCCL_VERSION",
                          "CUBLAS_VERSION", "TRT_VERSION", "TENSORRT_VERSION", "DALI_VERSION",
                          "TENSORFLOW_VERSION", "TF_VERSION", "OPENMPI_VERSION")
# Fields that vary by themselves; diff() ignores them (fnmatch patterns on dotted paths).
VOLATILE_FIELDS = ("captured_at", "capture_sec", "memory.available_bytes",
                   "nvidia.gpus.*.pcie_gen_current", "nvidia.gpus.*.pcie_width_current")

_ARM_PARTS = {  # /proc/cpuinfo "CPU part" of Arm Ltd (implementer 0x41) cores seen in servers
    "0xd0c": "Neoverse-N1", "0xd40": "Neoverse-V1", "0xd49": "Neoverse-N2",
    "0xd4f": "Neoverse-V2", "0xd8e": "Neoverse-N3", "0xd84": "Neoverse-V3",
}
_CLOUD_VENDORS = (  # DMI sys_vendor / product_name substring -> name
    ("Amazon EC2", "Amazon EC2"), ("Google", "Google Compute Engine"),
    ("Microsoft Corporation", "Microsoft Azure / Hyper-V"), ("QEMU", "QEMU"),
    ("VMware", "VMware"), ("innotek", "VirtualBox"), ("VirtualBox", "VirtualBox"),
    ("Xen", "Xen"), ("OpenStack", "OpenStack"), ("Alibaba Cloud", "Alibaba Cloud"),
    ("DigitalOcean", "DigitalOcean"), ("Hetzner", "Hetzner"), ("Oracle", "Oracle Cloud"),
    ("Red Hat", "Red Hat KVM"), ("Nutanix", "Nutanix AHV"), ("Parallels", "Parallels"),
)


def _safe(fn: Callable[[], Any], default: Any = None) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - a probe that fails reports "unknown", never an error
        return default


def _read(path: str) -> Optional[str]:
    try:
        with open(path, errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _run(cmd: list[str], cwd: Optional[str] = None, timeout: float = 2.0) -> Optional[str]:
    """stdout of a quiet subprocess, or None (missing tool, error, non-zero exit)."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              stdin=subprocess.DEVNULL, timeout=timeout, text=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _dist_version(*names: str) -> Optional[str]:
    from importlib import metadata
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


# --- software ------------------------------------------------------------------------------
def _tensorflow(import_tf: bool) -> dict[str, Any]:
    info: dict[str, Any] = {"version": None, "git_version": None, "build": None,
                            "distribution": None}
    for name in TF_DISTRIBUTIONS:
        version = _dist_version(name)
        if version:
            info["version"], info["distribution"] = version, name
            break
    tf = sys.modules.get("tensorflow")
    if tf is None and import_tf and info["version"]:
        tf = _import_tf()
    if tf is not None:
        info["version"] = _safe(lambda: tf.version.VERSION, info["version"])
        info["git_version"] = _safe(lambda: tf.version.GIT_VERSION)
        build = _safe(lambda: dict(tf.sysconfig.get_build_info()))
        if build is not None:
            info["build"] = {k: (v if isinstance(v, (str, int, float, bool, type(None)))
                                 else str(v)) for k, v in build.items()}
    return info


def _import_tf() -> Any:
    try:
        import tensorflow as tf
        return tf
    except Exception:  # noqa: BLE001 - a broken TF install is reported as "no version"
        return None


def _keras() -> dict[str, Any]:
    keras = sys.modules.get("keras")
    version = _safe(lambda: keras.__version__) if keras is not None else None
    return {"version": version or _dist_version("keras"),
            "tf_keras_version": _dist_version("tf-keras", "tf_keras")}


def _python() -> dict[str, Any]:
    return {"version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable}


def _nvidia_packages() -> dict[str, str]:
    """pip-installed CUDA libraries (tensorflow[and-cuda] brings these) and nvidia-ml-py.

    Found by their metadata directories' names on sys.path: parsing every installed package's
    metadata took ~0.15 s per capture in a 270-package environment, all of it before the first
    step."""
    from importlib import metadata
    names = set()
    for entry in sys.path:
        try:
            listing = os.listdir(entry or ".")
        except OSError:
            continue
        for item in listing:
            stem, dot, suffix = item.rpartition(".")
            if dot and suffix in ("dist-info", "egg-info") and \
                    stem.lower().startswith(("nvidia_", "nvidia-")):
                names.add(stem.split("-")[0])
    out = {}
    for name in names:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        out[(dist.metadata.get("Name") or name).lower()] = dist.version
    return dict(sorted(out.items()))


def _tfbench() -> dict[str, Any]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(tfbench.__file__)))
    info = {"version": tfbench.__version__, "git_hash": None, "git_dirty": None}
    top = _run(["git", "rev-parse", "--show-toplevel"], cwd=root)
    if top and os.path.realpath(top) == os.path.realpath(root):
        info["git_hash"] = _run(["git", "rev-parse", "HEAD"], cwd=root)
        if info["git_hash"]:
            status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root)
            info["git_dirty"] = None if status is None else bool(status)
    return info


def version_line() -> str:
    """`tfbench 0.1.0 (git 30d835ce25) | TensorFlow 2.21.0 | Keras 3.15.1 | Python 3.11.7`, what
    `tfbench --version` prints: from package metadata, without importing TensorFlow (about
    0.1 s). `tfbench launch` compares it across hosts."""
    tb = _tfbench()
    first = "tfbench %s" % tb["version"]
    if tb.get("git_hash"):
        first += " (git %s%s)" % (tb["git_hash"][:10], ", modified" if tb.get("git_dirty") else "")
    return " | ".join([first, "TensorFlow %s" % _tensorflow(False)["version"],
                       "Keras %s" % _keras()["version"], "Python %s" % platform.python_version()])


# --- hardware ------------------------------------------------------------------------------
def _cpu() -> dict[str, Any]:
    text = _read("/proc/cpuinfo") or ""
    blocks = [b for b in text.split("\n\n") if b.strip()]
    first: dict[str, str] = {}
    sockets = set()
    for i, block in enumerate(blocks):
        fields = {}
        for line in block.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        if i == 0:
            first = fields
        if "physical id" in fields:
            sockets.add(fields["physical id"])
    model = first.get("model name") or first.get("Model") or first.get("cpu")
    if not model and first.get("CPU implementer") == "0x41":
        part = first.get("CPU part", "")
        model = "Arm " + _ARM_PARTS.get(part, "core " + part)
    flags = (first.get("flags") or first.get("Features") or "").split()
    info: dict[str, Any] = {
        "model": model or platform.processor() or None,
        "architecture": platform.machine(),
        "logical_cores": os.cpu_count(),
        "physical_cores": _safe(lambda: __import__("psutil").cpu_count(logical=False)),
        "usable_cores": _safe(cpu_units.usable_cpus),
        "sockets": len(sockets) or None,
        "numa_nodes": _safe(lambda: len([d for d in os.listdir("/sys/devices/system/node")
                                         if d.startswith("node") and d[4:].isdigit()]) or None),
        "cgroup_cpu_limit": _safe(_cgroup_cpu_limit),
        "hypervisor_flag": "hypervisor" in flags,
    }
    return info


def cpu_model() -> str:
    """The CPU's model name (as a capture records it), for a figure's machine in a report."""
    return _safe(lambda: _cpu()["model"]) or platform.machine()


def _cgroup_cpu_limit() -> Optional[float]:
    """CPUs a container may use (cgroup quota / period), None when unlimited."""
    v2 = _read("/sys/fs/cgroup/cpu.max")
    if v2:
        quota, _, period = v2.partition(" ")
        return None if quota == "max" else int(quota) / int(period or 100000)
    quota = _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
    period = _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
    if quota and period and int(quota) > 0:
        return int(quota) / int(period)
    return None


def _memory() -> dict[str, Any]:
    import psutil
    vm = psutil.virtual_memory()
    limit = None
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        value = _read(path)
        if value and value.isdigit():
            limit = int(value) if int(value) < vm.total else None
            break
    return {"total_bytes": int(vm.total), "available_bytes": int(vm.available),
            "cgroup_limit_bytes": limit}


def _os() -> dict[str, Any]:
    pretty = None
    for line in (_read("/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            pretty = line.split("=", 1)[1].strip().strip('"')
    return {"system": platform.system(), "kernel": platform.release(),
            "kernel_version": platform.version(), "distribution": pretty}


def _virtualization(cpu: dict[str, Any]) -> dict[str, Any]:
    dmi = {k: _read("/sys/class/dmi/id/%s" % k) for k in ("sys_vendor", "product_name",
                                                          "bios_vendor")}
    detect_vm = _run(["systemd-detect-virt", "--vm"], timeout=1.0)
    cloud = None
    haystack = " ".join(v for v in dmi.values() if v)
    for marker, name in _CLOUD_VENDORS:
        if marker.lower() in haystack.lower():
            cloud = name
            break
    wsl = "microsoft" in platform.release().lower()
    is_vm = bool(cpu.get("hypervisor_flag")) or bool(detect_vm and detect_vm != "none") or wsl
    hypervisor = (detect_vm if detect_vm and detect_vm != "none" else None) or (
        "wsl" if wsl else None) or (cloud if is_vm else None)
    if is_vm and hypervisor is None:
        hypervisor = "unknown"
    return {"is_vm": is_vm, "hypervisor": hypervisor, "cloud": cloud,
            "systemd_detect_virt": detect_vm, **dmi}


def _container() -> dict[str, Any]:
    runtime = None
    if os.path.exists("/.dockerenv"):
        runtime = "docker"
    elif os.path.exists("/run/.containerenv"):
        runtime = "podman"
    elif os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER"):
        runtime = "apptainer"
    else:
        detected = _run(["systemd-detect-virt", "--container"], timeout=1.0)
        if detected and detected != "none":
            runtime = detected
        else:
            cgroup = _read("/proc/1/cgroup") or ""
            for marker in ("docker", "kubepods", "containerd", "lxc"):
                if marker in cgroup:
                    runtime = marker
                    break
    versions = {k: v for k, v in os.environ.items()
                if (k.startswith("NVIDIA_") or k in CONTAINER_VERSION_VARS) and not _secret(k)}
    return {
        "in_container": runtime is not None,
        "runtime": runtime,
        "kubernetes": "KUBERNETES_SERVICE_HOST" in os.environ,
        # NGC images set NVIDIA_TENSORFLOW_VERSION (e.g. 25.02-tf2) and NVIDIA_BUILD_ID.
        "nvidia_image": os.environ.get("NVIDIA_TENSORFLOW_VERSION")
        or os.environ.get("NGC_TENSORFLOW_VERSION"),
        "version_vars": dict(sorted(versions.items())),
    }


def _secret(name: str) -> bool:
    upper = name.upper()
    return any(marker in upper for marker in SECRET_MARKERS)


def relevant_env_vars(environ: Optional[dict[str, str]] = None) -> dict[str, str]:
    environ = dict(os.environ if environ is None else environ)
    return dict(sorted((k, v) for k, v in environ.items()
                       if (k.startswith(ENV_PREFIXES) or k in ENV_EXACT) and not _secret(k)
                       and not k.startswith(ENV_EXCLUDED_PREFIXES)))


def capture(argv: Optional[list[str]] = None, *, import_tf: bool = True,
            nvml: Any = None) -> dict[str, Any]:
    """The environment manifest as plain JSON-ready data. Never raises.

    argv: the command line (default sys.argv). import_tf=False keeps TensorFlow unimported
    (version from package metadata; git hash and CUDA build info only if already imported).
    nvml: an NVML module to use instead of pynvml (tests).
    """
    start = time.monotonic()
    argv = list(sys.argv if argv is None else argv)
    env: dict[str, Any] = {
        "captured_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        "hostname": _safe(socket.gethostname),
        "command": _safe(lambda: shlex.join(argv)),
        "argv": argv,
        "env_vars": _safe(relevant_env_vars, {}),
        # Which of them tfbench set itself (CUDA_DEVICE_ORDER), as opposed to the user.
        "set_by_tfbench": _safe(startup_env.set_by_tfbench, []),
    }
    env["tfbench"] = _safe(_tfbench, {})
    env["python"] = _safe(_python, {})
    env["tensorflow"] = _safe(lambda: _tensorflow(import_tf), {})
    env["keras"] = _safe(_keras, {})
    env["nvidia_packages"] = _safe(_nvidia_packages, {})
    env["nvidia"] = _safe(lambda: nvml_mod.static_info(nvml), {"available": False, "gpus": []})
    env["cpu"] = _safe(_cpu, {})
    env["memory"] = _safe(_memory, {})
    env["os"] = _safe(_os, {})
    env["virtualization"] = _safe(lambda: _virtualization(env["cpu"]), {})
    env["container"] = _safe(_container, {})
    env["capture_sec"] = round(time.monotonic() - start, 3)
    return env


# --- figures -------------------------------------------------------------------------------
def vm_names(virt: dict[str, Any]) -> str:
    """The hypervisor and cloud names of a capture's `virtualization`, e.g. "kvm, Amazon EC2"."""
    names: list[str] = []
    for x in (virt.get("hypervisor"), virt.get("cloud")):
        if x and x != "unknown" and x not in names:
            names.append(x)
    return ", ".join(names)


def vm_warning(env: dict[str, Any], using_real_data: bool = True) -> Optional[str]:
    """On a virtual machine with real data: one line recommending synthetic data, else None."""
    virt = env.get("virtualization") or {}
    if not virt.get("is_vm") or not using_real_data:
        return None
    what = vm_names(virt) or "hypervisor detected"
    return ("Running in a virtual machine (%s): virtualised disk and network I/O make real-data "
            "results noisy; prefer synthetic data (omit --data_dir) when comparing hardware"
            % what)


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """A capture as {dotted path: value}, e.g. {"nvidia.gpus.0.power_limit_w": 400.0}."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, "%s.%s" % (prefix, k) if prefix else str(k)))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, "%s.%d" % (prefix, i)))
        return out
    return {prefix: value}


def diff(before: dict[str, Any], after: dict[str, Any],
         ignore: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The fields that changed between two captures (volatile fields ignored), in path order:
    {"field": dotted path, "before": value, "after": value}, without "before" (or "after")
    when the field was absent from that capture.

    ignore: extra fnmatch patterns on dotted paths, e.g. "env_vars.TF_GPU_THREAD_MODE" for a
    variable tfbench itself sets during the run.
    """
    patterns = tuple(VOLATILE_FIELDS) + tuple(ignore)
    old, new = flatten(before), flatten(after)
    changes = []
    for key in sorted(set(old) | set(new)):
        same = key in old and key in new and old[key] == new[key]
        if not same and not any(fnmatch.fnmatchcase(key, p) for p in patterns):
            sides = (("before", old), ("after", new))
            changes.append({"field": key, **{s: v[key] for s, v in sides if key in v}})
    return changes

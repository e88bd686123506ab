"""--validate_devices' console line, before the legacy footer, rendered from the run's figures
(tfbench/figures/table.py) and the devices' entries in the JSON manifest (device_checks,
device_checks_numeric: tfbench.engine.device_checks). Formatters only: no TensorFlow."""

from __future__ import annotations

from typing import Any

from tfbench.figures import label


def device_check_lines(s: dict[str, Any]) -> list[str]:
    """--validate_devices' summary (tfbench.engine.device_checks): `Device checks: 8 devices
    alone; slowest against the median: step alone 1.04x (GPU 5), matmul 1.09x (GPU 5), conv
    1.03x (GPU 2); gradients against GPU 0 (op determinism on, bit-exact expected): differing
    devices 1 (GPU 3), largest difference 0.00032 (bound 1e-05)`, and the devices a check
    failed on."""
    if s.get("devices_checked") is None:
        return []
    parts = ["%d %s" % (s["devices_checked"], label("devices_checked"))]
    slowest = ["%s %.2fx (%s)" % (label("slowest_%s_ratio" % name), s["slowest_%s_ratio" % name],
                                  s.get("slowest_%s_device" % name))
               for name in ("alone", "matmul", "conv")
               if s.get("slowest_%s_ratio" % name) is not None]
    if slowest:
        parts.append("slowest against the median: " + ", ".join(slowest))
    entries = s.get("device_checks") or []
    if s.get("devices_differing") is not None:
        numeric = s.get("device_checks_numeric") or {}
        how = ""
        if numeric.get("reference"):
            how = " against %s (%s)" % (numeric["reference"], (
                "op determinism on, bit-exact expected" if numeric.get("deterministic") else
                "no op determinism: %s; within the bound expected"
                % numeric.get("determinism_unavailable")))
        names = [e["device"] for e in entries if e.get("agrees") is False]
        diff = s.get("max_grad_rel_diff")
        text = "gradients%s: %s %d%s, %s %s" % (
            how, label("devices_differing"), s["devices_differing"],
            " (%s)" % ", ".join(names) if names else "", label("max_grad_rel_diff"),
            "not finite" if diff is None else "%.2g" % diff)
        if numeric.get("bound") is not None:
            text += " (bound %g)" % numeric["bound"]
        parts.append(text)
    failed = ["%s (%s)" % (e["device"], "; ".join("%s: %s" % item for item in e["errors"].items()))
              for e in entries if e.get("errors")]
    if failed:
        parts.append("failed: " + ", ".join(failed))
    return ["Device checks: " + "; ".join(parts)]

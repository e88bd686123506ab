"""Training-time estimate: hours to train = samples x epochs / (images/sec x utilisation).

Utilisation is the fraction of the benchmark's images/sec a real training run sustains once
data loading, evaluation, checkpointing and logging take their share (--estimate_utilization;
its default is the flag table's). Pass the run's images/sec (the median when --num_runs > 1). The console line is
tfbench.output.console's.
"""

from __future__ import annotations

from typing import Any, Optional

from tfbench.errors import UsageError


def estimate_hours(images_per_sec: float, dataset_size: int, epochs: float,
                   utilization: float) -> float:
    """Hours to process dataset_size x epochs samples at images_per_sec x utilization."""
    if dataset_size <= 0:
        raise UsageError("--estimate_dataset_size must be positive, got %s" % dataset_size)
    if epochs <= 0:
        raise UsageError("--estimate_epochs must be positive, got %s" % epochs)
    if not 0 < utilization <= 1:
        raise UsageError("--estimate_utilization must be in (0, 1], got %s" % utilization)
    if images_per_sec <= 0:
        raise ValueError("images_per_sec must be positive to estimate a training time")
    return dataset_size * epochs / (images_per_sec * utilization) / 3600.0


def estimate_summary(images_per_sec: Optional[float], dataset_size: int, epochs: float,
                     utilization: float) -> dict[str, Any]:
    """The estimate for the CSV/JSON; empty when no dataset size was given (the flag is off).

    estimated_train_hours is None when the run measured no throughput (a failed run).
    """
    if not dataset_size:
        return {}
    hours = (estimate_hours(images_per_sec, dataset_size, epochs, utilization)
             if (images_per_sec or 0) > 0 else None)
    return {
        "estimated_train_hours": hours,
        "estimate_dataset_size": int(dataset_size),
        "estimate_epochs": float(epochs),
        "estimate_utilization": float(utilization),
        "estimate_images_per_sec": images_per_sec,
    }

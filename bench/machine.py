"""Where a bench figure was measured: the machine (cores, threads, device, versions) and its
load (load average, CPU pressure) before and after, recorded in bench/run.py's JSON."""

from __future__ import annotations

import os
import platform


def _cpu_pressure() -> float | None:
    """``some avg60`` of /proc/pressure/cpu: % of the last minute some task waited for a CPU."""
    try:
        with open("/proc/pressure/cpu") as f:
            return float(f.readline().split("avg60=")[1].split()[0])
    except (OSError, IndexError, ValueError):
        return None


def machine() -> dict:
    """Where the figures come from: cores, torch threads, device, library versions."""
    import flwr
    import ray
    import torch

    cpu_model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu_model = next((ln.split(":", 1)[1].strip() for ln in f
                              if ln.startswith("model name")), cpu_model)
    except OSError:
        pass
    return {
        "cpu": cpu_model, "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "device": "cuda" if torch.cuda.is_available() else "cpu",
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "python": platform.python_version(), "platform": platform.platform(),
        "torch": torch.__version__, "flwr": flwr.__version__, "ray": ray.__version__,
        "memory_GiB": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
    }


def load() -> dict:
    return {"load_avg_1m": os.getloadavg()[0], "cpu_pressure_some_avg60": _cpu_pressure()}

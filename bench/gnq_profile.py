"""Where the audited step's extra time goes, per layer kind and phase; the ``gnq`` section
of bench/run.py.  Run alone: ``python bench/gnq_profile.py [KEY ...]`` (keys of
``bench.gnq.OVERHEAD_MODELS``; default the CNN on 8x8 and 32x32 and the transformer).

:func:`phase_profile` splits ``audited - plain`` of one step into

* ``hooks``: the forward hooks and the tensor hooks they attach, doing nothing (a step
  with such hooks minus the plain step);
* ``capture``: the auditor's own bookkeeping with every kernel a no-op (keeping each
  layer's input until its backward hook, the batch checks, adding a zero contribution
  to K), minus the hooks step;
* per layer kind (Linear, Conv2d, LayerNorm, ...): its kernels run alone on tensors
  captured from the step (interleaved medians), split by ``torch.profiler`` into
  ``per-sample`` (float32 work: per-sample gradients, unfolded patches, normalised
  inputs, sums), ``float64 conversion`` (copies to float64) and ``Gram float64`` (the
  float64 products that form K: the ghost forms', and those of kernels that do not hand
  back rows), in proportion to the operators' CPU time there;
* ``all Rows``: the per-sample rows the kernels hand back (:class:`fedaudit.gnq.ghost.Rows`)
  converted into the auditor's float64 buffer and multiplied, for all layers at once
  (before that change each kernel did this itself, inside its own phases);
* ``solve``: ``auditor.scores()`` on the captured K (symmetrise, float64 solve);
* ``unattributed``: what the measured extra leaves over (caches and memory shared with
  the step, allocator, timing noise).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.gnq import (OVERHEAD_MODELS, _interleaved_medians, memory_ratio,  # noqa: E402
                       overhead_ratio, speedup_vs_naive, step_setup)
from fedaudit.gnq import GhostAuditor  # noqa: E402
from fedaudit.gnq.ghost import GramAccumulator, Rows  # noqa: E402
from fedaudit.gnq.kernels import find_kernel  # noqa: E402
from fedaudit.training.losses import batch_loss  # noqa: E402

PROFILED = ("", "_cnn32", "_transformer")
KERNEL_PHASES = ("per-sample", "float64 conversion", "Gram float64")
_CONVERSIONS = ("aten::to", "aten::_to_copy", "aten::copy_")


def _phase_of(event) -> str:
    """The phase of one operator called directly by a kernel (its whole CPU time)."""
    if event.name in _CONVERSIONS:
        return "float64 conversion"
    dtypes = getattr(event, "input_dtypes", None) or []
    return "Gram float64" if "double" in dtypes else "per-sample"


def _flat(part) -> list:
    return [q for p in part for q in _flat(p)] if isinstance(part, list) else [part]


def _captured_layers(model, x, y) -> list[tuple[str, torch.nn.Module, torch.Tensor, torch.Tensor]]:
    """(kind, module, a, b) of every audited layer, from one plain forward and backward."""
    auditor = GhostAuditor(model)
    out: list = []
    handles = []
    for _, module, _ in auditor._layers:
        def fwd(mod, inputs, output):
            a = inputs[0].detach()
            output.register_hook(lambda g: out.append((type(mod).__name__, mod, a, g)))
        handles.append(module.register_forward_hook(fwd))
    batch_loss(model(x), y).backward()
    for h in handles:
        h.remove()
    model.zero_grad(set_to_none=True)
    return out


def phase_profile(key: str = "", repeats: int = 100, warmup: int = 10, seed: int = 0) -> dict:
    """Milliseconds per step by phase and layer kind for ``OVERHEAD_MODELS[key]``.

    Returns ``{"model", "plain_step_ms", "audited_step_ms", "extra_ms", "rows": [{"kind",
    "phase", "ms"}], "unattributed_ms"}``; kernel times are the kernels' own (interleaved
    medians on captured tensors, the float32 inputs the auditor hands them), split into
    :data:`KERNEL_PHASES` by the operators' CPU time under ``torch.profiler`` (whose
    per-operator overhead falls alike on all phases).
    """
    model, opt, x, y, label = step_setup(key, seed)
    auditor = GhostAuditor(model, loss_reduction="mean")
    B = x.shape[0]
    noop = GhostAuditor(model, loss_reduction="mean")
    noop._layers = [(n, m, lambda *args: torch.zeros(B, B, dtype=torch.float64))
                    for n, m, _ in noop._layers]
    layers = [m for _, m, _ in auditor._layers]

    def step(capture=None, hooks=False) -> None:
        opt.zero_grad(set_to_none=True)
        handles = []
        if hooks:
            def fwd(mod, inputs, output):
                output.register_hook(lambda g: None)
            handles = [m.register_forward_hook(fwd) for m in layers]
        if capture is not None:
            with capture.capture():
                batch_loss(model(x), y).backward()
        else:
            batch_loss(model(x), y).backward()
        for h in handles:
            h.remove()
        opt.step()

    def audited() -> None:
        step(auditor)
        auditor.scores()

    t = _interleaved_medians({"plain": step, "hooks": lambda: step(hooks=True),
                              "capture": lambda: step(noop), "audited": audited},
                             repeats, warmup)
    step(auditor)  # leaves a captured K for the solve
    by_kind: dict[str, list] = defaultdict(list)
    for kind, module, a, b in _captured_layers(model, x, y):
        by_kind[kind].append((module, a, b))
    def run_kind(kind: str):
        def fn() -> list:
            return [find_kernel(m)(m, a, b, auditor.strategy) for m, a, b in by_kind[kind]]
        return fn

    kernels = {kind: run_kind(kind) for kind in by_kind}
    parts = [fn() for fn in kernels.values()]
    acc = GramAccumulator()

    def rows_to_gram() -> None:  # what the auditor does with the kernels' Rows
        acc.reset()
        for p in parts:
            acc.add([q if isinstance(q, Rows) else None for q in _flat(p)])
        acc.result()

    kt = _interleaved_medians({**kernels, "rows": rows_to_gram, "solve": auditor.scores},
                              repeats, warmup)
    split: dict[str, dict[str, float]] = {k: defaultdict(float) for k in by_kind}
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                record_shapes=True) as prof:
        for _ in range(max(3, repeats // 10)):
            for kind, fn in kernels.items():
                with torch.profiler.record_function(f"gnq.{kind}"):
                    fn()
    for e in prof.events():
        parent = e.cpu_parent
        if parent is not None and parent.name.startswith("gnq."):
            split[parent.name[4:]][_phase_of(e)] += e.cpu_time_total
    rows = [{"kind": "-", "phase": "hooks", "ms": 1e3 * (t["hooks"] - t["plain"])},
            {"kind": "-", "phase": "capture", "ms": 1e3 * (t["capture"] - t["hooks"])}]
    for kind in by_kind:
        total = sum(split[kind].values()) or 1.0
        for phase in KERNEL_PHASES:
            rows.append({"kind": kind, "phase": phase,
                         "ms": 1e3 * kt[kind] * split[kind][phase] / total})
    rows.append({"kind": "all Rows", "phase": "float64 conversion + Gram (one product)",
                 "ms": 1e3 * kt["rows"]})
    rows.append({"kind": "-", "phase": "solve", "ms": 1e3 * kt["solve"]})
    extra = 1e3 * (t["audited"] - t["plain"])
    return {"model": label, "plain_step_ms": 1e3 * t["plain"],
            "audited_step_ms": 1e3 * t["audited"], "extra_ms": extra, "rows": rows,
            "unattributed_ms": extra - sum(r["ms"] for r in rows), "repeats": repeats}


def print_profiles(profiles: dict[str, dict], console) -> None:
    """One rich table: a row per (layer kind, phase), a column per profiled step."""
    from rich.table import Table

    t = Table(title="GNQ audit: where the extra time per step goes (ms, medians)")
    t.add_column("layer kind")
    t.add_column("phase")
    keys = list(profiles)
    for k in keys:
        t.add_column(profiles[k]["model"], justify="right")
    cells: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for k in keys:
        for r in profiles[k]["rows"]:
            cells[(r["kind"], r["phase"])][k] = r["ms"]
    for (kind, phase), vals in cells.items():
        t.add_row(kind, phase, *[f"{vals[k]:.2f}" if k in vals else "" for k in keys])
    for label, field in (("unattributed", "unattributed_ms"), ("extra (audited - plain)",
                                                               "extra_ms"),
                         ("plain step", "plain_step_ms")):
        t.add_row("", label, *[f"{profiles[k][field]:.2f}" for k in keys])
    console.print(t)


def run_section(quick: bool) -> dict:
    """bench/run.py's ``gnq`` section: the step overheads with their floors, the profile
    of :data:`PROFILED`, the memory ratio and the speed-up over naive."""
    out: dict = {}
    for key, spec in OVERHEAD_MODELS.items():
        if quick and key == "_resnet18":
            continue
        small = key == ""
        repeats = (100 if quick else 300) if small else (20 if quick else 60)
        if key in ("_resnet18", "_transformer4"):
            repeats = 10
        out[f"overhead{key}"] = overhead_ratio(key, repeats=repeats,
                                               warmup=max(2, repeats // 10))
    out["profile"] = {key: phase_profile(key, repeats=30 if quick else 100,
                                         warmup=3 if quick else 10) for key in PROFILED}
    out |= {"memory": memory_ratio(), "speedup": speedup_vs_naive(repeats=3 if quick else 7)}
    return out


GOALS = {"": "<= 1.35", "_cnn32": "<= 1.15", "_transformer": "<= 1.2",
         "_transformer4": "<= 1.2", "_resnet18": "<= 1.2"}


def headline_rows(g: dict, table) -> None:
    """The headline table's GNQ rows: each step's ratio with its goal and floors."""
    for key, goal in GOALS.items():
        if f"overhead{key}" not in g:
            continue
        o = g[f"overhead{key}"]
        table.add_row(f"gnq_overhead_ratio{key}", f"{o['overhead_ratio']:.3g}", goal,
                      f"{o['model']}, batch {o['batch']}: {o['audited_step_ms']:.2f} / "
                      f"{o['plain_step_ms']:.2f} ms, {o['repeats']} repeats; floor "
                      f"1 + Gram/step FLOPs = {o['floor']:.3f} (float64 Gram: "
                      f"{o['floor_float64']:.3f}; + per-sample gradients beside autograd's: "
                      f"{o['floor_unfused']:.3f})")


if __name__ == "__main__":
    from rich.console import Console

    print_profiles({k: phase_profile(k) for k in (sys.argv[1:] or PROFILED)}, Console())

#!/usr/bin/env bash
# GPU readiness check: the GNQ and Res-MIA figures, a short cifar10-resnet18 run and
# reconstruction-gpu's Inverting Gradients with its defaults, on CUDA.
#
#   bash bench/gpu_check.sh [OUT_DIR] [PARTS]   (default OUT_DIR: ./gpu-check; PARTS: a
#                                                 comma list of figures, training,
#                                                 reconstruction; default all three)
#
# Prints the same ratios as bench/run.py (gnq_overhead_ratio{,_cnn32,_transformer,...} with their
# floors, resmia_cost_ratio for the CNN and ResNet-18) measured on the GPU, then runs
# cifar10-resnet18 shortened to 2 rounds of 4 clients, 1 local epoch, on ../shared/data's
# CIFAR-10 JPEG subset (10k images; see its README) or, without it, the
# scenario's own data settings, then reconstruction-gpu (ResNet-18, 4,000 iterations, the
# defaults of docs/validation.md section 22) at batch 1 and 4 on the same data, printing
# each run's PSNR / SSIM line. Meant to take a few minutes on one modern GPU.
# Without a CUDA device it says so and exits 0 having run nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
OUT="${1:-gpu-check}"
PARTS=",${2:-figures,training,reconstruction},"
IFS=, read -ra WANTED <<< "${2:-figures,training,reconstruction}"
for p in "${WANTED[@]}"; do
    case "$p" in figures|training|reconstruction) ;;
        *) echo "gpu_check: unknown part '$p'; allowed: figures, training, reconstruction" >&2
           exit 2 ;;
    esac
done
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cd "$ROOT"

if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check: no CUDA GPU visible to torch on this machine -- nothing was run."
    exit 0
fi
"$PY" -c 'import torch; print("gpu_check: CUDA device:", torch.cuda.get_device_name(0), "| torch", torch.__version__)'

DATA=()
if [ -f ../shared/data/cifar10-jpeg-10k.npz ]; then
    DATA=(--set data.dataset=npz --set "data.path=$(cd ../shared/data && pwd)/cifar10-jpeg-10k.npz")
fi

if [[ "$PARTS" == *,figures,* ]]; then
echo "== GNQ step overhead (audited / plain step, batch 32) and Res-MIA cost on CUDA =="
timeout 420 "$PY" - "$OUT/gpu-figures.json" <<'PYEOF'
import json, sys, time
sys.path.insert(0, ".")
from bench.gnq import OVERHEAD_MODELS, overhead_ratio
from bench.resmia import resmia_cost

out = {}
for key in OVERHEAD_MODELS:
    t0 = time.perf_counter()
    r = overhead_ratio(key, repeats=50 if key != "_resnet18" else 20, warmup=5, device="cuda")
    out[f"gnq_overhead_ratio{key}"] = r["overhead_ratio"]
    out[f"gnq_overhead_floor{key}"] = r["floor"]
    out[f"gnq_overhead{key}"] = r
    print(f"gnq_overhead_ratio{key:10s} {r['overhead_ratio']:.3f}  (floor {r['floor']:.3f}; "
          f"{r['audited_step_ms']:.2f} / {r['plain_step_ms']:.2f} ms, {r['model']}, "
          f"{time.perf_counter() - t0:.0f} s)", flush=True)
for name, ch, size, n in (("cnn", 1, 8, 4096), ("resnet18", 3, 32, 1024)):
    r = resmia_cost(name, ch, size, n=n, repeats=5, device="cuda")
    suffix = "" if name == "cnn" else "_resnet18"
    out[f"resmia_cost_ratio{suffix}"] = r["resmia_cost_ratio"]
    out[f"resmia{suffix}"] = r
    print(f"resmia_cost_ratio{suffix:10s} {r['resmia_cost_ratio']:.3f}  (goal <= K+1 = "
          f"{r['goal_max']}; {r['model']})", flush=True)
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
print("figures:", sys.argv[1])
PYEOF
fi

if [[ "$PARTS" == *,training,* ]]; then
echo "== short cifar10-resnet18 on CUDA (2 rounds, 4 clients, 1 local epoch) =="
start=$(date +%s)
timeout 600 "$PY" -m fedaudit.cli run cifar10-resnet18 --out "$OUT/runs" --no-report \
    "${DATA[@]}" --set federation.rounds=2 --set federation.num_clients=4 \
    --set train.local_epochs=1 --set train.device=cuda --set attack.members_per_client=100
echo "gpu_check: cifar10-resnet18 (short) took $(( $(date +%s) - start )) s; results under $OUT/runs"
fi

FAILED=0
if [[ "$PARTS" == *,reconstruction,* ]]; then
for B in 1 4; do
    echo "== reconstruction-gpu at batch $B (ResNet-18, Inverting Gradients' defaults) =="
    start=$(date +%s)
    rc=0
    timeout 300 "$PY" -m fedaudit.cli run reconstruction-gpu --out "$OUT/runs" --no-report \
        "${DATA[@]}" --set data.client_samples=$B --set train.batch_size=$B \
        > "$OUT/reconstruction-b$B.out" || rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "gpu_check: reconstruction-gpu (batch $B) failed with exit code $rc"
        FAILED=1
        continue
    fi
    run_dir=$(tail -1 "$OUT/reconstruction-b$B.out")
    "$PY" - "$run_dir/results.json" <<'PYEOF' || FAILED=1
import json, sys
r = json.load(open(sys.argv[1]))
for m, p in r["reconstruction"]["pooled"].items():
    print(f"reconstruction {m}: PSNR {p['psnr']:.1f} dB, SSIM {p['ssim']:.3f} (prior "
          f"{p['prior_ssim']:.3f}), {p['samples']} samples, {r['reconstruction']['seconds']:.0f} s")
PYEOF
    echo "gpu_check: reconstruction-gpu (batch $B) took $(( $(date +%s) - start )) s"
done
fi
exit "$FAILED"

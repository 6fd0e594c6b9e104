#!/usr/bin/env bash
# The GPU benchmark: the peer (bench/peer_torch.py, when python3 has torch),
# then bench_cuda with the peer's times, in one run on the same GPU; with
# NCU="workload ...", Nsight Compute's figures (time, achieved DRAM
# bandwidth) for every kernel of those workloads' first FLOAT32 NCHW case.
#
#   bench/gpu_bench.sh [BUILD_DIR]       # logs in $LOG_DIR (default BUILD_DIR/bench-logs)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
logs=${LOG_DIR:-$build/bench-logs}
mkdir -p "$logs"
peer=/dev/null
if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
  PYTHONUNBUFFERED=1 python3 bench/peer_torch.py > "$logs/peer.txt" 2> "$logs/peer.err" || cat "$logs/peer.err"
  peer="$logs/peer.txt"
else
  echo "gpu_bench: python3 has no CUDA torch; no peer column"
fi
"$build/bench/bench_cuda" --peer "$peer" | tee "$logs/bench_cuda.txt"
for workload in ${NCU:-}; do
  # The first case (FLOAT32, NCHW): its three dispatches.
  ncu --launch-count 8 --metrics \
    gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    "$build/bench/bench_cuda" --only "$workload" --first-case > "$logs/ncu_one.txt" 2>&1
  echo "== ncu $workload (FLOAT32 NCHW, first dispatch)" | tee -a "$logs/ncu.txt"
  grep -E '^  [a-zA-Z_].*\(|gpu__time_duration|dram__bytes|dram__throughput|sm__throughput' "$logs/ncu_one.txt" \
    | head -40 | tee -a "$logs/ncu.txt"
  rm -f "$logs/ncu_one.txt"
done

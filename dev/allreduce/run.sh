#!/usr/bin/env bash
# Open MPI's non-blocking allreduce schedules on the lab (docs/DIST.md, Network model):
# 4 hosts at 10 Mbit/s (scripts/netlab.sh, needs root), ResNet-20 fp32, 10 steps each,
# with coll_libnbc_iallreduce_algorithm A: 0 = libnbc's own choice (with this build's
# dist/comm_mpi.c, which sends large buffers from a copy), 1 ring, 2 binomial tree,
# 3 Rabenseifner, 4 recursive doubling. Logs: dev/allreduce/algA.10mbit.txt ("done:" gives
# s/step; a launch that hung at start was retried). in_place.*: the lab's fp32 runs
# (scripts/netlab_runs.py) with MPI_IN_PLACE for every buffer size (libnbc's binomial
# tree); their last lines give each host's link bytes. A queued training run
# (scripts/repro_runs.py) is paused meanwhile.
#   sudo DATA_DIR=... dev/allreduce/run.sh            ALGS="0 1 2 3 4" STEPS=10 BW=10mbit
cd "$(dirname "$0")/../.." || exit 1
: "${DATA_DIR:?set DATA_DIR}"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
bw=${BW:-10mbit}
paused=$(pgrep -f "repro-bin-./train_")
for p in $paused; do kill -STOP "$p"; done
for alg in ${ALGS:-0 1 2 3 4}; do
    scripts/netlab.sh mpirun 4 "$bw" --mca coll_libnbc_iallreduce_algorithm "$alg" ./train_resnet --depth 20 \
        --batch 32 --epochs 20 --lr 0.1 --schedule cosine --momentum 0.9 --wd 5e-4 --print-every 5 \
        --eval-every -1 --codec fp32 --steps "${STEPS:-10}" --bandwidth "$bw" --latency 0 --quiet \
        >"dev/allreduce/alg$alg.$bw.txt" 2>&1
    echo "algorithm $alg: $(grep '^done:' "dev/allreduce/alg$alg.$bw.txt")"
done
for p in $paused; do kill -CONT "$p"; done

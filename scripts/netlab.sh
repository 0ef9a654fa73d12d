#!/usr/bin/env bash
# A lab of hosts on one machine: N network namespaces joined by bandwidth-limited links,
# for running the trainers under mpirun as across real hosts (over TCP, no shared memory).
#
#   scripts/netlab.sh up N RATE            hosts gcx-h0 .. gcx-h{N-1} at 198.18.0.1 .. N, each
#                                          linked to a bridge (198.18.0.254, where mpirun runs)
#                                          by a veth pair shaped to RATE in both directions
#   scripts/netlab.sh down                 remove every namespace, link and file it made, ending
#                                          what still runs in its hosts
#   scripts/netlab.sh mpirun N RATE ARGS   up, `mpirun -np N ARGS` with one rank per host, down
#   scripts/netlab.sh stats                bytes each host's link sent and received
#   scripts/netlab.sh rsh HOST CMD...      Open MPI's launch agent: CMD inside HOST's namespace
#
# RATE: a tc rate such as 10mbit, 100mbit, 1gbit. Shaping is tc's token bucket (tbf) on
# both ends of each link, so every host sends and receives at RATE at most (full duplex);
# this kernel has no netem, so no delay is added: the latency is that of the veth pairs
# (tens of microseconds), and the network model's --latency has nothing to compare with.
# The addresses are in the benchmarking range 198.18.0.0/15 and exist only inside the
# namespaces and on the bridge, which this script creates and removes; nothing is routed
# elsewhere. Needs root and network namespaces; says so and exits 3 otherwise.
#
# Real hosts: the same mpirun options apply with a hostfile of real machines (one line per
# host, "node1 slots=4"), passwordless ssh instead of this launch agent, and the interface
# or subnet that carries the traffic in btl_tcp_if_include / oob_tcp_if_include (and
# rtc_hwloc_vmhole none if a daemon dies at launch, below); as root
# (containers) Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
set -euo pipefail

NET=198.18.0
BR=gcxbr0
STATE=/run/gcx-netlab
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "netlab: $*" >&2; exit 3; }

need_root() {
    [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veth, tc)"
    command -v ip >/dev/null && command -v tc >/dev/null || die "needs ip and tc (Debian: iproute2)"
    ip netns add gcx-probe 2>/dev/null || die "cannot create network namespaces here"
    ip netns del gcx-probe
}

shape() { # namespace-or-empty dev rate
    local ns=$1 dev=$2 rate=$3
    # burst: at least rate / 250 (a 4 ms bucket) and 64 KiB, so TCP's segments pass whole
    local bits
    bits=$(echo "$rate" | awk '{ v = $1 + 0; u = tolower($1); sub(/^[0-9.]+/, "", u);
        m = u ~ /^k/ ? 1e3 : u ~ /^m/ ? 1e6 : u ~ /^g/ ? 1e9 : 1; print v * m }')
    local burst=$(( $(printf '%.0f' "$bits") / 8 / 250 ))
    [ "$burst" -lt 65536 ] && burst=65536
    ${ns:+ip netns exec "$ns"} tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency 200ms
}

down() {
    # what still runs in a host (a rank, Open MPI's daemon) ends with it
    for ns in $(ip netns list 2>/dev/null | awk '/^gcx-h[0-9]+/ {print $1}'); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
        ip netns del "$ns" 2>/dev/null || true
    done
    ip link del "$BR" 2>/dev/null || true
    for l in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^gcxv[0-9]+/ {sub(/@.*/, "", $2); print $2}'); do
        ip link del "$l" 2>/dev/null || true
    done
    rm -rf "$STATE"
}

up() {
    local n=$1 rate=$2
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] || die "N must be 1..16, got '$n'"
    need_root
    down
    mkdir -p "$STATE"
    ip link add "$BR" type bridge
    ip addr add "$NET.254/24" dev "$BR"
    ip link set "$BR" up
    : >"$STATE/hosts"
    for i in $(seq 0 $((n - 1))); do
        local ns=gcx-h$i addr=$NET.$((i + 1))
        ip netns add "$ns"
        ip link add "gcxv$i" type veth peer name eth0 netns "$ns"
        ip link set "gcxv$i" master "$BR" up
        ip netns exec "$ns" ip addr add "$addr/24" dev eth0
        ip netns exec "$ns" ip link set eth0 up
        ip netns exec "$ns" ip link set lo up
        shape "$ns" eth0 "$rate"   # what the host sends
        shape "" "gcxv$i" "$rate"  # what it receives
        echo "$addr $ns" >>"$STATE/hosts"
    done
    echo "$rate" >"$STATE/rate"
    echo "netlab: $n hosts at $NET.1..$n, links of $rate each way, bridge $NET.254"
}

rsh() {
    local host=$1
    shift
    local ns
    ns=$(awk -v h="$host" '$1 == h {print $2}' "$STATE/hosts" 2>/dev/null)
    [ -n "$ns" ] || die "no lab host $host (scripts/netlab.sh up first)"
    # each host its own temporary folder, as real hosts have: the lab's hosts share this
    # machine's /tmp and its host name, so Open MPI's daemons would all create their
    # session folder (/tmp/ompi.HOST.UID/jf.JOB) at the same path at the same time, and
    # one of them, now and then, fails on the other's mkdir ("File exists") and dies
    mkdir -p "$STATE/tmp/$ns"
    exec ip netns exec "$ns" env TMPDIR="$STATE/tmp/$ns" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 sh -c "$*"
}

stats() {
    [ -f "$STATE/hosts" ] || die "no lab (scripts/netlab.sh up first)"
    while read -r addr ns; do
        echo "$addr $(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes 2>/dev/null) \
$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes 2>/dev/null)"
    done <"$STATE/hosts"
}

lab_mpirun() {
    local n=$1 rate=$2
    shift 2
    up "$n" "$rate" >/dev/null
    trap down EXIT INT TERM
    awk '{print $1 " slots=1"}' "$STATE/hosts" >"$STATE/hostfile"
    set +e
    # rtc_hwloc_vmhole none: Open MPI 4.1's daemons (orted) otherwise write the hardware
    # topology into a hole of their address space that mpirun picked in its own; in about
    # one launch in four here that address is taken and the daemon dies of SIGSEGV in
    # hwloc_shmem_topology_write after its launch agent returned, and mpirun waits for it
    # forever. Without the shared copy each daemon reads the topology itself.
    # orte_leave_session_attached: the daemons stay attached to their launch agent instead
    # of detaching (orted --daemonize), so a daemon that dies ends its agent with an error,
    # which mpirun reports and ends the job on; a detached daemon's death is never seen,
    # and mpirun waits for it forever.
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun --hostfile "$STATE/hostfile" -np "$n" --map-by node \
        --mca plm_rsh_agent "$HERE/netlab.sh rsh" --mca plm_rsh_no_tree_spawn 1 --mca rtc_hwloc_vmhole none --mca orte_leave_session_attached 1 \
        --mca oob_tcp_if_include "$NET.0/24" --mca btl self,tcp --mca btl_tcp_if_include "$NET.0/24" \
        -x OMP_NUM_THREADS -x OMP_WAIT_POLICY -x DATA_DIR "$@"
    local rc=$?
    echo "netlab: bytes sent and received on each host's link (tx rx):" >&2
    stats | sed 's/^/netlab:   /' >&2
    return $rc
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
up) [ $# -eq 2 ] || die "usage: scripts/netlab.sh up N RATE"; up "$1" "$2" ;;
down) need_root; down ;;
rsh) [ $# -ge 2 ] || die "usage: scripts/netlab.sh rsh HOST CMD..."; rsh "$@" ;;
stats) stats ;;
mpirun) [ $# -ge 3 ] || die "usage: scripts/netlab.sh mpirun N RATE ARGS..."; lab_mpirun "$@" ;;
*) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; [ -z "$cmd" ] || [ "$cmd" = -h ] || [ "$cmd" = --help ] || exit 2 ;;
esac

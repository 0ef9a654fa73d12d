#!/usr/bin/env bash
# The trainers' command lines (./train_resnet, ./train_lenet, ./train_lstm, built by
# `make` before `make test`; run from the repository root):
#  - --help exits 0 on stdout and names every long option the binary accepts (the
#    option tables in examples/train_options.c and examples/train_<name>.c), and README.md
#    names every option of the trainers and of gcx;
#  - a bad value, an unknown or incomplete option, a stray argument or an inconsistent
#    combination exits 2 before any data is read (DATA_DIR points nowhere, so a check
#    made after loading would show the dataset error instead), with exactly two lines
#    on stderr: one naming the option and the value, then "Try '<bin> --help' ...";
#  - a missing dataset exits 1 with a message naming the expected path.
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 DATA_DIR=$TMP/nowhere

# the long options declared in the option tables of the given sources, one per line
options() {
    grep -ho '{"[a-z0-9-]*", *\(required\|no\|optional\)_argument' "$@" | sed 's/{"\([a-z0-9-]*\)".*/\1/' | sort -u
}

for b in train_resnet train_lenet train_lstm; do
    if [ ! -x "./$b" ]; then echo "FAIL: ./$b not found: build it first (make)"; echo "RESULT 0 1"; exit 1; fi
done

# --help: status 0, and every option of the binary's tables appears as --name
for b in train_resnet train_lenet train_lstm; do
    "./$b" --help >"$TMP/help" 2>"$TMP/err"
    check $? "$b --help exits 0"
    check "$([ -s "$TMP/help" ] && [ ! -s "$TMP/err" ]; echo $?)" "$b --help writes to stdout only"
    opts=$(options examples/train_options.c "examples/$b.c")
    n=0 missing=""
    for o in $opts; do
        n=$((n + 1))
        grep -q -- "--$o\b" "$TMP/help" || missing="$missing --$o"
    done
    check "$([ "$n" -ge 30 ] && [ -z "$missing" ]; echo $?)" "$b --help names all $n options (missing:${missing:- none})"
done

# the README documents every option of the trainers and of gcx
missing=""
for o in $(options examples/*.c); do
    [ "$o" = help ] || grep -q -- "--$o\b" README.md || missing="$missing --$o"
done
check "$([ -z "$missing" ]; echo $?)" "README.md documents every option (missing:${missing:- none})"

# bad_cli BIN EXPECT ARGS...: exit 2, stderr = one line containing EXPECT, then the hint
bad_cli() {
    local b=$1 want=$2
    shift 2
    "./$b" "$@" >"$TMP/out" 2>"$TMP/err"
    local rc=$?
    local first hint lines
    first=$(sed -n 1p "$TMP/err")
    hint=$(sed -n 2p "$TMP/err")
    lines=$(wc -l <"$TMP/err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 2 ] && [ ! -s "$TMP/out" ] && [[ "$first" == *"$want"* ]] &&
       [ "$hint" = "Try './$b --help' for the usage." ]; then
        check 0 ""
    else
        check 1 "$b $*: expected exit 2 and '...$want...' + the hint; got exit $rc, stderr: $(head -c 400 "$TMP/err")"
    fi
}

for b in train_resnet train_lenet train_lstm; do
    bad_cli $b "--workers 0" --workers 0
    bad_cli $b "--eval-every -2" --eval-every -2
    bad_cli $b "--lr abc" --lr abc
    bad_cli $b "unknown codec 'foo'" --codec foo
    bad_cli $b "sbc:p=2" --codec sbc:p=2
    bad_cli $b "--layer-codec" --layer-codec nosuch
    bad_cli $b "--device tpu" --device tpu
    bad_cli $b "--cudnn fastest" --cudnn fastest
    bad_cli $b "--cudnn applies to --device cuda only" --cudnn fast
    bad_cli $b "--backend nope" --backend nope
    bad_cli $b "--topology star" --topology star
    bad_cli $b "--bandwidth fast" --bandwidth fast
    bad_cli $b "unknown optimizer 'nope'" --optim nope
    bad_cli $b "'foo'" --optim sgd:foo=1
    bad_cli $b "Nesterov momentum requires a momentum" --optim sgd --momentum 0 --nesterov
    bad_cli $b "--momentum does not apply to --optim adam" --optim adam --momentum 0.5
    bad_cli $b "--nesterov does not apply to --optim rmsprop" --optim rmsprop --nesterov
    bad_cli $b "unknown lr schedule 'nope'" --schedule nope
    bad_cli $b "--latency needs --bandwidth" --latency 1ms
    bad_cli $b "--cudnn applies to --device cuda only" --cudnn find
    bad_cli $b "--save-every needs --save" --save-every 5
    bad_cli $b "cannot write --save $TMP/nowhere/x.ck: its folder does not exist" --save "$TMP/nowhere/x.ck"
    bad_cli $b "cannot write --save $TMP: it is a folder" --save "$TMP"
    bad_cli $b "cannot write --log $TMP/nowhere/x.csv: its folder does not exist" --log "$TMP/nowhere/x.csv"
    bad_cli $b "cannot write --log-layers $TMP: it is a folder" --log-layers "$TMP"
    bad_cli $b "'--bogus'" --bogus
    bad_cli $b "'--steps'" --steps
    bad_cli $b "--steps -1" --steps -1
    bad_cli $b "cannot write --export $TMP/nowhere/x.safetensors: its folder does not exist" \
        --export "$TMP/nowhere/x.safetensors"
    bad_cli $b "--init-from and --resume exclude each other" --init-from a.safetensors --resume a.ckpt
    bad_cli $b "'extra'" --steps 1 extra
done
# empty paths and values are refused, not ignored (an empty --resume used to start from step 0
# and then overwrite the checkpoint named by --save)
for f in resume save log data-dir optim export init-from; do
    bad_cli train_lenet "--$f '': expected a" --$f ""
done
bad_cli train_lstm "--text ''" --text ""
# 3LC's s is in [1, 2): the message says so
bad_cli train_resnet "s=2 out of range [1, 2)" --codec 3lc:s=2
# what the exchange cannot run is said before any data is read
bad_cli train_lenet "DGC's momentum correction replaces SGD momentum" --codec dgc
bad_cli train_resnet "cannot be combined with the ring topology" --codec dgc --topology ring
bad_cli train_resnet "the allreduce topology sends fp32 only" --codec 3lc --topology allreduce
# local workers are threads that all call the BLAS: no more than this build's OpenBLAS serves
most=$(./train_lenet --help | grep -o 'at most [0-9]* local' | grep -o '[0-9][0-9]*')
check "$([ -n "$most" ]; echo $?)" "train_lenet --help names the most local workers this build serves"
if [ -n "$most" ] && [ "$most" -lt 256 ]; then
    bad_cli train_lenet "--workers $((most + 1)): this build's OpenBLAS serves at most $most threads" \
        --workers $((most + 1))
fi

bad_cli train_resnet "--depth 21" --depth 21
bad_cli train_resnet "--shortcut C" --shortcut C
bad_cli train_lenet "--shard x" --shard x
bad_cli train_lstm "--model foo" --model foo
bad_cli train_lstm "--dropout 1" --dropout 1
bad_cli train_lstm "--dropout nan" --dropout nan
bad_cli train_lstm "--clip nan" --clip nan
bad_cli train_lstm "dgc:clip=nan" --codec dgc:clip=nan
bad_cli train_resnet "dgc:warmup=nan" --codec dgc:warmup=nan

# a missing dataset: exit 1, naming the path it looked for
for spec in "train_resnet:cifar-10-batches-bin" "train_lenet:mnist" "train_lstm:ptb"; do
    b=${spec%%:*} want=$TMP/nowhere/${spec#*:}
    "./$b" --steps 1 --log "$TMP/never.csv" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    check "$([ "$rc" -eq 1 ] && grep -q -- "$want" "$TMP/err"; echo $?)" \
        "$b with no dataset: expected exit 1 naming $want; got exit $rc: $(head -c 300 "$TMP/err")"
    check "$([ ! -e "$TMP/never.csv" ]; echo $?)" "$b with no dataset: no --log file created"
done
# runs on a tiny image folder (4 images of 8 x 8 in 2 classes, made here)
IMF=$TMP/imf
for sp in train val; do
    for c in a b; do
        mkdir -p "$IMF/$sp/$c"
        for i in 1 2; do { printf 'P5\n8 8\n255\n'; head -c 64 /dev/urandom; } >"$IMF/$sp/$c/$i.pgm"; done
    done
done
L="./train_lenet --dataset folder:$IMF --batch 1 --workers 2 --quiet --eval-every -1 --print-every 1"
# the first screen: the policy in one line (the table with --show-policy), a progress line
# after the first step, and DGC's density on the progress line during its warm-up
L0="./train_lenet --dataset folder:$IMF --batch 1 --workers 2 --eval-every -1"
$L0 --steps 3 --print-every 100 --codec dgc --optim momentum --lr 0.01 >"$TMP/out" 2>"$TMP/err"
check "$(grep -q '^policy: [0-9]* tensors: .* dgc:density=0.001 (.*% of values)' "$TMP/out" &&
         grep -q '^step      1/3 .* at 25% density' "$TMP/out" && [ "$(wc -l <"$TMP/out")" -le 12 ]; echo $?)" \
    "the first screen: $(head -c 600 "$TMP/out")"
$L0 --steps 1 --show-policy >"$TMP/out" 2>"$TMP/err"
check "$(grep -q '^tensor .* numel .* codec .* why' "$TMP/out" && grep -q '^conv1.weight ' "$TMP/out"; echo $?)" \
    "--show-policy: the table: $(head -c 300 "$TMP/out")"
# out of memory in several worker threads at once: one message, exit 1 (no crash in the exit path)
for i in 1 2 3; do
    ( ulimit -v 4000000; ./train_lenet --dataset folder:"$IMF" --batch 65536 --workers 4 --steps 2 --quiet \
        --eval-every -1 ) >"$TMP/out" 2>"$TMP/err"
    rc=$?
    check "$([ "$rc" -eq 1 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "out of memory" "$TMP/err"; echo $?)" \
        "out of memory in 4 workers: expected exit 1 and one message; got exit $rc: $(head -c 300 "$TMP/err")"
done
# a --log that takes no writes: said once, the run goes on and exits 1
$L --steps 3 --log /dev/full >"$TMP/out" 2>"$TMP/err"
rc=$?
check "$([ "$rc" -eq 1 ] && [ "$(grep -c 'writing --log /dev/full failed' "$TMP/err")" -eq 1 ] &&
         grep -q "step      3/3" "$TMP/out"; echo $?)" \
    "--log /dev/full: expected the whole run, one message and exit 1; got exit $rc: $(head -c 300 "$TMP/err")"
# after a --resume, the done line counts the steps of this run
$L --steps 6 --stop-at 2 --save "$TMP/r.ckpt" >"$TMP/out" 2>"$TMP/err"
$L --steps 6 --resume "$TMP/r.ckpt" >"$TMP/out" 2>"$TMP/err"
check "$(grep -q 'done: step 6; 4 steps since the resume' "$TMP/out"; echo $?)" \
    "the done line after a resume: $(grep done: "$TMP/out")"
# a diverged run: the message says which checkpoint --save keeps
$L --steps 30 --optim sgd --lr 1000 --save "$TMP/n.ckpt" --save-every 1 >"$TMP/out" 2>"$TMP/err"
check "$(grep -q "loss became .* keeps its checkpoint of step [0-9]* (resume from it)" "$TMP/err"; echo $?)" \
    "after a NaN: the checkpoint kept is named: $(head -c 300 "$TMP/err")"
# a folder where a dataset file or a checkpoint is expected
mkdir -p "$TMP/dd/cifar-10-batches-bin/data_batch_1.bin"
DATA_DIR=$TMP/dd ./train_resnet --steps 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
check "$([ "$rc" -eq 1 ] && grep -q "data_batch_1.bin' is a folder" "$TMP/err"; echo $?)" \
    "a folder as a CIFAR-10 file: exit $rc: $(head -c 300 "$TMP/err")"
$L --steps 2 --resume "$TMP/dd" >"$TMP/out" 2>"$TMP/err"
rc=$?
check "$([ "$rc" -eq 1 ] && grep -q "is a folder, not a checkpoint" "$TMP/err"; echo $?)" \
    "a folder as --resume: exit $rc: $(head -c 300 "$TMP/err")"
# SIGINT/SIGTERM: the workers finish the step, save --save and exit 128 + the signal; the run
# continues from there bit for bit (the same final checkpoint as an uninterrupted run).
# The signal goes once the run's --log holds its third step, so it lands in mid-run
# however fast the machine is (a step takes about 10 ms here).
S="$L --codec 3lc --steps 600"
$S --save "$TMP/a.ckpt" >/dev/null 2>&1
$S --save "$TMP/b.ckpt" --log "$TMP/b.csv" >"$TMP/out" 2>"$TMP/err" &
pid=$!
for _ in $(seq 600); do
    n=$(grep -c '^train,' "$TMP/b.csv" 2>/dev/null)
    [ "${n:-0}" -ge 3 ] && break
    sleep 0.05
done
kill -TERM $pid
wait $pid
rc=$?
check "$([ "$rc" -eq 143 ] && grep -q "stopped by a signal after step [0-9]* of 600; saved $TMP/b.ckpt" "$TMP/err" &&
         [ -s "$TMP/b.ckpt" ]; echo $?)" "SIGTERM: expected exit 143 and the checkpoint; got exit $rc: $(tail -c 300 "$TMP/err")"
$S --save "$TMP/b.ckpt" --resume "$TMP/b.ckpt" >"$TMP/out" 2>"$TMP/err"
check "$(python3 scripts/ckpt_diff.py "$TMP/a.ckpt" "$TMP/b.ckpt" >"$TMP/diff" 2>&1; echo $?)" \
    "stopped by SIGTERM and resumed: the same final state as an uninterrupted run: $(head -c 300 "$TMP/diff")"
# a second signal: at once, and no temporary checkpoint file left behind
$L --steps 100000 --save "$TMP/c.ckpt" --save-every 1 >"$TMP/out" 2>"$TMP/err" &
pid=$!
sleep 0.5
kill -INT $pid
kill -INT $pid
wait $pid
rc=$?
check "$([ "$rc" -eq 130 ] && [ -z "$(ls "$TMP" | grep '\.tmp\.')" ]; echo $?)" \
    "two SIGINTs: expected exit 130 and no temporary file; got exit $rc, files: $(ls "$TMP" | tr '\n' ' ')"
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]

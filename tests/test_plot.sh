#!/usr/bin/env bash
# scripts/plot.py and scripts/step_breakdown.py on logs made here: two short LeNet runs
# on a tiny image folder, one logged as CSV (3lc, with the network model, and
# --log-layers) and one as JSON lines (fp32). plot.py draws both on one figure against step, epoch, MB sent and
# modeled time (a PNG each); step_breakdown.py reads both formats. plot.py is skipped
# where Debian's python3 has no matplotlib (scripts/deps.sh --plots installs it).
# Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1
for sp in train val; do
    for c in a b; do
        mkdir -p "$TMP/imf/$sp/$c"
        for i in 1 2; do { printf 'P5\n8 8\n255\n'; head -c 64 /dev/urandom; } >"$TMP/imf/$sp/$c/$i.pgm"; done
    done
done
L="./train_lenet --dataset folder:$TMP/imf --batch 1 --workers 2 --steps 40 --quiet --eval-every 4 --print-every 5"
$L --codec 3lc --bandwidth 10mbit --log "$TMP/a.csv" --log-layers "$TMP/layers.csv" >/dev/null 2>&1
check $? "the CSV run"
$L --log "$TMP/b.jsonl" >/dev/null 2>&1
check $? "the JSON lines run"
PY=/usr/bin/python3
[ -x $PY ] || PY=python3
if $PY -c "import matplotlib" 2>/dev/null; then
    for x in step epoch mb time; do
        $PY scripts/plot.py --x $x --bandwidth 10mbit --label 3lc --label fp32 -o "$TMP/$x.png" "$TMP/a.csv" \
            "$TMP/b.jsonl" >"$TMP/out" 2>&1
        rc=$?
        check "$([ $rc -eq 0 ] && [ "$(head -c 8 "$TMP/$x.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]; echo $?)" \
            "plot.py --x $x: a PNG (exit $rc: $(tail -c 200 "$TMP/out"))"
    done
    $PY scripts/plot.py --layers "$TMP/layers.csv" -o "$TMP/layers.png" >"$TMP/out" 2>&1
    check "$([ $? -eq 0 ] && [ -s "$TMP/layers.png" ]; echo $?)" "plot.py --layers: $(tail -c 200 "$TMP/out")"
    $PY scripts/plot.py -o "$TMP/z.png" "$TMP/nosuch.csv" >/dev/null 2>&1
    check "$([ $? -eq 1 ]; echo $?)" "plot.py on a missing log: exit 1"
else
    echo "no matplotlib for $PY: plot.py not tested (scripts/deps.sh --plots)"
fi
out=$(python3 scripts/step_breakdown.py "$TMP/a.csv" "$TMP/b.jsonl" 2>&1)
check "$([ $? -eq 0 ] && [ "$(echo "$out" | grep -c 'steps, step .* ms = compute')" -eq 2 ]; echo $?)" \
    "step_breakdown.py reads CSV and JSON lines: $out"
# the CPU copies nothing between host and device (the logs' h2d_bytes, d2h_bytes, copy_s)
check "$([ "$(echo "$out" | grep -c '; copies 0 B up + 0 B down in 0.00 ms$')" -eq 2 ]; echo $?)" \
    "step_breakdown.py gives the host<->device copies, none on the CPU: $out"
# --log-layers: a header, then one row per tensor (LeNet: 8) at each progress line of the log
rows=$(($(wc -l <"$TMP/layers.csv") - 1))
prints=$(grep -c '^train,' "$TMP/a.csv")
check "$([ "$(head -1 "$TMP/layers.csv")" = "step,tensor,numel,codec,frames_per_step,bytes_per_step,ratio,density,rel_error,codec_ms_per_step" ] &&
         [ "$rows" -eq $((8 * prints)) ] && grep -q '^40,conv1.weight,[0-9]*,"3lc' "$TMP/layers.csv"; echo $?)" "--log-layers rows: $rows for $prints progress lines"
# a codec whose spec holds commas (gcomp:ntheta=8,every=50,chunk=16384) stays one CSV field
$L --steps 10 --codec gcomp --log-layers "$TMP/gl.csv" >/dev/null 2>&1
out=$(python3 -c 'import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [r for r in rows if None in r or float(r["bytes_per_step"]) <= 0 or
       (r["tensor"] == "conv1.weight" and r["codec"] != "gcomp:ntheta=8,every=50,chunk=16384")]
print(len(rows) > 0 and len(rows) % 8 == 0, len(bad))' "$TMP/gl.csv" 2>&1)
check "$([ "$out" = "True 0" ]; echo $?)" "--log-layers with gcomp: every row 10 fields, the codec whole (rows, bad: $out)"
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]

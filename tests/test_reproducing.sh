#!/usr/bin/env bash
# docs/REPRODUCING.md against its logs: every table between the markers of
# scripts/repro_tables.py must be what the committed logs in docs/runs/ give
# (no training here; the tables are recomputed from the logs and compared).
# Also checks that the table script notices a changed log (a copy of the
# documents with one accuracy altered fails) and that every figure the document
# shows exists. Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
out=$(python3 scripts/repro_tables.py --check 2>&1)
rc=$?
echo "$out" | grep -v '^RESULT'
check $rc "scripts/repro_tables.py --check: REPRODUCING.md's tables agree with docs/runs/"

# a changed log must show: copy the tree's docs and scripts, alter the final accuracy of one run
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$TMP/docs" "$TMP/scripts"
cp -r docs/runs docs/REPRODUCING.md "$TMP/docs/"
cp scripts/repro_tables.py scripts/repro_runs.py "$TMP/scripts/"
log=$(ls "$TMP"/docs/runs/resnet20/fp32.s0.csv 2>/dev/null)
if [ -n "$log" ]; then
    # the last line is the final test evaluation: kind,step,epoch,loss,acc,...
    awk -F, 'BEGIN{OFS=","} {if (NR>1 && $1=="test") last=NR; l[NR]=$0} END{for(i=1;i<=NR;i++){if(i==last){split(l[i],f,",");f[5]=f[5]-0.01;s=f[1];for(k=2;k<=length(f);k++)s=s","f[k];print s}else print l[i]}}' "$log" > "$log.new" && mv "$log.new" "$log"
    python3 "$TMP/scripts/repro_tables.py" --check > "$TMP/out.txt" 2>&1
    check $((1 - $?)) "an altered log (fp32 seed 0 one point lower) makes --check fail"
fi
for f in $(grep -o 'figures/[A-Za-z0-9_.-]*\.png' docs/REPRODUCING.md | sort -u); do
    [ -s "docs/$f" ]
    check $? "docs/$f, shown in REPRODUCING.md, exists"
done
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]

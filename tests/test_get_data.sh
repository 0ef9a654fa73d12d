#!/usr/bin/env bash
# scripts/get_data.sh against a local HTTP server on 127.0.0.1 serving a copy of the
# datasets (DATA_DIR, as the mirror --base-url expects): MNIST, PTB and Shakespeare
# (CIFAR-10's 184 MB are left out to keep this short; the same code fetches them)
# are downloaded and checked; --verify passes; a damaged file fails --verify and is
# not overwritten; a leftover partial download is completed; a mirror serving a wrong
# file fails its checksum and leaves no file; bad options exit 2. Skipped where
# DATA_DIR does not hold the datasets. Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
passed=0 failed=0
check() { # condition-status, message
    if [ "$1" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $2"; fi
}
G=scripts/get_data.sh
SETS=mnist,ptb,shakespeare
src=${DATA_DIR:-data}
if ! $G --verify --only $SETS "$src" >/dev/null 2>&1 || ! command -v curl >/dev/null || ! command -v python3 >/dev/null; then
    echo "DATA_DIR ($src) without intact MNIST, PTB and Shakespeare, or no curl/python3: skipped"
    echo "RESULT 0 0"
    exit 0
fi
TMP=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill $server 2>/dev/null; rm -rf "$TMP"' EXIT
# serve src on a free port of 127.0.0.1
serve() { # folder
    for _ in 1 2 3 4 5; do
        port=$((20000 + RANDOM % 20000))
        python3 -m http.server "$port" --bind 127.0.0.1 --directory "$1" >"$TMP/http.log" 2>&1 &
        server=$!
        for _ in $(seq 1 50); do
            curl -fs "http://127.0.0.1:$port/" >/dev/null 2>&1 && return 0
            kill -0 $server 2>/dev/null || break
            sleep 0.1
        done
        kill $server 2>/dev/null
    done
    return 1
}
serve "$src" || { echo "FAIL: cannot start a local HTTP server"; echo "RESULT 0 1"; exit 1; }
URL=http://127.0.0.1:$port
D=$TMP/data
$G --base-url "$URL" --only $SETS "$D" >"$TMP/out" 2>&1
check $? "download of $SETS from the local mirror: $(tail -3 "$TMP/out")"
$G --verify --only $SETS "$D" >"$TMP/out" 2>&1
check $? "--verify after the download"
check "$(cmp -s "$src/ptb/ptb.train.txt" "$D/ptb/ptb.train.txt" && [ -z "$(find "$D" -name '*.part')" ]; echo $?)" \
    "the files are the mirror's, no partial file left"
# a damaged file: --verify fails naming it, a download does not overwrite it
printf 'x' | dd of="$D/ptb/ptb.valid.txt" bs=1 seek=100 conv=notrunc 2>/dev/null
$G --verify --only ptb "$D" >"$TMP/out" 2>&1
rc=$?
check "$([ $rc -eq 1 ] && grep -q "ptb.valid.txt is there but its md5" "$TMP/out"; echo $?)" "--verify on a damaged file: exit $rc"
$G --base-url "$URL" --only ptb "$D" >"$TMP/out" 2>&1
rc=$?
check "$([ $rc -eq 1 ] && ! cmp -s "$src/ptb/ptb.valid.txt" "$D/ptb/ptb.valid.txt"; echo $?)" \
    "a damaged file is reported, not overwritten: exit $rc"
# a partial download left over: completed (this server cannot resume, so started again)
rm "$D/shakespeare/input.txt"
head -c 1000 "$src/shakespeare/input.txt" >"$D/shakespeare/input.txt.part"
$G --base-url "$URL" --only shakespeare "$D" >"$TMP/out" 2>&1
check "$(cmp -s "$src/shakespeare/input.txt" "$D/shakespeare/input.txt" && [ ! -e "$D/shakespeare/input.txt.part" ]; echo $?)" \
    "a partial download is completed: $(tail -2 "$TMP/out")"
# a mirror that serves a wrong file: the checksum fails, nothing is left
kill $server
M=$TMP/mirror
mkdir -p "$M/ptb"
cp "$src/ptb/ptb.train.txt" "$src/ptb/ptb.valid.txt" "$M/ptb/"
head -c 5000 "$src/ptb/ptb.test.txt" >"$M/ptb/ptb.test.txt"
serve "$M" || true
E=$TMP/empty
$G --base-url "http://127.0.0.1:$port" --only ptb "$E" >"$TMP/out" 2>&1
rc=$?
check "$([ $rc -eq 1 ] && grep -q "ptb.test.txt: md5 .*, expected" "$TMP/out" && [ ! -e "$E/ptb/ptb.test.txt" ] &&
         [ ! -e "$E/ptb/ptb.test.txt.part" ]; echo $?)" "a wrong file from the mirror: exit $rc, nothing left"
$G --only nosuch "$E" >/dev/null 2>&1
check "$([ $? -eq 2 ]; echo $?)" "an unknown dataset: exit 2"
$G --bogus >/dev/null 2>&1
check "$([ $? -eq 2 ]; echo $?)" "an unknown option: exit 2"
echo "RESULT $passed $failed"
[ "$failed" -eq 0 ]

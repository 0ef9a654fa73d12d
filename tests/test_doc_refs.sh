#!/usr/bin/env bash
# The docs name real code (tests/doc_refs.py): the relative links of README.md and the
# documents in docs/, bench/ and tests/ lead to files that exist, and each "path/file.c: name" they give is a
# file holding that name. Ends with "RESULT passed failed" (tests/run.sh).
set -u
cd "$(dirname "$0")/.." || exit 1
exec python3 tests/doc_refs.py

"""The docs name real code: every relative link in README.md and the other documents (docs/, bench/, tests/)
points at a file or folder that exists, and every "path/file.c: name" (also
.h, .cu, .py, .sh; with or without the space) names a file that exists and
contains that name as a word. Prints each miss; ends with "RESULT passed
failed" (tests/run.sh). Run from the repository root."""

import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checks import check, result  # noqa: E402

LINK = re.compile(r"\]\(([^)\s]+)\)")
NAMED = re.compile(r"\b((?:[a-z_]+/)+[A-Za-z_0-9]+\.(?:c|h|cu|py|sh)):\s?`?([A-Za-z_][A-Za-z_0-9]*)")
SOURCES = {}


def source(path):
    if path not in SOURCES:
        with open(path, encoding="utf-8", errors="replace") as f:
            SOURCES[path] = f.read()
    return SOURCES[path]


def main():
    docs = ["README.md"] + sorted(glob.glob("docs/*.md") + glob.glob("bench/*.md") + glob.glob("tests/**/*.md", recursive=True))
    links = names = 0
    for doc in docs:
        text = open(doc, encoding="utf-8").read()
        base = os.path.dirname(doc)
        for target in LINK.findall(re.sub(r"`[^`\n]*`", "", text)):  # not in code spans
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = os.path.normpath(os.path.join(base, target.split("#")[0]))
            links += 1
            check(os.path.exists(path), "%s: the link (%s) leads to no file" % (doc, target))
        for path, name in NAMED.findall(text):
            names += 1
            if not os.path.isfile(path):
                check(False, "%s: %s (named with %s) does not exist" % (doc, path, name))
                continue
            check(re.search(r"\b%s\b" % re.escape(name), source(path)) is not None,
                  "%s: %s has no %s" % (doc, path, name))
    print("%d links and %d file: name references in %d documents" % (links, names, len(docs)))
    return result()


if __name__ == "__main__":
    sys.exit(main())

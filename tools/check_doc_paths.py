#!/usr/bin/env python3
"""Rejects file and folder names in docs/ARCHITECTURE.md, README.md and the module READMEs (src/**/README.md,
apps/**/README.md, and scripts/, tests/, tools/, bench/, fuzz/README.md where they exist) that no longer exist (docs/notes/
are dated records and keep the names of their day): every `quoted` token that looks like a repository path (a '/' and a
file-ish tail) must name a file or folder, looked up from the repository root and from the module roots the docs abbreviate
(src/, src/backend/cuda/, src/loader/, ...; for a module README also its own folder), with or without an extension,
`{a,b}` alternatives expanded. URL routes, placeholders (UPPER case other than README, `|`, `*`, `<`), build outputs and
installed packages (node_modules/) are skipped. Exit status 1 lists every dangling name."""
import itertools
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASES = ["", "src/", "src/backend/", "src/backend/cuda/", "src/backend/cpu/", "src/loader/", "src/model/", "src/server/",
         "src/engine/", "src/sched/", "apps/", "apps/radixserve/", "tests/", "tools/", "bench/"]
MODULE_READMES = ["src/**/README.md", "apps/**/README.md", "scripts/README.md", "tests/README.md", "tools/README.md",
                  "bench/README.md", "fuzz/README.md"]
TOKEN = re.compile(r"`([^`\s]+/[^`\s]*)`")


def expansions(token: str):
    """`model/decoder.{h,cpp}` -> model/decoder.h, model/decoder.cpp."""
    parts = re.split(r"\{([^}]*)\}", token)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def skipped(token: str) -> bool:
    return (token.startswith(("/", "http", "$", "~", "-")) or any(c in token for c in "<>|*()=") or
            re.search(r"[A-Z]{3,}", token.replace("README", "")) is not None or token.startswith(("build", "BUILD")) or
            "node_modules/" in token)


def exists(name: str, files: list[str], bases: list[str]) -> bool:
    name = name.rstrip("/").rstrip(".,:;")
    for base in bases:
        path = base + name
        if (ROOT / path).exists() or any(f.startswith(path + ".") for f in files):
            return True
    return False


def main() -> int:
    files = []
    for folder, subfolders, names in os.walk(ROOT):  # build trees, .git and node_modules pruned
        subfolders[:] = [d for d in subfolders if not d.startswith(("build", ".git", "node_modules"))]
        rel = pathlib.Path(folder).relative_to(ROOT)
        files += [str(rel / n) if str(rel) != "." else n for n in names + subfolders]
    docs = [(ROOT / "docs/ARCHITECTURE.md", BASES), (ROOT / "README.md", BASES)]
    for pattern in MODULE_READMES:  # a module README also names paths relative to its own folder
        for readme in sorted(ROOT.glob(pattern)):
            if not any(part.startswith(("build", ".git", "node_modules")) for part in readme.relative_to(ROOT).parts):
                docs.append((readme, [str(readme.parent.relative_to(ROOT)) + "/"] + BASES))
    dangling = []
    for doc, bases in docs:
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for token in TOKEN.findall(line):
                if skipped(token):
                    continue
                if not all(exists(name, files, bases) for name in expansions(token)):
                    dangling.append(f"{doc.relative_to(ROOT)}:{number}: `{token}` names nothing in the repository")
    for line in dangling:
        print(line)
    return 1 if dangling else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Rejects #includes that break the layering in docs/ARCHITECTURE.md: a module may include only itself and the modules
to its left; only src/backend/ may include backend/cpu/ or backend/cuda/. Exit status 1 lists every violation."""
import pathlib
import re
import sys

ALLOWED = {
    "base": set(),
    "hub": {"base"},
    "tensor": {"base"},
    "backend": {"tensor", "base"},
    "loader": {"tensor", "base"},
    "memory": {"backend", "tensor", "base"},
    "kv_events": {"memory", "backend", "tensor", "base"},
    "model": {"backend", "loader", "memory", "tensor", "base"},
    "engine": {"model", "backend", "loader", "memory", "tensor", "base"},
    "spec": {"engine", "model", "backend", "loader", "memory", "tensor", "base"},
    "tokenizer": {"base"},
    "chat": {"base"},
    "loadgen": {"base"},
    "grammar": {"tokenizer", "base"},
    "sched": {"grammar", "tokenizer", "engine", "spec", "model", "backend", "loader", "memory", "tensor", "base"},
    "serving": {"sched", "grammar", "tokenizer", "engine", "spec", "model", "backend", "loader", "memory", "tensor", "base"},
    "http": {"base"},
    "server": {"http", "sched", "grammar", "tokenizer", "chat", "engine", "spec", "model", "backend", "loader", "memory", "tensor", "base"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def main() -> int:
    root = pathlib.Path(__file__).resolve().parent.parent
    violations = []
    for path in sorted((root / "src").rglob("*")):
        if path.suffix not in {".h", ".cpp", ".cu", ".cuh"}:
            continue
        module = path.relative_to(root / "src").parts[0]
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            target = match.group(1).split("/")[0]
            where = f"{path.relative_to(root)}:{number}: includes {match.group(1)}"
            if module not in ALLOWED:
                violations.append(f"{where} (module '{module}' is not in the layering table)")
            elif target in ALLOWED and target != module and target not in ALLOWED[module]:
                violations.append(f"{where} ('{module}' may not depend on '{target}')")
            if re.match(r"backend/(cpu|cuda)/", match.group(1)) and module != "backend":
                violations.append(f"{where} (only backend/ may include backend implementations)")
    for line in violations:
        print(line)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())

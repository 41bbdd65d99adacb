#!/usr/bin/env bash
# clang-format (Debian 12's clang-format 14, style in .clang-format) over every C++/CUDA source of the project.
#   tools/format.sh          rewrite the files in place
#   tools/format.sh --check  change nothing; list unformatted files and exit 1 if there are any (a CTest test)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "clang-format not found: run scripts/setup" >&2; exit 2; }
mapfile -t files < <(find apps bench fuzz src tests tools -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) \
                       -not -path '*/node_modules/*' | sort)
if [[ "${1:-}" == "--check" ]]; then
  bad=0
  for f in "${files[@]}"; do
    clang-format --style=file --dry-run --Werror "$f" >/dev/null 2>&1 || { echo "not clang-formatted: $f"; bad=1; }
  done
  ((bad)) && echo "run tools/format.sh to fix" >&2
  exit $bad
fi
clang-format --style=file -i "${files[@]}"

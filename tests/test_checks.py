"""fail() and check() for the CTest scripts in this folder: a message on stderr and exit status 1."""
import sys


def fail(message: str) -> None:
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition: bool, message: str) -> None:
    if not condition:
        fail(message)

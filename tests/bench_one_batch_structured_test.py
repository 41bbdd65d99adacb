#!/usr/bin/env python3
"""CTest for `radixserve bench one-batch --json-schema / --regex`: a tiny Qwen3 fixture with random weights, widened to
the real Qwen3 tokenizer's 151k ids, decodes greedily under a schema (then a regex), so only the token masks keep its
output valid. Every output must be complete and validate against the schema (checked here, apart from the grammar
code) or fullmatch the regex, and the report must carry the mask cost figures. Exits 77 (skipped) without the
tokenizer (scripts/setup installs it in tests/npm).

Usage: bench_one_batch_structured_test.py RADIXSERVE FIXTURE_DIR TOKENIZER_DIR"""
import json
import pathlib
import re
import subprocess
import sys
import tempfile

from test_checks import check

# Bounded everywhere (no free strings or numbers), so a random model finishes well within the output length.
SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "level": {"enum": ["low", "mid", "high"]},
        "count": {"type": "integer", "minimum": 3, "maximum": 250},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "maxItems": 3},
    },
    "required": ["ok", "level", "count", "tags"],
    "additionalProperties": False,
}
REGEX = r"(yes|no)-[0-9]{2}"
BATCH_SIZES = [1, 4]


def valid(value, schema: dict) -> bool:
    """The subset of JSON Schema that SCHEMA uses."""
    if "enum" in schema:
        return value in schema["enum"]
    kind = schema["type"]
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)
                and schema["minimum"] <= value <= schema["maximum"])
    if kind == "array":
        return (isinstance(value, list) and len(value) <= schema["maxItems"]
                and all(valid(item, schema["items"]) for item in value))
    return (isinstance(value, dict) and set(value) == set(schema["required"]) == set(schema["properties"])
            and all(valid(value[key], schema["properties"][key]) for key in value))


def run_bench(radixserve: str, model: pathlib.Path, tokenizer: pathlib.Path, tmp: pathlib.Path, args: list) -> list:
    """Runs one-batch with `args`; returns the structured_output entry of each batch size."""
    json_path = tmp / "report.json"
    cmd = [radixserve, "bench", "one-batch", "--model", str(model), "--load-format", "dummy", "--tokenizer",
           str(tokenizer), "--batch-size", ",".join(map(str, BATCH_SIZES)), "--input-len", "12", "--output-len", "200",
           *args, "--json", str(json_path)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    check(run.returncode == 0, f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
    print(run.stdout)
    check("structured output" in run.stdout and "mask fill ms" in run.stdout, "no grammar table on stdout")
    report = json.loads(json_path.read_text())
    check(report["structured_output"]["compile_ms"] > 0, "no compile time in the report")
    results = [r["structured_output"] for r in report["results"]]
    check([len(r["outputs"]) for r in results] == BATCH_SIZES, "one output per sequence expected")
    for result in results:
        check(result["steps_compared"] >= 1, f"no step compared: {result}")
        for key in ["plain_step_ms_median", "constrained_step_ms_median", "mask_fill_ms_median", "accept_ms_median"]:
            check(result.get(key, 0) > 0, f"{key} missing or not positive: {result}")
        check(0 <= result["mask_fill_fraction"] < 100, f"implausible mask_fill_fraction: {result}")
    return [output for result in results for output in result["outputs"]]


def main() -> None:
    radixserve, fixture, tokenizer = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    if not (tokenizer / "tokenizer.json").exists():
        print(f"skipped: no {tokenizer / 'tokenizer.json'} (run scripts/setup)")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        model = tmp / "model"
        model.mkdir()
        config = json.loads((fixture / "config.json").read_text())
        config.update(vocab_size=151936, eos_token_id=151645, bos_token_id=None, pad_token_id=151643)
        (model / "config.json").write_text(json.dumps(config))
        (tmp / "schema.json").write_text(json.dumps(SCHEMA))

        for output in run_bench(radixserve, model, tokenizer, tmp, ["--json-schema", str(tmp / "schema.json")]):
            check(output["complete"], f"output not complete within 200 tokens: {output}")
            try:
                value = json.loads(output["text"])
            except json.JSONDecodeError as e:
                check(False, f"output is not JSON ({e}): {output['text']!r}")
            check(valid(value, SCHEMA), f"output does not follow the schema: {output['text']!r}")
        for output in run_bench(radixserve, model, tokenizer, tmp, ["--regex", REGEX]):
            check(output["complete"] and re.fullmatch(REGEX, output["text"]) is not None,
                  f"output does not match {REGEX}: {output}")


if __name__ == "__main__":
    main()

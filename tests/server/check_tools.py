#!/usr/bin/env python3
"""Tool calling through `ggflow serve` and the official `openai` client.

    check_tools.py --ggflow build/ggflow [--model models/smollm2-135m-instruct-q4_1.gguf] [--out-dir DIR]

One line per check (`ok` / `FAIL`); exit 0 when all pass, 1 otherwise, 77 when the model (or the
`openai` / `jsonschema` package) is missing, unless GGFLOW_REQUIRE_MODELS=1. On --model (SmolLM2:
the Generic format, its template has no tools) and on the real Qwen2.5-Coder 0.5B and 1.5B files
(the Hermes format) when models/ has them:
- tool_choice required and a named function (parallel_tool_calls false): finish_reason tool_calls,
  one call that names an offered tool (the named one) with arguments that validate against the
  tool's parameters (jsonschema); with parallel calls every call is valid; tool_choice none gives
  text; auto gives valid calls or text;
- a whole conversation: the call, the tool's result (role tool, tool_call_id), the final answer
  (text, finish_reason stop), streaming and not: the streamed delta.tool_calls (id, type and name
  first, then argument pieces) join into the blocking answer's calls (greedy);
- malformed tool definitions, tool_choice and tool messages: 400 naming the field; the server
  stays alive.
"""
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from server_util import Checker, loopback_only, require_packages, Server, TEST_FLAGS, served_name, setup  # noqa: E402

loopback_only()
jsonschema, openai = require_packages("jsonschema", "openai")
OpenAI = openai.OpenAI

c = Checker()
QWEN = [ROOT / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", ROOT / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"]

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                   "required": ["city", "unit"], "additionalProperties": False}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The local time in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30}},
                   "required": ["city"], "additionalProperties": False}}}
TOOLS = [WEATHER, TIME]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
QUESTION = [{"role": "user", "content": "What is the weather in Paris right now?"}]


def create(client, name, messages, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_tokens", 96)
    return client.chat.completions.create(model=name, messages=messages, tools=TOOLS, **kw)


def valid_calls(calls, names=None):
    """None when every call names an offered tool (of `names`) with valid arguments, else why not."""
    if not calls:
        return "no tool_calls"
    for call in calls:
        if call.type != "function" or not call.id:
            return f"call {call}: missing id or type"
        if call.function.name not in (names or SCHEMAS):
            return f"call to {call.function.name!r}"
        try:
            jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
        except Exception as e:  # noqa: BLE001
            return f"{call.function.name} arguments {call.function.arguments!r}: {e}"
    return None


def auto_ok(ch):
    """tool_choice auto: any calls parsed are valid; finish tool_calls exactly when there are calls
    and the answer ended by itself."""
    calls = ch.message.tool_calls
    if calls:
        return valid_calls(calls) is None and ch.finish_reason in ("tool_calls", "length")
    return ch.finish_reason in ("stop", "length")


def stream_calls(client, name, messages, **kw):
    """The streamed answer: (content, [(id, name, arguments)], finish_reason), checking OpenAI's shape."""
    content, calls, finish, shape = "", {}, None, None
    for chunk in create(client, name, messages, stream=True, **kw):
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        content += d.content or ""
        for tc in d.tool_calls or []:
            if tc.index not in calls:
                if not tc.id or tc.type != "function" or not tc.function.name:
                    shape = f"the first piece of call {tc.index} lacks id / type / name: {tc}"
                calls[tc.index] = [tc.id, tc.function.name, ""]
            calls[tc.index][2] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    return content, [tuple(calls[i]) for i in sorted(calls)], finish, shape


def check_choices(client, name, tag):
    r = create(client, name, QUESTION, tool_choice="required", parallel_tool_calls=False)
    ch = r.choices[0]
    why = valid_calls(ch.message.tool_calls)
    c.check(ch.finish_reason == "tool_calls" and why is None, f"{tag}: tool_choice required: a valid call, finish tool_calls",
            f"{ch.finish_reason}: {why}: {ch.message}")
    # Parallel calls allowed: a small model may go on calling until max_tokens; each call is valid.
    r = create(client, name, QUESTION, tool_choice="required")
    ch = r.choices[0]
    why = valid_calls(ch.message.tool_calls)
    c.check(why is None, f"{tag}: tool_choice required, parallel: {len(ch.message.tool_calls or [])} valid call(s) "
                         f"({ch.finish_reason})", f"{why}: {ch.message}")
    r = create(client, name, QUESTION, tool_choice={"type": "function", "function": {"name": "get_time"}},
               parallel_tool_calls=False)
    ch = r.choices[0]
    why = valid_calls(ch.message.tool_calls, ["get_time"])
    c.check(ch.finish_reason == "tool_calls" and why is None, f"{tag}: a named function: only that function is called",
            f"{ch.finish_reason}: {why}: {ch.message}")
    c.check(len(ch.message.tool_calls or []) == 1, f"{tag}: parallel_tool_calls false: one call", str(ch.message))
    r = create(client, name, QUESTION, tool_choice="none")
    ch = r.choices[0]
    c.check(not ch.message.tool_calls and ch.finish_reason in ("stop", "length") and ch.message.content,
            f"{tag}: tool_choice none: text, no call", str(ch.message))
    r = create(client, name, QUESTION, tool_choice="auto")
    ch = r.choices[0]
    c.check(auto_ok(ch), f"{tag}: tool_choice auto: valid calls or text ({'call' if ch.message.tool_calls else 'text'})",
            str(ch.message))


def check_conversation(client, name, tag):
    first = create(client, name, QUESTION, tool_choice="required", parallel_tool_calls=False)
    calls = first.choices[0].message.tool_calls
    if not c.check(valid_calls(calls) is None, f"{tag}: conversation, turn 1: a call", str(first.choices[0].message)):
        return
    content, streamed, finish, shape = stream_calls(client, name, QUESTION, tool_choice="required", parallel_tool_calls=False)
    c.check(shape is None and finish == "tool_calls" and [(n, a) for _, n, a in streamed] ==
            [(x.function.name, x.function.arguments) for x in calls],
            f"{tag}: streamed delta.tool_calls join into the blocking answer's calls",
            f"{shape}; {finish}; {streamed} vs {[(x.function.name, x.function.arguments) for x in calls]}")
    call = calls[0]
    result = {"temperature": 18, "unit": "celsius", "sky": "sunny"} if call.function.name == "get_weather" else {"time": "14:05"}
    history = QUESTION + [{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
                          {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
    final = create(client, name, history, tool_choice="none", max_tokens=64)
    ch = final.choices[0]
    c.check(ch.finish_reason in ("stop", "length") and ch.message.content and not ch.message.tool_calls,
            f"{tag}: turn 3, after the tool's result: a text answer ({ch.message.content[:60]!r})", str(ch.message))
    content, streamed, finish, _ = stream_calls(client, name, history, tool_choice="none", max_tokens=64)
    c.check(content == ch.message.content and not streamed, f"{tag}: turn 3 streamed equals the blocking answer",
            f"{content!r} vs {ch.message.content!r}")
    auto = create(client, name, history, tool_choice="auto", max_tokens=64).choices[0]
    c.check(auto_ok(auto), f"{tag}: turn 3 with tool_choice auto: valid calls or text", str(auto.message))


def check_errors(client, name):
    def bad(what, expect, **kw):
        try:
            client.chat.completions.create(model=name, max_tokens=8, **kw)
            c.fail(what, "accepted")
        except openai.BadRequestError as e:
            msg = str(e)
            c.check(all(x in msg for x in expect), what + ": 400 " + " / ".join(expect), msg[:300])

    q = QUESTION
    bad("tools not an array", ["tools"], messages=q, tools={"type": "function"})
    bad("a tool without a name", ["tools[0].function.name"], messages=q,
        tools=[{"type": "function", "function": {"parameters": {"type": "object"}}}])
    bad("a tool name with a space", ["tools[0].function.name"], messages=q,
        tools=[{"type": "function", "function": {"name": "get weather"}}])
    bad("two tools with one name", ["tools[1].function.name"], messages=q, tools=[WEATHER, WEATHER])
    bad("parameters not an object", ["tools[0].function.parameters"], messages=q,
        tools=[{"type": "function", "function": {"name": "f", "parameters": [1, 2]}}])
    bad("a tool type other than function", ["tools[0].type"], messages=q, tools=[{"type": "retrieval"}])
    bad("tool_choice naming no tool", ["tool_choice"], messages=q, tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "nope"}})
    bad("tool_choice an unknown string", ["tool_choice"], messages=q, tools=TOOLS, tool_choice="sometimes")
    bad("a tool message without tool_call_id", ["messages[1]", "tool_call_id"],
        messages=q + [{"role": "tool", "content": "18"}], tools=TOOLS)
    bad("an assistant call without a function name", ["messages[1].tool_calls[0]"],
        messages=q + [{"role": "assistant", "content": None, "tool_calls": [{"id": "x", "type": "function", "function": {}}]}],
        tools=TOOLS)
    r = client.chat.completions.create(model=name, messages=q, max_tokens=8, temperature=0)
    c.check(r.choices[0].finish_reason in ("stop", "length"), "the server answers after the errors")


def main():
    ggflow, model, name = setup(__doc__)
    t_start = time.monotonic()
    models = [(model, name)]
    for q in QWEN:
        if q.exists():
            models.append((str(q), served_name(str(q))))
        elif os.environ.get("GGFLOW_REQUIRE_MODELS") == "1":
            c.fail(f"{q.name} is missing (make models)")
        else:
            print(f"skip {q.name}: not in models/ (make models)")
    for path, served in models:
        tag = served.split("-instruct")[0]
        with Server(ggflow, path, TEST_FLAGS, name=f"server {tag}") as srv:
            client = OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=600)
            c.run(f"{tag} tool_choice", check_choices, client, served, tag)
            c.run(f"{tag} conversation", check_conversation, client, served, tag)
            if path == model:
                c.run("errors", check_errors, client, served)
    print(f"check_tools: {time.monotonic() - t_start:.0f} s")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Write the expected prompts of ggflow's tool-calling prompt layer (src/pipeline/tool_calls.h).

For each template x case of tests/pipeline/data/tool_calls/prompt_cases.json, this script applies
the rules of prepare_tool_prompt (the C++ side) independently, in Python, and renders the result
with jinja2 set up as Hugging Face transformers sets it up (gen_template_expected.make_env, the same
fixed clock). The C++ test (tests/pipeline/test_tool_calls.cpp) renders the same cases through
ggflow's engine and must get the same bytes, or an error where jinja2 raised.

The rules (mirrors of the C++; keep both in step):
  - capabilities are probed by rendering small conversations and looking for needles (probe_caps);
  - the template's format is the case file's `format` (the C++ test checks that its detection and
    analysis agree);
  - messages: null content -> ""; assistant tool_calls get object arguments (JSON text parsed) when
    the template renders objects only, text when it renders text only; Mistral ids become 9
    alphanumerics (FNV-1a, base 62); calls are split one per turn when the template cannot show two;
    templates that cannot render calls (and the Generic and Gemma formats) get them as text in the
    format's syntax; tool results become user turns (```tool_output``` for Gemma, a JSON
    {"tool_response": ...} where the template cannot render `tool` messages);
  - tools (when tool_choice is not none): the template's `tools` (Hermes, Llama 3, Mistral, and
    Phi-4-mini-style templates that read it), the system message's `tools` field (Phi-4-mini), or a
    system text (Generic, Gemma); a system message the template cannot show is folded into the first
    user turn; templates that refuse two user turns in a row get user (or assistant) turns in a row
    merged.

Output: tests/pipeline/data/tool_calls/prompt_expected.json:
        {template name: {case name: {"output": s} | {"error": s}}}
Rerun:  .venv/bin/python python/gen_tool_prompt_expected.py
"""
import copy
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_template_expected import BOS, EOS, make_env  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "chat-templates"
DATA = ROOT / "tests" / "pipeline" / "data" / "tool_calls"
ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def dumps(x):
    return json.dumps(x, ensure_ascii=False)


def render(env, source, messages, tools=None, add_generation_prompt=False):
    variables = {"messages": messages, "add_generation_prompt": add_generation_prompt,
                 "bos_token": BOS, "eos_token": EOS}
    if tools is not None:
        variables["tools"] = tools
    return env.from_string(source).render(**variables)


def try_render(env, source, messages, tools=None):
    try:
        return render(env, source, messages, tools)
    except Exception:  # noqa: BLE001 - a failed probe renders nothing
        return ""


PROBE_TOOLS = [{"type": "function", "function": {
    "name": "ggflow_tool_needle", "description": "ggflow tool description",
    "parameters": {"type": "object", "properties": {"ggflow_param": {"type": "string", "description": "a parameter"}},
                   "required": ["ggflow_param"]}}}]


def probe_call(name, args):
    return {"id": "call00001", "type": "function", "function": {"name": name, "arguments": args}}


def probe_caps(env, source):
    user = {"role": "user", "content": "ggflow_user_needle"}
    c = {}
    out = try_render(env, source, [{"role": "system", "content": "ggflow_system_needle"}, user])
    c["system_role"] = "ggflow_system_needle" in out
    c["tools"] = "ggflow_tool_needle" in try_render(env, source, [user], PROBE_TOOLS)

    def assistant(calls):
        return {"role": "assistant", "content": "", "tool_calls": calls}

    obj_args = {"ggflow_arg": "ggflow_value"}
    str_args = '{"ggflow_arg": "ggflow_value"}'
    out = try_render(env, source, [user, assistant([probe_call("ggflow_call_needle", obj_args)])], PROBE_TOOLS)
    c["tool_calls"] = "ggflow_call_needle" in out
    c["object_arguments"] = "ggflow_arg" in out and '\\"ggflow_arg' not in out
    out = try_render(env, source, [user, assistant([probe_call("ggflow_call_needle", str_args)])], PROBE_TOOLS)
    c["string_arguments"] = "ggflow_arg" in out and '\\"ggflow_arg' not in out
    args = obj_args if c["object_arguments"] or not c["string_arguments"] else str_args
    out = try_render(env, source, [user, assistant([probe_call("ggflow_call_a", args), probe_call("ggflow_call_b", args)])],
                     PROBE_TOOLS)
    c["parallel_calls"] = "ggflow_call_a" in out and "ggflow_call_b" in out
    answer = (assistant([probe_call("ggflow_call_needle", args)]) if c["tool_calls"]
              else {"role": "assistant", "content": "ggflow_assistant"})
    tool = {"role": "tool", "tool_call_id": "call00001", "name": "ggflow_call_needle", "content": "ggflow_response_needle"}
    c["tool_responses"] = "ggflow_response_needle" in try_render(env, source, [user, answer, tool], PROBE_TOOLS)
    out = try_render(env, source, [{"role": "user", "content": "ggflow_first"}, {"role": "user", "content": "ggflow_second"}])
    c["alternation"] = not ("ggflow_first" in out and "ggflow_second" in out)
    return c


def mistral_id(i):
    if len(i) == 9 and all(ch in ALNUM for ch in i):
        return i
    h = 0xcbf29ce484222325
    for b in i.encode("utf-8"):
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    out = ""
    for _ in range(9):
        out += ALNUM[h % 62]
        h //= 62
    return out


def content_text(c):
    if isinstance(c, str):
        return c
    if c is None:
        return ""
    if isinstance(c, list):
        return "".join(p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def arguments_value(a):
    if not isinstance(a, str):
        return a
    try:
        return json.loads(a)
    except ValueError:
        return a


def calls_as_text(fmt, calls):
    items = []
    for c in calls:
        fn = c["function"]
        items.append((fn.get("name", ""), arguments_value(fn.get("arguments", {}))))
    if fmt == "hermes":
        return "\n".join("<tool_call>\n" + dumps({"name": n, "arguments": a}) + "\n</tool_call>" for n, a in items)
    if fmt == "llama3":
        return "; ".join(dumps({"name": n, "parameters": a}) for n, a in items)
    if fmt == "mistral-v11":
        return "".join("[TOOL_CALLS]" + n + "[ARGS]" + dumps(a) for n, a in items)
    if fmt == "phi4-mini":
        return "".join("<|tool_call|>" + dumps({"name": n, "arguments": a}) + "<|/tool_call|>" for n, a in items)
    if fmt == "gemma":
        return "```tool_code\n" + "\n".join(dumps({"name": n, "arguments": a}) for n, a in items) + "\n```"
    if fmt == "mistral":
        return "[TOOL_CALLS]" + dumps([{"name": n, "arguments": a} for n, a in items])
    return dumps({"tool_calls": [{"name": n, "arguments": a} for n, a in items]})


def normalized_tools(tools):
    out = []
    for t in tools:
        f = t["function"]
        fn = {"name": f["name"]}
        if f.get("description"):
            fn["description"] = f["description"]
        fn["parameters"] = f.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": fn})
    return out


def tool_list(tools):
    return "".join(dumps(t["function"]) + "\n" for t in tools)


def generic_prompt(tools, choice, named, parallel):
    call = '{"name": "<tool name>", "arguments": {<arguments>}}'
    s = ('You can call these tools ("parameters" is the JSON Schema of a tool\'s arguments):\n' + tool_list(tools) +
         "\nAnswer with one JSON object and nothing else.")
    if choice == "named":
        s += '\nYou must call the tool "' + named + '": {"tool_calls": [{"name": "' + named + '", "arguments": {<arguments>}}]}'
    elif choice == "required":
        s += '\nYou must call a tool: {"tool_calls": [' + call + "]}"
    else:
        s += '\nTo call tools: {"tool_calls": [' + call + ']}\nTo answer the user directly: {"response": "<your answer>"}'
    if not parallel:
        s += "\nCall at most one tool per answer."
    return s


def gemma_prompt(tools, choice, named, parallel):
    s = ('You can call these functions ("parameters" is the JSON Schema of a function\'s arguments):\n' + tool_list(tools) +
         "\nTo call functions, answer with a tool_code block that holds one JSON object per call, and nothing else:\n"
         '```tool_code\n{"name": "<function name>", "arguments": {<arguments>}}\n```\n'
         "The results come back in a tool_output block.")
    if choice == "named":
        s += '\nYou must call the function "' + named + '".'
    elif choice == "required":
        s += "\nYou must call a function."
    else:
        s += "\nIf no function is needed, answer normally."
    if not parallel:
        s += "\nCall at most one function per answer."
    return s


def prepare(fmt, caps, messages, tools, choice, named, parallel):
    mistral = fmt in ("mistral", "mistral-v11")
    native_calls = caps["tool_calls"] and fmt not in ("generic", "gemma")
    out = []
    call_names = []
    for m in copy.deepcopy(messages):
        role = m.get("role", "")
        if "content" in m and m["content"] is None:
            m["content"] = ""
        if role == "assistant" and isinstance(m.get("tool_calls"), list) and m["tool_calls"]:
            calls = m["tool_calls"]
            for c in calls:
                if isinstance(c.get("id"), str):
                    if mistral:
                        c["id"] = mistral_id(c["id"])
                    call_names.append((c["id"], c["function"].get("name", "")))
                a = c["function"].get("arguments")
                if isinstance(a, str) and caps["object_arguments"] and not caps["string_arguments"]:
                    v = arguments_value(a)
                    if isinstance(v, dict):
                        c["function"]["arguments"] = v
                elif isinstance(a, dict) and caps["string_arguments"] and not caps["object_arguments"]:
                    c["function"]["arguments"] = dumps(a)
            if native_calls:
                if caps["parallel_calls"] or len(calls) == 1:
                    out.append(m)
                else:
                    for i, c in enumerate(calls):
                        one = m if i == 0 else {"role": "assistant", "content": ""}
                        one = dict(one)
                        one["tool_calls"] = [c]
                        out.append(one)
            else:
                text = content_text(m.get("content"))
                out.append({"role": "assistant", "content": text + ("\n" if text else "") + calls_as_text(fmt, calls)})
            continue
        if role == "tool":
            i = m.get("tool_call_id", "") if isinstance(m.get("tool_call_id"), str) else ""
            if mistral and "tool_call_id" in m:
                i = mistral_id(i)
                m["tool_call_id"] = i
            text = content_text(m.get("content"))
            if fmt == "gemma":
                out.append({"role": "user", "content": "```tool_output\n" + text + "\n```"})
            elif not caps["tool_responses"]:
                r = {"tool_call_id": i}
                name = m["name"] if isinstance(m.get("name"), str) else ""
                for cid, cname in call_names:
                    if not name and cid == i:
                        name = cname
                if name:
                    r["name"] = name
                r["content"] = text
                out.append({"role": "user", "content": dumps({"tool_response": r})})
            else:
                m["content"] = text
                out.append(m)
            continue
        out.append(m)

    template_tools = None
    if tools and choice != "none":
        def add_system(text):
            if out and out[0].get("role") == "system":
                old = content_text(out[0].get("content"))
                out[0]["content"] = old + ("\n\n" if old else "") + text
            else:
                out.insert(0, {"role": "system", "content": text})

        if fmt == "generic":
            add_system(generic_prompt(tools, choice, named, parallel))
        elif fmt == "gemma":
            add_system(gemma_prompt(tools, choice, named, parallel))
        elif fmt == "phi4-mini" and not caps["tools"]:
            if not out or out[0].get("role") != "system":
                out.insert(0, {"role": "system", "content": "You are a helpful assistant with some tools."})
            out[0]["tools"] = dumps([t["function"] for t in tools])
        else:
            template_tools = tools
    if not caps["system_role"] and out and out[0].get("role") == "system":
        text = content_text(out[0].get("content"))
        out.pop(0)
        if out and out[0].get("role") == "user":
            out[0]["content"] = text + "\n\n" + content_text(out[0].get("content"))
        else:
            out.insert(0, {"role": "user", "content": text})
    if caps["alternation"]:
        merged = []
        for m in out:
            if (merged and m.get("role") in ("user", "assistant") and merged[-1].get("role") == m.get("role")
                    and "tool_calls" not in m
                    and "tool_calls" not in merged[-1]):
                merged[-1]["content"] = content_text(merged[-1]["content"]) + "\n\n" + content_text(m.get("content"))
                continue
            merged.append(m)
        out = merged
    return out, template_tools


def load_source(ref):
    kind, path = ref.split(":", 1)
    return (SHARED / path if kind == "shared" else ROOT / path).read_text(encoding="utf-8")


def main():
    spec = json.loads((DATA / "prompt_cases.json").read_text(encoding="utf-8"))
    env = make_env()
    tools = normalized_tools(spec["tools"])
    result = {}
    n_out = n_err = 0
    for t in spec["templates"]:
        source = load_source(t["source"])
        caps = probe_caps(env, source)
        per_case = {"caps": caps}
        for case in spec["cases"]:
            case_tools = tools if case["with_tools"] else []
            choice = case.get("tool_choice", "auto" if case_tools else "none")
            named = ""
            if isinstance(choice, dict):
                named, choice = choice["function"]["name"], "named"
            parallel = case.get("parallel_tool_calls", True)
            messages, template_tools = prepare(t["format"], caps, case["messages"], case_tools, choice, named, parallel)
            try:
                r = {"output": render(env, source, messages, template_tools, case["add_generation_prompt"])}
                n_out += 1
            except Exception as e:  # noqa: BLE001 - the template refused these messages
                r = {"error": f"{type(e).__name__}: {e}"}
                n_err += 1
            per_case[case["name"]] = r
        result[t["name"]] = per_case
    (DATA / "prompt_expected.json").write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(spec['templates'])} templates x {len(spec['cases'])} cases: {n_out} outputs, {n_err} errors")


if __name__ == "__main__":
    main()

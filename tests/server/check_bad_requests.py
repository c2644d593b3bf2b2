#!/usr/bin/env python3
"""`ggflow serve` against bad requests, sent raw (sockets) so malformed bodies reach it as they are.

    check_bad_requests.py --ggflow build/ggflow [--model models/smollm2-135m-instruct-q4_1.gguf] [--out-dir DIR]

Each case of build_cases() (and build_auth_cases(), on a second server with `--api-key k`) is one
request with its expected status, error code and, where a field is at fault, the `param` naming it.
Every answer must be docs/SERVER.md's error shape: Content-Type application/json and
`{"error": {"message": non-empty str, "type": the status's type, "param", "code"}}`.
Where the contract allows two codes (e.g. `[]` as the body: invalid_json or invalid_type), either
passes. Then behaviour cases: what the contract accepts gets 200 (no over-strict validator); a
client that stalls after its headers (other requests go on); a client that disconnects mid-stream,
12 that leave at different moments, and (with --parallel 1) one that leaves while queued: their
requests are cancelled, their KV blocks freed; 20 connect-then-close sockets; and after all of it a
normal request, /health and an idle /metrics.
Exit 0 when all pass, 1 otherwise (listing the failures), 77 when the model is missing (unless
GGFLOW_REQUIRE_MODELS=1).
"""
import http.client
import json
import select
import socket
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from server_util import (DEFAULT_MODEL, Checker, Server, TEST_FLAGS, eos_id, idle_detail,  # noqa: E402
                         require_model, setup, served_name, set_log_dir)

CHAT, COMPL = "/v1/chat/completions", "/v1/completions"
JSON_CT = {"Content-Type": "application/json"}
TYPE_OF = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
           405: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error",
           503: "server_error", 500: "server_error"}
# Codes where docs/SERVER.md leaves the choice between two readings open: either is accepted.
BAD_JSON_OR_TYPE = ("invalid_json", "invalid_type")
UNSUPPORTED = ("unsupported", "invalid_value")
TOO_MANY_TOKENS = ("invalid_value", "context_length_exceeded")
NOT_HERE = ("unknown_field", "unsupported")


def J(obj):
    return json.dumps(obj).encode()


def chat(**over):
    b = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    b.update(over)
    return {k: v for k, v in b.items() if v is not DROP}


def compl(**over):
    b = {"prompt": "hi", "max_tokens": 4}
    b.update(over)
    return {k: v for k, v in b.items() if v is not DROP}


DROP = object()  # chat(messages=DROP): the field left out


def msg(**m):
    return chat(messages=[m])


def build_cases(name):
    """(name, method, path, headers, body bytes, status, code(s) or None, param or None).
    param: "x" exact, "~x" contained in param, "a|b" either."""
    words_over = " ".join(["hello"] * 3000)          # well over --ctx-size 1024 tokens
    words_half = " ".join(["hello"] * 600)           # fits alone; with max_tokens 600 it does not
    valid = J(chat())
    C = []

    def add(nm, body, status=400, code=None, param=None, method="POST", path=CHAT, headers=None):
        if isinstance(body, dict):
            body = J(body)
        C.append((nm, method, path, dict(JSON_CT, **(headers or {})) if method in ("POST", "PUT") else (headers or {}),
                  body, status, code, param))

    # ---- malformed JSON ------------------------------------------------------------------------
    add("json: truncated", valid[:-7], code="invalid_json")
    add("json: trailing garbage", valid + b" xyz", code="invalid_json")
    add("json: two objects", valid + valid, code="invalid_json")
    add("json: empty body", b"", code="invalid_json")
    add("json: only whitespace", b"  \n ", code="invalid_json")
    add("json: top level []", b"[]", code=BAD_JSON_OR_TYPE)
    add("json: top level \"x\"", b'"x"', code=BAD_JSON_OR_TYPE)
    add("json: top level null", b"null", code=BAD_JSON_OR_TYPE)
    add("json: top level 42", b"42", code=BAD_JSON_OR_TYPE)
    add("json: single quotes", b"{'messages': [{'role': 'user', 'content': 'hi'}]}", code="invalid_json")
    add("json: trailing comma", b'{"messages": [{"role": "user", "content": "hi"}],}', code="invalid_json")
    add("json: NaN literal", b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}',
        code="invalid_json")
    add("json: unterminated string", b'{"messages": [{"role": "user", "content": "hi}]}', code="invalid_json")
    add("json: control character in a string", b'{"messages": [{"role": "user", "content": "a\x01b"}]}',
        code="invalid_json")
    add("json: invalid UTF-8 in a string", b'{"messages": [{"role": "user", "content": "bad \xff\xfe \xc3"}]}',
        code=("invalid_json", "invalid_value"))
    add("json: number 1e400 (overflows a double)", valid[:-1] + b', "temperature": 1e400}',
        code=("invalid_json", "invalid_value"))
    add("json: a comment", valid[:-1] + b" /* note */}", code="invalid_json")
    add("json: arrays 100000 deep", b'{"messages": ' + b"[" * 100000 + b"]" * 100000 + b"}",
        code=("invalid_json", "invalid_type", "invalid_value"))
    add("json: objects 100000 deep as content",
        b'{"messages": [{"role": "user", "content": ' + b'{"a":' * 100000 + b"1" + b"}" * 100000 + b"}]}",
        code=("invalid_json", "invalid_type", "invalid_value"))

    # ---- wrong types ---------------------------------------------------------------------------
    add("type: model as number", chat(model=7), code="invalid_type", param="model")
    add("type: messages as string", chat(messages="hi"), code="invalid_type", param="messages")
    add("type: messages as object", chat(messages={"role": "user", "content": "hi"}), code="invalid_type",
        param="messages")
    add("type: a message as string", chat(messages=["hi"]), code="invalid_type", param="~messages")
    add("type: role as number", msg(role=1, content="hi"), code="invalid_type", param="~role")
    add("type: content as number", msg(role="user", content=5), code="invalid_type", param="~content")
    add("type: user content null", msg(role="user", content=None), code=("invalid_type", "invalid_value",
                                                                          "missing_field"), param="~content")
    add("type: content part without text", msg(role="user", content=[{"type": "text"}]),
        code="missing_field", param="~content")
    add("type: content part text as number", msg(role="user", content=[{"type": "text", "text": 3}]),
        code="invalid_type", param="~content")
    add("type: content part of unknown type", msg(role="user", content=[{"type": "hologram", "text": "x"}]),
        code=UNSUPPORTED, param="~content")
    add("type: content part image_url", msg(role="user", content=[
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]),
        code=UNSUPPORTED, param="~content")
    add("type: assistant content as number", chat(messages=[{"role": "user", "content": "hi"},
                                                          {"role": "assistant", "content": 3},
                                                          {"role": "user", "content": "and?"}]),
        code="invalid_type", param="~content")
    add("type: top_k as string", chat(top_k="5"), code="invalid_type", param="top_k")
    add("type: stream_options.include_usage as string", chat(stream=True, stream_options={"include_usage": "yes"}),
        code="invalid_type", param="~stream_options")
    add("type: response_format as string", chat(response_format="json"), code=("invalid_type", "unsupported"),
        param="response_format")
    add("type: temperature as string", chat(temperature="0.5"), code="invalid_type", param="temperature")
    add("type: top_p as string", chat(top_p="1"), code="invalid_type", param="top_p")
    add("type: top_k as 1.5", chat(top_k=1.5), code="invalid_type", param="top_k")
    add("type: frequency_penalty as string", chat(frequency_penalty="x"), code="invalid_type",
        param="frequency_penalty")
    add("type: max_tokens as 1.5", chat(max_tokens=1.5), code="invalid_type", param="max_tokens")
    add("type: max_tokens as string", chat(max_tokens="4"), code="invalid_type", param="max_tokens")
    add("type: max_tokens as bool", chat(max_tokens=True), code="invalid_type", param="max_tokens")
    add("type: max_completion_tokens as string", chat(max_tokens=DROP, max_completion_tokens="4"),
        code="invalid_type", param="max_completion_tokens")
    add("type: stream as string", chat(stream="yes"), code="invalid_type", param="stream")
    add("type: stream as 1", chat(stream=1), code="invalid_type", param="stream")
    add("type: stream_options as string", chat(stream=True, stream_options="usage"), code="invalid_type",
        param="stream_options")
    add("type: stop as number", chat(stop=5), code="invalid_type", param="stop")
    add("type: stop as array of numbers", chat(stop=[1, 2]), code="invalid_type", param="stop")
    add("type: n as string", chat(n="2"), code="invalid_type", param="n")
    add("type: n as 1.5", chat(n=1.5), code="invalid_type", param="n")
    add("type: logit_bias as array", chat(logit_bias=[1, 2]), code="invalid_type", param="logit_bias")
    add("type: logit_bias value as string", chat(logit_bias={"1": "x"}), code="invalid_type", param="logit_bias")
    add("type: logprobs as string", chat(logprobs="yes"), code="invalid_type", param="logprobs")
    add("type: top_logprobs as string", chat(logprobs=True, top_logprobs="3"), code="invalid_type",
        param="top_logprobs")
    add("type: seed as string", chat(seed="abc"), code="invalid_type", param="seed")
    add("type: seed as 1.5", chat(seed=1.5), code="invalid_type", param="seed")

    # ---- values out of range -------------------------------------------------------------------
    for field, v in [("temperature", -1), ("temperature", 2.5), ("temperature", 1e308), ("top_p", 0),
                     ("top_p", 1.5), ("top_p", -0.5), ("min_p", -0.1), ("min_p", 1.5), ("top_k", -2),
                     ("presence_penalty", 3), ("presence_penalty", -2.5), ("frequency_penalty", -3),
                     ("repetition_penalty", 0), ("repetition_penalty", 2.5), ("max_tokens", 0), ("max_tokens", -5),
                     ("n", 0), ("n", 17)]:
        add(f"value: {field} {v}", chat(**{field: v}), code="invalid_value", param=field)
    add("value: seed 2**64+1 (no 64-bit integer)", chat(seed=2 ** 64 + 1), code=("invalid_value", "invalid_type"),
        param="seed")
    add("value: max_completion_tokens 0", chat(max_tokens=DROP, max_completion_tokens=0), code="invalid_value",
        param="max_completion_tokens")
    add("value: max_tokens 10**12", chat(max_tokens=10 ** 12), code=TOO_MANY_TOKENS, param="max_tokens")
    add("value: max_tokens 2**63", chat(max_tokens=2 ** 63), code=TOO_MANY_TOKENS, param="max_tokens")
    add("value: max_tokens -2**63-1", chat(max_tokens=-2 ** 63 - 1), code=("invalid_value", "invalid_type"),
        param="max_tokens")
    add("value: stop with 5 strings", chat(stop=["a", "b", "c", "d", "e"]), code="invalid_value", param="stop")
    add("value: stop empty string", chat(stop=""), code="invalid_value", param="stop")
    add("value: stop array with an empty string", chat(stop=["a", ""]), code="invalid_value", param="stop")
    add("value: logit_bias non-numeric key", chat(logit_bias={"abc": 1}), code=("invalid_value", "invalid_type"),
        param="logit_bias")
    add("value: logit_bias key 1.5", chat(logit_bias={"1.5": 1}), code=("invalid_value", "invalid_type"),
        param="logit_bias")
    add("value: logit_bias value 1000", chat(logit_bias={"1": 1000}), code="invalid_value", param="logit_bias")
    add("value: logit_bias token out of vocabulary", chat(logit_bias={"10000000": 1}), code="invalid_value",
        param="logit_bias")
    add("value: top_logprobs without logprobs", chat(top_logprobs=3), code=("invalid_value", "missing_field"),
        param="top_logprobs")
    add("value: top_logprobs 21", chat(logprobs=True, top_logprobs=21), code="invalid_value", param="top_logprobs")
    add("value: top_logprobs -1", chat(logprobs=True, top_logprobs=-1), code="invalid_value", param="top_logprobs")
    add("value: stream_options without stream", chat(stream_options={"include_usage": True}),
        code="invalid_value", param="stream_options")

    # ---- messages ------------------------------------------------------------------------------
    add("messages: empty array", chat(messages=[]), code="invalid_value", param="messages")
    add("messages: missing", chat(messages=DROP), code="missing_field", param="messages")
    add("messages: a message without role", msg(content="hi"), code="missing_field", param="~role")
    add("messages: unknown role wizard", msg(role="wizard", content="hi"), code="invalid_value", param="~role")
    add("messages: a user message without content", msg(role="user"), code="missing_field", param="~content")
    add("messages: a tool message without tool_call_id", msg(role="tool", content="42"),
        code="invalid_value", param="~tool_call_id")

    # ---- fields ggflow does not know or implement -----------------------------------------------
    add("field: unknown top-level field", chat(frobnicate=1), code="unknown_field", param="frobnicate")
    add("field: tools with a bad name", chat(tools=[{"type": "function", "function": {"name": "f g", "parameters": {}}}]),
        code="invalid_value", param="tools[0].function.name")
    add("field: tool_choice without tools", chat(tool_choice="auto"), code="invalid_value", param="tool_choice")
    add("field: functions", chat(functions=[{"name": "f", "parameters": {}}]), code="unsupported", param="functions")
    add("field: response_format json_schema with an unsupported keyword", chat(response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "patternProperties": {}}}}),
        code="invalid_value", param="response_format.json_schema.schema")
    add("field: a grammar that does not parse", chat(grammar="root ::= (unclosed"), code="invalid_value", param="grammar")

    # ---- the context ---------------------------------------------------------------------------
    add("context: a prompt longer than the context", msg(role="user", content=words_over),
        code="context_length_exceeded", param="~messages")
    add("context: prompt + max_tokens over the context", chat(messages=[{"role": "user", "content": words_half}],
                                                              max_tokens=600),
        code="context_length_exceeded", param="max_tokens|~messages")
    add("context: max_tokens equal to the context", chat(max_tokens=1024), code="context_length_exceeded",
        param="max_tokens|~messages")
    add("context: a completions prompt longer than the context", compl(prompt=words_over), path=COMPL,
        code="context_length_exceeded", param="~prompt")

    # ---- completions ---------------------------------------------------------------------------
    def addc(nm, body, code, param, status=400):
        add("completions: " + nm, body, status=status, code=code, param=param, path=COMPL)

    addc("prompt as number", compl(prompt=5), "invalid_type", "prompt")
    addc("prompt as object", compl(prompt={"text": "hi"}), "invalid_type", "prompt")
    addc("prompt empty string", compl(prompt=""), "invalid_value", "prompt")
    addc("prompt empty array", compl(prompt=[]), "invalid_value", "prompt")
    addc("prompt token id out of vocabulary", compl(prompt=[1, 10000000]), "invalid_value", "~prompt")
    addc("prompt negative token id", compl(prompt=[1, -1]), "invalid_value", "~prompt")
    addc("prompt mixing ids and strings", compl(prompt=[1, "a"]), "invalid_type", "~prompt")
    addc("prompt with an empty id array", compl(prompt=[[1, 2], []]), "invalid_value", "~prompt")
    addc("prompt missing", compl(prompt=DROP), "missing_field", "prompt")
    addc("suffix on a model without FIM tokens", compl(suffix="end"), "invalid_value", "suffix")
    addc("logprobs 6", compl(logprobs=6), "invalid_value", "logprobs")
    addc("logprobs -1", compl(logprobs=-1), "invalid_value", "logprobs")
    addc("logprobs as bool", compl(logprobs=True), "invalid_type", "logprobs")
    addc("best_of 1 with n 2", compl(best_of=1, n=2), "invalid_value", "best_of")
    addc("best_of 3 streamed", compl(best_of=3, stream=True), "invalid_value", "best_of")
    addc("best_of 17", compl(best_of=17), "invalid_value", "best_of")
    addc("echo as string", compl(echo="yes"), "invalid_type", "echo")
    addc("messages", compl(messages=[{"role": "user", "content": "hi"}]), NOT_HERE, "messages")
    addc("top_logprobs", compl(top_logprobs=2), NOT_HERE, "top_logprobs")
    addc("max_completion_tokens", compl(max_completion_tokens=4), NOT_HERE, "max_completion_tokens")
    addc("temperature 3", compl(temperature=3), "invalid_value", "temperature")
    addc("n 17", compl(n=17), "invalid_value", "n")
    addc("truncated JSON", J(compl())[:-3], "invalid_json", None)

    # ---- llama-server routes -------------------------------------------------------------------
    add("tokenize: without content", {"add_special": True}, path="/tokenize", code="missing_field", param="content")
    add("tokenize: content as number", {"content": 5}, path="/tokenize", code="invalid_type", param="content")
    add("tokenize: with_pieces as string", {"content": "hi", "with_pieces": "yes"}, path="/tokenize",
        code="invalid_type", param="with_pieces")
    add("tokenize: add_special as string", {"content": "hi", "add_special": "no"}, path="/tokenize",
        code="invalid_type", param="add_special")
    add("detokenize: tokens as strings", {"tokens": ["1", "2"]}, path="/detokenize", code="invalid_type",
        param="~tokens")
    add("tokenize: truncated JSON", b'{"content": "hi"', path="/tokenize", code="invalid_json")
    add("detokenize: tokens as string", {"tokens": "1,2"}, path="/detokenize", code="invalid_type", param="~tokens")
    add("detokenize: an id out of range", {"tokens": [1, 10000000]}, path="/detokenize", code="invalid_value",
        param="~tokens")
    add("detokenize: a negative id", {"tokens": [-3]}, path="/detokenize", code="invalid_value", param="~tokens")
    add("detokenize: without tokens", {}, path="/detokenize", code="missing_field", param="tokens")
    add("apply-template: without messages", {}, path="/apply-template", code="missing_field", param="messages")
    add("apply-template: messages as string", {"messages": "hi"}, path="/apply-template", code="invalid_type",
        param="messages")
    add("apply-template: unknown role", {"messages": [{"role": "wizard", "content": "hi"}]}, path="/apply-template",
        code="invalid_value", param="~role")

    # ---- vLLM's tokenizer and render routes (what vllm-router asks a replica) -------------------
    add("vllm tokenize: prompt as number", {"prompt": 5}, path="/tokenize", code="invalid_type",
        param="prompt")
    add("vllm tokenize: unknown field", {"prompt": "hi", "frobnicate": 1}, path="/tokenize", code="unknown_field",
        param="frobnicate")
    add("vllm tokenize: messages as string", {"messages": "hi"}, path="/tokenize", code="invalid_type",
        param="messages")
    add("vllm tokenize: continue_final_message", {"messages": [{"role": "user", "content": "hi"}],
                                                  "continue_final_message": True},
        path="/tokenize", code=UNSUPPORTED, param="continue_final_message")
    add("vllm tokenize: another model", {"model": "nope", "prompt": "hi"}, 404, "model_not_found", path="/tokenize",
        param="model")
    add("render: the generation route's errors", {"messages": [{"role": "user", "content": "hi"}], "temperature": 9},
        path="/v1/chat/completions/render", code="invalid_value", param="temperature")
    add("render: no prompt", {}, path="/v1/completions/render", code="missing_field", param="prompt")
    add("chat: skip_special_tokens false", {**json.loads(valid), "skip_special_tokens": False}, code=UNSUPPORTED,
        param="skip_special_tokens")
    add("method: GET /get_load is GET-only", b"{}", 405, "method_not_allowed", path="/get_load")

    # ---- routes and methods --------------------------------------------------------------------
    add("method: GET /v1/chat/completions", None, 405, "method_not_allowed", method="GET")
    add("method: PUT /v1/chat/completions", valid, 405, "method_not_allowed", method="PUT")
    add("method: DELETE /v1/completions", None, 405, "method_not_allowed", method="DELETE", path=COMPL)
    add("method: POST /v1/models", valid, 405, "method_not_allowed", path="/v1/models")
    add("method: GET /tokenize", None, 405, "method_not_allowed", method="GET", path="/tokenize")
    add("method: PATCH /v1/chat/completions", b"{}", 405, "method_not_allowed", method="PATCH")
    add("method: OPTIONS /v1/chat/completions", None, 405, "method_not_allowed", method="OPTIONS")
    add("method: POST /health", b"{}", 405, "method_not_allowed", path="/health")
    add("route: GET /nope", None, 404, "not_found", method="GET", path="/nope")
    add("route: POST /v1/nope", valid, 404, "not_found", path="/v1/nope")
    add("route: GET /v1/chat/completions/extra", None, 404, "not_found", method="GET", path=CHAT + "/extra")
    add("model: GET /v1/models/nope", None, 404, "model_not_found", method="GET", path="/v1/models/nope")
    add("model: chat with an unknown model", chat(model="nope"), 404, "model_not_found", param="model")
    add("model: completions with an unknown model", compl(model="nope"), 404, "model_not_found", param="model",
        path=COMPL)
    add("model: the served name in another case", chat(model=name.upper()), 404, "model_not_found", param="model")

    # ---- size ----------------------------------------------------------------------------------
    big = b'{"messages": [{"role": "user", "content": "' + b"a" * (10 * 1024 * 1024) + b'"}]}'
    add("size: a 10 MB body", big, 413, "request_too_large")
    chunked = b"".join(b"%x\r\n" % len(big[i:i + 65536]) + big[i:i + 65536] + b"\r\n"
                       for i in range(0, len(big), 65536)) + b"0\r\n\r\n"
    add("size: a 10 MB body, chunked", chunked, 413, "request_too_large", headers={"Transfer-Encoding": "chunked"})
    add("http: a malformed chunked body", b"zz\r\nabc\r\n0\r\n\r\n", 400, None,
        headers={"Transfer-Encoding": "chunked"})
    return C


def build_auth_cases():
    valid = J(chat())
    C = []
    for nm, method, path, auth, body in [
            ("auth: chat without a key", "POST", CHAT, None, valid),
            ("auth: chat with a wrong key", "POST", CHAT, "Bearer nope", valid),
            ("auth: chat with the key as Basic", "POST", CHAT, "Basic k", valid),
            ("auth: chat with Bearer and no key", "POST", CHAT, "Bearer ", valid),
            ("auth: the key without a scheme", "POST", CHAT, "k", valid),
            ("auth: completions without a key", "POST", COMPL, None, J(compl())),
            ("auth: GET /v1/models without a key", "GET", "/v1/models", None, None),
            ("auth: /tokenize without a key", "POST", "/tokenize", None, J({"content": "hi"})),
            ("auth: a bad body without a key", "POST", CHAT, None, b"{oops"),
    ]:
        h = dict(JSON_CT) if body is not None else {}
        if auth is not None:
            h["Authorization"] = auth
        C.append((nm, method, path, h, body, 401, "invalid_api_key", None))
    return C


# ---- raw HTTP ------------------------------------------------------------------------------------
def raw_request(port, method, path, headers, body, timeout=60):
    """One request on its own socket, exactly these bytes. Stops sending when the server answers early
    (a 413 before the body is read). Returns (status, headers (lower-cased), body bytes)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close"]
    h = dict(headers)
    if body is not None and not any(k.lower() in ("content-length", "transfer-encoding") for k in h):
        h["Content-Length"] = str(len(body))
    lines += [f"{k}: {v}" for k, v in h.items()]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        view = memoryview(data)
        try:
            while view:
                r, _, _ = select.select([s], [], [], 0)
                if r:  # an early answer
                    break
                n = s.send(view[:65536])
                view = view[n:]
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: its answer may be waiting
        resp = http.client.HTTPResponse(s, method=method)
        resp.begin()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        s.close()


def param_ok(param, want):
    if want is None:
        return True
    if not isinstance(param, str):
        return False
    for alt in want.split("|"):
        if alt.startswith("~") and alt[1:] in param:
            return True
        if param == alt:
            return True
    return False


def check_error_response(status, headers, body, want_status, want_code, want_param):
    """'' when the answer is the expected error, else what is wrong."""
    problems = []
    if status != want_status:
        problems.append(f"status {status}, want {want_status}")
    ct = headers.get("content-type", "")
    if ct.split(";")[0].strip().lower() != "application/json":
        problems.append(f"Content-Type {ct!r}")
    try:
        j = json.loads(body)
    except ValueError:
        return "; ".join(problems + [f"body not JSON: {body[:200]!r}"])
    e = j.get("error") if isinstance(j, dict) else None
    if not isinstance(e, dict):
        return "; ".join(problems + [f"no error object: {body[:200]!r}"])
    missing = [k for k in ("message", "type", "param", "code") if k not in e]
    if missing:
        problems.append(f"error without {missing}")
    if not isinstance(e.get("message"), str) or not e.get("message"):
        problems.append(f"message {e.get('message')!r}")
    if e.get("type") != TYPE_OF.get(want_status):
        problems.append(f"type {e.get('type')!r}, want {TYPE_OF.get(want_status)!r}")
    codes = want_code if isinstance(want_code, tuple) else (want_code,)
    if want_code is not None and e.get("code") not in codes:
        problems.append(f"code {e.get('code')!r}, want {' or '.join(codes)}")
    if not param_ok(e.get("param"), want_param):
        problems.append(f"param {e.get('param')!r}, want {want_param}")
    if problems:
        problems.append(f"message {e.get('message')!r}")
    return "; ".join(problems)


def run_cases(c, srv, cases):
    for nm, method, path, headers, body, status, code, param in cases:
        t0 = time.monotonic()
        try:
            st, h, b = raw_request(srv.port, method, path, headers, body)
            why = check_error_response(st, h, b, status, code, param)
        except (OSError, http.client.HTTPException) as e:
            why = f"{type(e).__name__}: {e}"
        dt = time.monotonic() - t0
        c.check(not why, f"{nm}: {status}" + (f" {code if isinstance(code, str) else '/'.join(code)}" if code else "")
                + (f" ({dt:.1f} s)" if dt > 2 else ""), why)
        if not srv.running():
            c.fail(f"the server died after '{nm}'", srv.log_tail())
            return False
    return True


# ---- behaviour -----------------------------------------------------------------------------------
def normal_chat(srv, timeout=60, headers=None):
    r = srv.request("POST", CHAT, chat(temperature=0), headers=headers, timeout=timeout)
    ok = r.status == 200 and r.json()["choices"][0]["message"]["content"] is not None
    return ok, r


def check_stall(c, srv):
    """Headers, then nothing: the server must go on serving others meanwhile."""
    stalled = []
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  "Content-Length: 200\r\n\r\n".encode())
        stalled.append(s)
        s2 = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s2.sendall(f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Ty".encode())  # headers cut short
        stalled.append(s2)
        t0 = time.monotonic()
        ok, r = normal_chat(srv, timeout=30)
        c.check(ok, f"behaviour: a client stalls after its headers; a normal request meanwhile succeeds "
                    f"({time.monotonic() - t0:.1f} s)", repr(r))
        r2 = srv.request("GET", "/health", timeout=10)
        c.check(r2.status == 200, "behaviour: /health while two clients stall", repr(r2))
    except OSError as e:
        c.fail("behaviour: a client stalls after its headers; a normal request meanwhile succeeds",
               f"{type(e).__name__}: {e}")
    finally:
        for s in stalled:
            s.close()


def check_disconnect(c, srv, ggflow, model):
    """A streamed request whose client goes away: cancelled, its KV blocks freed."""
    what = "behaviour: a client disconnects mid-stream; running 0 and kv_cache_usage_perc 0 within 10 s"
    body = J(chat(messages=[{"role": "user", "content": "Tell me a very long story about a lighthouse keeper."}],
                  max_tokens=900, stream=True, temperature=0.8, seed=3,
                  logit_bias={str(eos_id(ggflow, model)): -100}))
    try:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        s.sendall((f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
        got = b""
        deadline = time.monotonic() + 30
        while got.count(b"data:") < 4 and time.monotonic() < deadline:
            d = s.recv(4096)
            if not d:
                break
            got += d
        running = srv.metrics().get("ggflow:num_requests_running")
        s.close()
        if not c.check(got.startswith(b"HTTP/1.1 200") and got.count(b"data:") >= 4,
                       "behaviour: a long stream starts (before the disconnect)", repr(got[:300])):
            return
        c.check(running is not None and running >= 1, "behaviour: /metrics counts the streaming request as running",
                f"num_requests_running {running}")
        t0 = time.monotonic()
        m = srv.wait_idle(timeout=10)
        c.check(m.get("ggflow:num_requests_running") == 0 and m.get("ggflow:kv_cache_usage_perc") == 0,
                what + f" ({time.monotonic() - t0:.1f} s)", idle_detail(m))
    except OSError as e:
        c.fail(what, f"{type(e).__name__}: {e}")


def open_stream(srv, prompt, headers=None, max_tokens=900, eos=None):
    """A streamed chat request on a raw socket; returns (socket, bytes read so far: the response head)."""
    body = J(chat(messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, stream=True,
                  temperature=0.8, seed=3, **({"logit_bias": {str(eos): -100}} if eos is not None else {})))
    h = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
    s.sendall((f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{h}"
               f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
    got = b""
    while b"\r\n\r\n" not in got:
        d = s.recv(4096)
        if not d:
            break
        got += d
    return s, got


def wait_metric(srv, name, want, timeout):
    deadline = time.monotonic() + timeout
    while True:
        v = srv.metrics().get(name)
        if v == want or time.monotonic() > deadline:
            return v
        time.sleep(0.1)


def check_queued_disconnect(c, srv, ggflow, model, headers):
    """--parallel 1: a streamed request waiting in the queue whose client goes away leaves the queue
    (docs/SERVER.md: the keep-alive comments notice it) while the running one goes on."""
    what = "behaviour: a queued stream's client disconnects; it leaves the queue while the running one goes on"
    eos = eos_id(ggflow, model)
    a = b = None
    try:
        a, head_a = open_stream(srv, "Tell me a very long story about a lighthouse keeper.", headers, eos=eos)
        if not c.check(head_a.startswith(b"HTTP/1.1 200") and wait_metric(srv, "ggflow:num_requests_running", 1, 10) == 1,
                       "behaviour: --parallel 1: a long stream runs", repr(head_a[:200])):
            return
        b, head_b = open_stream(srv, "Tell me a very long story about a sailor.", headers, eos=eos)
        waiting = wait_metric(srv, "ggflow:num_requests_waiting", 1, 10)
        if not c.check(head_b.startswith(b"HTTP/1.1 200") and waiting == 1,
                       "behaviour: --parallel 1: a second stream waits in the queue (num_requests_waiting 1)",
                       f"{head_b[:200]!r} waiting {waiting}"):
            return
        b.close()
        b = None
        t0 = time.monotonic()
        waiting = wait_metric(srv, "ggflow:num_requests_waiting", 0, 15)
        m = srv.metrics()
        c.check(waiting == 0 and m.get("ggflow:num_requests_running") == 1, what + f" ({time.monotonic() - t0:.1f} s)",
                idle_detail(m))
        a.close()
        a = None
        m = srv.wait_idle(timeout=10)
        c.check(m.get("ggflow:num_requests_running") == 0 and m.get("ggflow:kv_cache_usage_perc") == 0,
                "behaviour: then the running stream's client disconnects too; the server is idle", idle_detail(m))
    except OSError as e:
        c.fail(what, f"{type(e).__name__}: {e}")
    finally:
        for s in (a, b):
            if s is not None:
                s.close()


def check_many_disconnects(c, srv, ggflow, model):
    """12 streams at once (more than --parallel 8: some wait), their clients gone at different moments:
    right after sending, after the head, after a few chunks. Nothing is left running or held."""
    what = "behaviour: 12 concurrent streams whose clients leave at different moments; the server is idle after"
    eos = eos_id(ggflow, model)
    socks = []
    try:
        for i in range(12):
            s, head = open_stream(srv, f"Tell me a long story number {i}.", eos=eos) if i % 3 else (None, b"")
            if s is None:  # gone before the answer
                body = J(chat(messages=[{"role": "user", "content": f"Story {i}."}], max_tokens=900, stream=True))
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
                s.sendall((f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           f"Content-Length: {len(body)}\r\n\r\n").encode() + body)
                s.close()
                continue
            socks.append(s)
        for i, s in enumerate(socks):
            got = b""
            while got.count(b"data:") < i % 4:
                d = s.recv(4096)
                if not d:
                    break
                got += d
            s.close()
        socks = []
        t0 = time.monotonic()
        m = srv.wait_idle(timeout=15)
        dt = time.monotonic() - t0
        time.sleep(1.0)  # and still idle a second later (nothing registered late)
        m2 = srv.metrics()
        idle = [x.get("ggflow:num_requests_running") == 0 and x.get("ggflow:num_requests_waiting") == 0
                and x.get("ggflow:kv_cache_usage_perc") == 0 for x in (m, m2)]
        c.check(all(idle), what + f" ({dt:.1f} s)", f"{idle_detail(m)}; 1 s later {idle_detail(m2)}")
    except OSError as e:
        c.fail(what, f"{type(e).__name__}: {e}")
    finally:
        for s in socks:
            s.close()


def check_rapid_close(c, srv):
    try:
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.close()
        for i in range(5):  # and half a request, then gone
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"mess"[: 10 + 10 * i])
            s.close()
        r = srv.request("GET", "/health", timeout=10)
        ok, r2 = normal_chat(srv, timeout=60)
        c.check(r.status == 200 and ok, "behaviour: 20 connect-then-close sockets (and 5 cut requests); "
                                        "the server goes on", f"{r} {r2}")
    except OSError as e:
        c.fail("behaviour: 20 connect-then-close sockets", f"{type(e).__name__}: {e}")


def check_content_type(c, srv):
    # docs/SERVER.md does not ask for a Content-Type: JSON is accepted whatever the header says.
    r = srv.request("POST", CHAT, J(chat(temperature=0)), headers={"Content-Type": "text/plain"})
    c.check(r.status == 200, "behaviour: a valid body with Content-Type text/plain is accepted", repr(r))


def check_accepted(c, srv):
    """What docs/SERVER.md accepts must not be refused (a validator too strict is a bug too)."""
    hi = {"role": "user", "content": "hi"}
    ok_bodies = [
        ("response_format text", chat(response_format={"type": "text"})),
        ("user, store, metadata, service_tier", chat(user="u1", store=False, metadata={"k": "v"}, service_tier="auto")),
        ("null for optional fields", chat(max_tokens=None, temperature=None, top_p=None, stop=None, seed=None, n=None,
                                          logit_bias=None)),
        ("assistant content null", chat(messages=[hi, {"role": "assistant", "content": None}, hi])),
        ("content as text parts", chat(messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])),
        ("system and developer roles", chat(messages=[{"role": "system", "content": "Be brief."},
                                                       {"role": "developer", "content": "Be kind."}, hi])),
        ("max_completion_tokens", chat(max_tokens=DROP, max_completion_tokens=2)),
        ("stop with 4 strings", chat(stop=["a1", "b2", "c3", "d4"])),
        ("boundary values", chat(temperature=2, top_p=1, min_p=1, top_k=-1, presence_penalty=-2, frequency_penalty=2,
                                 repetition_penalty=2, n=16, logprobs=True, top_logprobs=20,
                                 logit_bias={"1": -100, "2": 100})),
        ("stream_options with stream", chat(stream=True, stream_options={"include_usage": False})),
        ("return_token_ids", chat(return_token_ids=True)),
    ]
    bad = []
    for nm, body in ok_bodies:
        r = srv.request("POST", CHAT, body, timeout=60)
        if r.status != 200:
            bad.append(f"{nm}: {r}")
    for nm, body in [("completions: a list of id lists", compl(prompt=[[1, 2], [3]])),
                     ("completions: echo, logprobs 5, best_of = n", compl(echo=True, n=2, best_of=2)),
                     ("completions: logprobs 5", compl(logprobs=5)),
                     ("completions: echo with logprobs", compl(echo=True, logprobs=1))]:
        r = srv.request("POST", COMPL, body, timeout=60)
        if r.status != 200:
            bad.append(f"{nm}: {r}")
    c.check(not bad, f"behaviour: {len(ok_bodies) + 4} requests with fields docs/SERVER.md accepts get 200",
            "; ".join(bad))


def check_after(c, srv, what):
    ok, r = normal_chat(srv)
    c.check(ok, f"{what}: a normal chat request succeeds", repr(r))
    h = srv.request("GET", "/health", timeout=10)
    c.check(h.status == 200 and h.json().get("status") == "ok", f"{what}: /health is 200 {{\"status\": \"ok\"}}",
            repr(h))
    m = srv.wait_idle(timeout=10)
    c.check(m.get("ggflow:kv_cache_usage_perc") == 0 and m.get("ggflow:num_requests_running") == 0,
            f"{what}: /metrics shows kv_cache_usage_perc 0", idle_detail(m))


def main():
    ggflow, model, name = setup(__doc__)
    t0 = time.monotonic()

    c = Checker()
    cases = build_cases(name)
    auth_cases = build_auth_cases()
    with Server(ggflow, model, TEST_FLAGS, name="server") as srv:
        alive = run_cases(c, srv, cases)
        if alive:
            check_content_type(c, srv)
            check_accepted(c, srv)
            check_stall(c, srv)
            check_disconnect(c, srv, ggflow, model)
            check_many_disconnects(c, srv, ggflow, model)
            check_rapid_close(c, srv)
            check_after(c, srv, "after all cases")
            rc = srv.stop()
            c.check(rc == 0, "the server exits 0 on SIGTERM", f"exit {rc}")
    auth_flags = ["-t", "2", "--parallel", "1", "--max-queue", "2", "--kv-cache", "64MiB", "--ctx-size", "1024",
                  "--api-key", "k"]
    with Server(ggflow, model, auth_flags, name="server --api-key k --parallel 1") as srv:
        if run_cases(c, srv, auth_cases):
            r = srv.request("GET", "/health", timeout=10)
            c.check(r.status == 200, "auth: /health is 200 without a key", repr(r))
            r = srv.request("GET", "/v1/models", headers={"Authorization": "Bearer k"}, timeout=10)
            c.check(r.status == 200 and any(m.get("id") == name for m in r.json().get("data", [])),
                    "auth: GET /v1/models with the key", repr(r))
            ok, r = normal_chat(srv, headers={"Authorization": "Bearer k"})
            c.check(ok, "auth: a chat request with the key", repr(r))
            check_queued_disconnect(c, srv, ggflow, model, {"Authorization": "Bearer k"})
    print(f"check_bad_requests: {time.monotonic() - t0:.0f} s, {len(cases) + len(auth_cases)} table cases")
    return c.finish(f"bad-request cases: {c.passed} passed" + (f", {len(c.failures)} failed" if c.failures else ""))


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Structured output through `ggflow serve` and the official `openai` client.

    check_structured.py --ggflow build/ggflow [--model models/smollm2-135m-instruct-q4_1.gguf] [--out-dir DIR]

One line per check (`ok` / `FAIL`); exit 0 when all pass, 1 otherwise, 77 when the model (or the
`openai` / `jsonschema` package) is missing, unless GGFLOW_REQUIRE_MODELS=1. What it holds ggflow to:
- response_format json_schema: SCHEMAS (60, drawn by a fixed seed from the subset OpenAI documents:
  types, enum, const, required, additionalProperties false, anyOf, $ref/$defs (recursive too),
  arrays with min/maxItems, string formats and lengths, integer ranges, patterns, nested objects),
  each answered with sampled decoding (temperature 1, 8 at a time): every answer ends with
  finish_reason stop, parses as JSON and validates against its schema (the `jsonschema` package);
- response_format json_object (any JSON object), streamed and not, and a recursive schema: every
  answer that ends by itself is valid (a 135M model may also nest until max_tokens: most end);
  llama-server's `json_schema`
  and `grammar` (GBNF) fields on /v1/completions and /v1/chat/completions;
- greedy constrained answers equal `ggflow run --json-schema` on the same prompt (sdpa and paged
  layouts) and themselves in a batch of concurrent requests;
- errors answered 400 naming the problem: an unsupported keyword (named), a bad GBNF grammar (line
  and column), two constraints at once, a malformed response_format; the server stays alive.
"""
import json
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from server_util import Checker, loopback_only, require_packages, Server, TEST_FLAGS, run_ggflow, setup  # noqa: E402

loopback_only()
jsonschema, openai = require_packages("jsonschema", "openai")
OpenAI = openai.OpenAI

c = Checker()
MAX_TOKENS = 384


# ---- the schemas -------------------------------------------------------------------------------
def field_schemas(rng):
    """(description, schema) of one property, drawn from every supported keyword."""
    pool = [
        ("a name", {"type": "string", "maxLength": rng.choice([8, 16, 32])}),
        ("a short word", {"type": "string", "minLength": 1, "maxLength": 12}),
        ("an age", {"type": "integer", "minimum": 0, "maximum": rng.choice([99, 120, 150])}),
        ("a count", {"type": "integer", "minimum": rng.choice([1, 5]), "maximum": rng.choice([10, 50])}),
        ("a score", {"type": "number"}),
        ("a flag", {"type": "boolean"}),
        ("a colour", {"enum": rng.sample(["red", "green", "blue", "black", "white", "teal"], rng.choice([2, 3, 4]))}),
        ("a level", {"enum": [1, 2, 3, "max", None]}),
        ("a version", {"const": "v1"}),
        ("tags", {"type": "array", "items": {"type": "string", "maxLength": 10}, "minItems": 1,
                  "maxItems": rng.choice([2, 3, 4])}),
        ("numbers", {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "maxItems": 4}),
        ("a date", {"type": "string", "format": "date"}),
        ("an id", {"type": "string", "format": "uuid"}),
        ("a time", {"type": "string", "format": "time"}),
        ("a code", {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"}),
        ("a nullable note", {"type": ["string", "null"], "maxLength": 20}),
        ("a value", {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 10}]}),
        ("a point", {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                     "required": ["x", "y"], "additionalProperties": False}),
        ("a pair", {"type": "array", "prefixItems": [{"type": "string", "maxLength": 8}, {"type": "integer"}],
                    "minItems": 2, "maxItems": 2}),
    ]
    return pool


def make_schemas(n=60, seed=29):
    rng = random.Random(seed)
    out = []
    names = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    for i in range(n):
        kind = i % 6
        if kind == 4:  # $ref / $defs (shared definitions; recursion is checked greedily, below)
            out.append({
                "$defs": {"person": {"type": "object",
                                     "properties": {"name": {"type": "string", "maxLength": 12},
                                                    "age": {"type": "integer", "minimum": 0, "maximum": 99}},
                                     "required": ["name"], "additionalProperties": False}},
                "type": "object",
                "properties": {"owner": {"$ref": "#/$defs/person"},
                               "friends": {"type": "array", "items": {"$ref": "#/$defs/person"},
                                           "maxItems": rng.choice([1, 2])}},
                "required": ["owner"], "additionalProperties": False})
            continue
        if kind == 5:  # anyOf of two object shapes
            out.append({"anyOf": [
                {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "integer", "minimum": 1, "maximum": 9}},
                 "required": ["kind", "r"], "additionalProperties": False},
                {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1, "maximum": 9}},
                 "required": ["kind", "side"], "additionalProperties": False}]})
            continue
        fields = rng.sample(field_schemas(rng), rng.choice([1, 2, 3]))
        props, required = {}, []
        for j, (desc, s) in enumerate(fields):
            key = names[(i + j) % len(names)] + str(j)
            props[key] = dict(s, description=desc)
            if rng.random() < 0.7 or kind == 0:
                required.append(key)
        schema = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
        if kind == 3:  # nested one level
            schema = {"type": "object", "properties": {"item": schema, "ok": {"type": "boolean"}},
                      "required": ["item", "ok"], "additionalProperties": False}
        out.append(schema)
    return out


SCHEMAS = make_schemas()
TREE = {"$defs": {"node": {"type": "object",
                           "properties": {"label": {"type": "string", "maxLength": 10},
                                          "children": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
                           "required": ["label"], "additionalProperties": False}},
        "$ref": "#/$defs/node"}

# RFC 3339 (what the grammar's formats write); jsonschema's own "time" checker is draft 3's HH:MM:SS.
FORMATS = jsonschema.FormatChecker(["date", "uuid", "email", "ipv4"])


@FORMATS.checks("time")
def rfc3339_time(s):
    import re
    return not isinstance(s, str) or re.fullmatch(r"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])", s)


def chat(client, name, prompt, **kw):
    return client.chat.completions.create(model=name, messages=[{"role": "user", "content": prompt}], **kw)


# ---- the checks --------------------------------------------------------------------------------
def check_schemas(client, name):
    def one(i):
        schema = SCHEMAS[i]
        r = chat(client, name, "Answer with a JSON document for this task: describe something.", temperature=1.0,
                 seed=1000 + i, max_tokens=MAX_TOKENS,
                 response_format={"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema, "strict": True}})
        ch = r.choices[0]
        if ch.finish_reason != "stop":
            return f"schema {i}: finish_reason {ch.finish_reason} after {r.usage.completion_tokens} tokens: {ch.message.content[:120]!r}"
        try:
            doc = json.loads(ch.message.content)
        except json.JSONDecodeError as e:
            return f"schema {i}: not JSON ({e}): {ch.message.content[:200]!r}"
        try:
            jsonschema.validate(doc, schema, format_checker=FORMATS)
        except jsonschema.ValidationError as e:
            return f"schema {i}: does not validate ({e.message}): {ch.message.content[:200]!r}"
        return None

    t0 = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        problems = [p for p in pool.map(one, range(len(SCHEMAS))) if p]
    c.check(not problems, f"{len(SCHEMAS)} schemas x temperature 1: every answer stops, parses and validates "
                          f"({len(SCHEMAS) - len(problems)} of {len(SCHEMAS)}, {time.monotonic() - t0:.0f} s)",
            "; ".join(problems[:5]))


def stopped_valid(answers, validate):
    """(problems, stopped): every answer that ended by itself (stop) must pass `validate`; one that
    ran into max_tokens is a small model nesting on and on, which is about the model, not validity."""
    problems, stopped = [], 0
    for text, finish in answers:
        if finish != "stop":
            continue
        stopped += 1
        try:
            validate(json.loads(text))
        except Exception as e:  # noqa: BLE001
            problems.append(f"{type(e).__name__}: {e}: {text[:160]!r}")
    return problems, stopped


def check_json_object(client, name):
    fmt = {"type": "json_object"}
    answers = []
    for seed in range(4):
        r = chat(client, name, "Give me a JSON object about a cat.", temperature=1.0, seed=seed, max_tokens=512,
                 response_format=fmt)
        answers.append((r.choices[0].message.content, r.choices[0].finish_reason))
    for seed in range(4):
        text, finish = "", None
        for chunk in chat(client, name, "Give me a JSON object about a dog.", temperature=1.0, seed=seed, max_tokens=512,
                          response_format=fmt, stream=True):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        answers.append((text, finish))

    def is_object(doc):
        if not isinstance(doc, dict):
            raise ValueError("not an object")
    problems, stopped = stopped_valid(answers, is_object)
    # The count only keeps the check from passing on nothing: how many of these seeds' samples
    # stop within 512 tokens is the model's (3 to 5 of 8 over the kernels' summation orders).
    c.check(not problems and stopped >= 3, f"json_object (4 plain, 4 streamed, temperature 1): {stopped} of 8 ended by "
                                           "themselves, each a JSON object", "; ".join(problems[:3]))


def check_llama_fields(client, name):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}}, "required": ["city"],
              "additionalProperties": False}
    r = client.completions.create(model=name, prompt="The capital of France as JSON:", max_tokens=64, temperature=0,
                                  extra_body={"json_schema": schema})
    try:
        jsonschema.validate(json.loads(r.choices[0].text), schema)
        ok = True
    except Exception:  # noqa: BLE001
        ok = False
    c.check(ok, "completions json_schema (llama-server's field)", repr(r.choices[0].text[:200]))
    gbnf = 'root ::= ("yes" | "no") " because " [a-z ]{1,30} "."'
    for ep in ("chat", "completions"):
        if ep == "chat":
            r = chat(client, name, "Is the sky blue?", temperature=1.0, seed=2, max_tokens=64, extra_body={"grammar": gbnf})
            text = r.choices[0].message.content
        else:
            r = client.completions.create(model=name, prompt="Is the sky blue? Answer:", max_tokens=64, temperature=1.0,
                                          seed=2, extra_body={"grammar": gbnf})
            text = r.choices[0].text
        import re
        c.check(re.fullmatch(r"(yes|no) because [a-z ]{1,30}\.", text) is not None and r.choices[0].finish_reason == "stop",
                f"{ep} grammar (GBNF): the answer is a sentence of the grammar", repr(text))


def check_greedy(client, name, ggflow, model):
    schema = SCHEMAS[0]
    prompt = "Describe a programmer as JSON."
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}
    alone = chat(client, name, prompt, temperature=0, max_tokens=MAX_TOKENS, response_format=fmt).choices[0].message.content
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(schema, f)
    try:
        for engine in ("paged", "sdpa"):
            out = run_ggflow([ggflow, "run", "-m", model, "--chat", "-p", prompt, "--json-schema", f.name, "--temperature", "0",
                              "-n", str(MAX_TOKENS), "-t", "2", "--engine", engine])
            c.check(out == alone, f"greedy constrained: the server equals ggflow run --engine {engine}",
                    f"{alone[:120]!r} vs {out[:120]!r}")
    finally:
        os.unlink(f.name)
    with ThreadPoolExecutor(8) as pool:
        outs = list(pool.map(lambda i: chat(client, name, prompt if i == 0 else f"Write a poem number {i}.", temperature=0,
                                            max_tokens=MAX_TOKENS, response_format=fmt if i % 2 == 0 else None
                                            ).choices[0].message.content, range(8)))
    c.check(outs[0] == alone, "greedy constrained: the same in a batch of 8 (constrained and free requests mixed)",
            f"{alone[:120]!r} vs {outs[0][:120]!r}")
    answers = []
    for seed in range(6):
        r = chat(client, name, "Describe a family tree as JSON.", temperature=1.0, seed=seed, max_tokens=512,
                 response_format={"type": "json_schema", "json_schema": {"name": "tree", "schema": TREE}}).choices[0]
        answers.append((r.message.content, r.finish_reason))
    problems, stopped = stopped_valid(answers, lambda d: jsonschema.validate(d, TREE))
    c.check(not problems and stopped >= 2, f"a recursive schema ($ref to its own $defs), temperature 1: {stopped} of 6 ended "
                                           "by themselves, each valid", "; ".join(problems[:3]))


def check_errors(client, name):
    def bad(what, expect, **kw):
        try:
            chat(client, name, "hi", max_tokens=8, **kw)
            c.fail(what, "accepted")
        except openai.BadRequestError as e:
            msg = str(e)
            c.check(all(x in msg for x in expect), what + ": 400 " + " / ".join(expect), msg[:300])

    bad("an unsupported keyword is named", ["patternProperties"],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "patternProperties": {"^a": {"type": "string"}}}}})
    bad("a bad GBNF grammar: line and column", ["grammar", "line 1"], extra_body={"grammar": 'root ::= "a" undefined_rule'})
    bad("left recursion is refused", ["grammar", "left"], extra_body={"grammar": 'root ::= root "a" | "a"'})
    bad("two constraints at once", ["grammar", "response_format"], response_format={"type": "json_object"},
        extra_body={"grammar": 'root ::= "a"'})
    bad("response_format without a schema", ["json_schema", "schema"], response_format={"type": "json_schema"})
    bad("an unknown response_format type", ["response_format.type"], response_format={"type": "xml"})
    r = chat(client, name, "Say hi.", max_tokens=8, temperature=0)
    c.check(r.choices[0].finish_reason in ("stop", "length"), "the server answers after the errors")


def main():
    ggflow, model, name = setup(__doc__)
    t_start = time.monotonic()
    flags = [f for f in TEST_FLAGS]
    flags[flags.index("--ctx-size") + 1] = "2048"  # room for the 1024-token answers below
    flags[flags.index("--kv-cache") + 1] = "128MiB"
    with Server(ggflow, model, flags, name="server") as srv:
        client = OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0, timeout=600)
        c.run("schemas", check_schemas, client, name)
        c.run("json_object", check_json_object, client, name)
        c.run("llama-server fields", check_llama_fields, client, name)
        c.run("greedy", check_greedy, client, name, ggflow, model)
        c.run("errors", check_errors, client, name)
    print(f"check_structured: {time.monotonic() - t_start:.0f} s")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Write the expected renderings of every chat template, for ggflow's template conformance test.

The oracle is Python's jinja2, set up as Hugging Face transformers sets it up for
`apply_chat_template`: ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols and the
`{% generation %}` tag), a `raise_exception` global, `strftime_now` and transformers' `tojson`
(json.dumps with ensure_ascii=False). `strftime_now` uses a fixed clock (FIXED_NOW) so that the
outputs are reproducible; the C++ test sets the same clock.

Inputs:  ../shared/data/chat-templates/*.jinja, plus `tokenizer.chat_template` of the real models
         in models/ (extracted to tests/text/data/templates/models/<model>.jinja).
Cases:   tests/text/data/templates/cases.json (message lists, tools, add_generation_prompt).
Output:  tests/text/data/templates/expected/<template>.json:
         {"template": path relative to the repo or "shared:NAME", "cases": {case: {"output": s} | {"error": s}}}
Rerun:   .venv/bin/python python/gen_template_expected.py
"""
import datetime
import json
import sys
from pathlib import Path

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "chat-templates"
DATA = ROOT / "tests" / "text" / "data" / "templates"
MODELS = ["smollm2-135m-instruct-q4_1.gguf", "gemma3-270m-q4_k_m.gguf",
          # the real-size models (python/link_models.py --real-models, `make models`)
          "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"]
FIXED_NOW = datetime.datetime(2025, 3, 7, 14, 5, 9)  # must match kFixedNow in the C++ test
BOS, EOS = "<s>", "</s>"


class GenerationTag(jinja2.ext.Extension):
    """transformers' AssistantTracker: `{% generation %}...{% endgeneration %}` renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_render", [])
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def model_templates():
    """Extract tokenizer.chat_template of each real model (skipping models without one)."""
    import gguf

    out = []
    for name in MODELS:
        path = ROOT / "models" / name
        if not path.exists():
            print(f"skip {name}: not in models/ (run scripts/setup.sh)", file=sys.stderr)
            continue
        reader = gguf.GGUFReader(str(path))
        field = reader.fields.get("tokenizer.chat_template")
        if field is None:
            print(f"note {name}: has no tokenizer.chat_template", file=sys.stderr)
            continue
        text = bytes(field.parts[field.data[0]]).decode("utf-8")
        dest = DATA / "models" / (Path(name).stem + ".jinja")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        out.append((dest.stem, dest.relative_to(ROOT).as_posix(), text))
    return out


def render(env, source, case):
    try:
        template = env.from_string(source)
    except jinja2.exceptions.TemplateError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    variables = {"messages": case["messages"], "add_generation_prompt": case["add_generation_prompt"],
                 "bos_token": BOS, "eos_token": EOS}
    if "tools" in case:
        variables["tools"] = case["tools"]
    try:
        return {"output": template.render(**variables)}
    except Exception as e:  # noqa: BLE001 - any failure of the template is an expected error
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    cases = json.loads((DATA / "cases.json").read_text(encoding="utf-8"))
    env = make_env()
    templates = [(p.stem, "shared:" + p.name, p.read_text(encoding="utf-8"))
                 for p in sorted(SHARED.glob("*.jinja"))]
    templates += model_templates()
    outdir = DATA / "expected"
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("*.json"):
        old.unlink()
    n_out = n_err = 0
    for stem, ref, source in templates:
        results = {}
        for case in cases:
            r = render(env, source, case)
            results[case["name"]] = r
            n_out += "output" in r
            n_err += "error" in r
        doc = {"template": ref, "cases": results}
        (outdir / f"{stem}.json").write_text(
            json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{len(templates)} templates x {len(cases)} cases: {n_out} outputs, {n_err} errors")


if __name__ == "__main__":
    main()

"""Reads deploy/'s kustomizations and validates each object against its published schema.

    objs = load_kustomization(ROOT / "deploy" / "gateway")   # [Obj(file, doc)], resources resolved
    errors = validate(obj)                                    # [] when valid

Built-in kinds (Deployment, Service, Role, ...): the Kubernetes OpenAPI schemas that the PyPI
package kubernetes-validate ships, in strict mode (an unknown field is an error, as with
`kubectl apply`'s default field validation), for the oldest and the newest Kubernetes release
deploy/ supports. CRD kinds: the JSON Schemas in deploy/schemas/ (transcribed from the Gateway API
Inference Extension v1.5.0 CRDs), plus the two checks the API server adds to a CRD's schema:
unknown fields (strict field validation) and the CEL rules (x-kubernetes-validations), evaluated
here after the schema's defaults are applied, as the API server does. A CEL rule this module does
not know is an error: a schema update must come with its rule.
"""
import copy
import json
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "deploy" / "schemas"
# Kubernetes releases the built-in objects are validated against: 1.30 is the first with the
# preStop `sleep` action on by default.
K8S_VERSIONS = ("1.30", "1.37")
# Kinds no schema here covers (their CRDs are not transcribed): checked by the contract checks only.
CONTRACT_ONLY = {("gateway.networking.k8s.io/v1", "HTTPRoute")}


@dataclass
class Obj:
    file: str  # relative to the repository root
    doc: dict

    @property
    def kind(self):
        return self.doc.get("kind")

    @property
    def name(self):
        return (self.doc.get("metadata") or {}).get("name")

    def __str__(self):
        return f"{self.file}: {self.kind}/{self.name}"


def load_kustomization(folder, seen=None):
    """The objects of a kustomization folder, its `resources` (files and folders) resolved in order."""
    folder = Path(folder)
    seen = set() if seen is None else seen
    k = yaml.safe_load((folder / "kustomization.yaml").read_text())
    if k.get("kind") != "Kustomization":
        raise ValueError(f"{folder}/kustomization.yaml: kind is {k.get('kind')!r}, not Kustomization")
    unknown = set(k) - {"apiVersion", "kind", "resources"}
    if unknown:
        raise ValueError(f"{folder}/kustomization.yaml: fields this loader does not apply: {sorted(unknown)}")
    objs = []
    for res in k.get("resources", []):
        p = (folder / res).resolve()
        if p.is_dir():
            objs += load_kustomization(p, seen)
        elif p.is_file():
            if p in seen:
                continue
            seen.add(p)
            for doc in yaml.safe_load_all(p.read_text()):
                if doc is not None:
                    objs.append(Obj(str(p.relative_to(ROOT)), doc))
        else:
            raise FileNotFoundError(f"{folder}/kustomization.yaml lists {res}, which does not exist")
    return objs


def _crd_schemas():
    out = {}
    for f in sorted(SCHEMA_DIR.glob("*.json")):
        s = json.loads(f.read_text())
        gvk = s["x-kubernetes-group-version-kind"]
        out[(f"{gvk['group']}/{gvk['version']}", gvk["kind"])] = s
    return out


CRD_SCHEMAS = _crd_schemas()


def validate(obj):
    """The schema errors of one object, as readable lines ([] when it is valid)."""
    d = obj.doc
    key = (d.get("apiVersion"), d.get("kind"))
    if key in CONTRACT_ONLY:
        return []
    if key in CRD_SCHEMAS:
        return _validate_crd(d, CRD_SCHEMAS[key])
    errors = []
    for v in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(d, v, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            errors.append(f"Kubernetes {v}: {path or '(top)'}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError:
            errors.append(f"Kubernetes {v} has no {key[1]} in {key[0]}; no CRD schema in deploy/schemas either")
    return errors


# ---- CRDs -----------------------------------------------------------------------------------------
def _validate_crd(doc, schema):
    errors = []
    for e in jsonschema.Draft7Validator(schema).iter_errors(doc):
        errors.append(f"{'.'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}")
    errors += _unknown_fields(doc.get("spec"), schema["properties"]["spec"], "spec")
    if errors:
        return errors
    defaulted = copy.deepcopy(doc)
    _apply_defaults(defaulted.get("spec"), schema["properties"]["spec"])
    errors += _cel(defaulted.get("spec"), schema["properties"]["spec"], "spec")
    return errors


def _unknown_fields(value, schema, path):
    """Fields the schema does not declare (the API server's strict field validation refuses them)."""
    out = []
    if isinstance(value, dict) and "properties" in schema and "additionalProperties" not in schema:
        for k, v in value.items():
            if k not in schema["properties"]:
                out.append(f"{path}.{k}: unknown field (the schema has {sorted(schema['properties'])})")
            else:
                out += _unknown_fields(v, schema["properties"][k], f"{path}.{k}")
    elif isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += _unknown_fields(v, schema["items"], f"{path}[{i}]")
    return out


def _apply_defaults(value, schema):
    if isinstance(value, dict) and "properties" in schema:
        for k, sub in schema["properties"].items():
            if k not in value and "default" in sub:
                value[k] = copy.deepcopy(sub["default"])
            if k in value:
                _apply_defaults(value[k], sub)
    elif isinstance(value, list) and "items" in schema:
        for v in value:
            _apply_defaults(v, schema["items"])


def _port_unique(ports):
    numbers = [p.get("number") for p in ports]
    return all(numbers.count(n) == 1 for n in numbers)


# The CEL rules of the transcribed CRDs, each as the Python predicate it states over `self`.
CEL_RULES = {
    "self.kind != 'Service' || has(self.port)": lambda s: s.get("kind") != "Service" or "port" in s,
    "self.all(p1, self.exists_one(p2, p1.number==p2.number))": _port_unique,
}


def _cel(value, schema, path):
    out = []
    if value is None:
        return out
    for rule in schema.get("x-kubernetes-validations", []):
        fn = CEL_RULES.get(rule["rule"])
        if fn is None:
            out.append(f"{path}: CEL rule {rule['rule']!r} is not implemented in tests/deploy/k8s_schema.py")
        elif not fn(value):
            out.append(f"{path}: {rule['message']}")
    if isinstance(value, dict):
        for k, sub in schema.get("properties", {}).items():
            if k in value:
                out += _cel(value[k], sub, f"{path}.{k}")
    elif isinstance(value, list) and "items" in schema:
        for i, v in enumerate(value):
            out += _cel(v, schema["items"], f"{path}[{i}]")
    return out

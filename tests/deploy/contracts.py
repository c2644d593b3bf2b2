"""The static checks of deploy/ and the Dockerfile: schemas, and the contracts between the objects.

A schema says an object is well formed; these say the objects fit together and fit ggflow: the
labels the Service, the InferencePool and vllm-router select are the pods' labels, the ports
line up, the probes hit ggflow's /ready and /health, every flag is one the program accepts, the
drain fits inside the grace period, the image runs as the user the pod expects, with the shared
libraries the binary links. check_manifests.py runs them on the repository and, with
--self-test, on broken copies that each must fail.
"""
import re
from dataclasses import dataclass, field

import yaml

import dockerfile
import k8s_schema

LAYOUTS = ("base", "gateway", "router")
# Packages the runtime base image (debian:12-slim) already holds.
BASE_IMAGE_PACKAGES = {"libc6"}


@dataclass
class Bundle:
    objs: dict                     # layout -> [k8s_schema.Obj]
    dockerfile: str
    setup_sh: str
    ggflow_flags: set              # what `ggflow serve --help` lists
    router_flags: set              # what `vllm-router --help` lists
    lib_packages: dict = field(default_factory=dict)  # shared library of build/ggflow -> Debian package
    orphans: list = field(default_factory=list)       # deploy/ YAML files no kustomization lists


# ---- helpers --------------------------------------------------------------------------------------
def find(objs, kind, name=None):
    for o in objs:
        if o.kind == kind and (name is None or o.name == name):
            return o.doc
    return None


def all_of(objs, kind):
    return [o.doc for o in objs if o.kind == kind]


def pod_labels(dep):
    return ((dep.get("spec", {}).get("template", {}).get("metadata") or {}).get("labels")) or {}


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def containers(dep):
    return dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or []


def parse_args(args):
    """`--flag value` / `--flag=value` / `--flag` as {flag: value or True}; in order."""
    out, i = {}, 0
    while i < len(args):
        a = str(args[i])
        if a.startswith("-"):
            if "=" in a:
                k, v = a.split("=", 1)
                out[k] = v
            elif i + 1 < len(args) and not str(args[i + 1]).startswith("-"):
                out[a] = str(args[i + 1])
                i += 1
            else:
                out[a] = True
        else:
            out.setdefault("", []).append(a)  # a positional: no program here takes one
        i += 1
    return out


def container_port(c, ref):
    """The containerPort a probe or Service `ref` (number or port name) means, else None."""
    for p in c.get("ports") or []:
        if ref == p.get("name") or ref == p.get("containerPort"):
            return p.get("containerPort")
    return None


def cpu(q):
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def memory_bytes(q):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|K|M|G|T)?", str(q))
    mult = {None: 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}[m.group(2)]
    return float(m.group(1)) * mult


def ggflow_pod(b):
    """(Deployment, container, parsed args) of the ggflow replicas."""
    dep = find(b.objs["base"], "Deployment", "ggflow")
    c = containers(dep)[0]
    return dep, c, parse_args(c.get("args") or [])


def final_stage(b):
    """The stage `docker build` makes by default: the last."""
    return dockerfile.parse(b.dockerfile)[-1]


def stage(b, name):
    return next((s for s in dockerfile.parse(b.dockerfile) if s.name == name), None)


def rbac_grants(objs, dep, resource, verbs):
    """The Deployment's service account is bound to a Role granting `verbs` on `resource`."""
    sa = dep["spec"]["template"]["spec"].get("serviceAccountName")
    if not sa or not find(objs, "ServiceAccount", sa):
        return False
    for rb in all_of(objs, "RoleBinding"):
        if not any(s.get("kind") == "ServiceAccount" and s.get("name") == sa for s in rb.get("subjects", [])):
            continue
        role = find(objs, rb["roleRef"]["kind"], rb["roleRef"]["name"])
        for rule in (role or {}).get("rules", []):
            if resource in rule.get("resources", []) and set(verbs) <= set(rule.get("verbs", [])):
                return True
    return False


# ---- checks ---------------------------------------------------------------------------------------
def check_schemas(c, b):
    c.check(not b.orphans, "every YAML file in deploy/ is listed by a kustomization", ", ".join(b.orphans))
    done = set()
    for layout in LAYOUTS:
        for o in b.objs[layout]:
            key = (o.file, o.kind, o.name)
            if key in done:
                continue
            done.add(key)
            errs = k8s_schema.validate(o)
            c.check(not errs, f"schema: {o}", "; ".join(errs))


def check_replicas(c, b):
    dep, ctr, args = ggflow_pod(b)
    labels = pod_labels(dep)
    spec = dep["spec"]["template"]["spec"]
    c.check(selects(dep["spec"]["selector"].get("matchLabels"), labels), "ggflow Deployment: selector matches its pods")
    unknown = [f for f in args if f and f not in b.ggflow_flags]
    c.check(not unknown, "ggflow Deployment: every argument is a flag of `ggflow serve`", f"unknown: {unknown}")
    c.check("" not in args, "ggflow Deployment: no stray positional argument", str(args.get("")))
    port = int(args.get("--port", 8080))
    c.check(container_port(ctr, "http") == port, "ggflow Deployment: containerPort `http` is --port", f"{port}")
    c.check(args.get("--host") == "0.0.0.0", "ggflow Deployment: --host 0.0.0.0 (reachable from outside the pod)")
    rp, lp = ctr.get("readinessProbe", {}).get("httpGet", {}), ctr.get("livenessProbe", {}).get("httpGet", {})
    c.check(rp.get("path") == "/ready" and container_port(ctr, rp.get("port")) == port,
            "ggflow Deployment: readiness probe is GET /ready on --port", str(rp))
    c.check(lp.get("path") == "/health" and container_port(ctr, lp.get("port")) == port,
            "ggflow Deployment: liveness probe is GET /health on --port", str(lp))
    res = ctr.get("resources", {})
    lim, req = res.get("limits", {}), res.get("requests", {})
    threads = args.get("--threads", args.get("-t"))
    c.check(threads is not None and "cpu" in lim and int(threads) == cpu(lim["cpu"]),
            "ggflow Deployment: --threads equals the CPU limit", f"--threads {threads}, limit {lim.get('cpu')}")
    c.check("cpu" in req and "memory" in req and "memory" in lim, "ggflow Deployment: CPU and memory requests and a memory limit")
    budget = args.get("--max-memory")
    c.check(isinstance(budget, str) and "memory" in lim and memory_bytes(budget.replace("B", "")) < memory_bytes(lim["memory"]),
            "ggflow Deployment: --max-memory below the memory limit (the default budgets the host's memory)",
            f"--max-memory {budget}, limit {lim.get('memory')}")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    pre = (ctr.get("lifecycle", {}).get("preStop", {}).get("sleep") or {}).get("seconds", 0)
    drain = int(args.get("--shutdown-timeout", 10))
    c.check(grace > pre + drain, "ggflow Deployment: terminationGracePeriodSeconds > preStop sleep + --shutdown-timeout",
            f"{grace} <= {pre} + {drain}")
    sc = spec.get("securityContext", {})
    user = final_stage(b).get("USER") or "0"
    c.check(sc.get("runAsNonRoot") is True and str(sc.get("runAsUser")) == user.split(":")[0],
            "ggflow Deployment: runs as non-root, as the image's USER", f"{sc}, USER {user}")
    cmd = parse_args(final_stage(b).exec_form("CMD") or [])
    image_model = cmd.get("-m", cmd.get("--model"))
    c.check(args.get("--model", args.get("-m")) == image_model,
            "ggflow Deployment: --model is the file the image holds", f"{args.get('--model')} vs {image_model}")
    svc = find(b.objs["base"], "Service", "ggflow")
    c.check(svc is not None and selects(svc["spec"].get("selector"), labels), "Service ggflow selects the ggflow pods")
    c.check(svc is not None and all(container_port(ctr, p.get("targetPort", p.get("port"))) == port
                                    for p in svc["spec"]["ports"]),
            "Service ggflow: targetPort is the ggflow container's port")
    pdb = find(b.objs["base"], "PodDisruptionBudget")
    c.check(pdb is not None and selects(pdb["spec"]["selector"].get("matchLabels"), labels),
            "PodDisruptionBudget selects the ggflow pods")


def check_gateway(c, b):
    objs = b.objs["gateway"]
    dep, ctr, args = ggflow_pod(b)
    port = int(args.get("--port", 8080))
    pool = find(objs, "InferencePool")
    if not c.check(pool is not None, "gateway: an InferencePool"):
        return
    ps = pool["spec"]
    deps = all_of(objs, "Deployment")
    picked = [d["metadata"]["name"] for d in deps if selects(ps.get("selector", {}).get("matchLabels"), pod_labels(d))]
    c.check(picked == ["ggflow"], "InferencePool selects the ggflow pods and nothing else", f"selects {picked}")
    c.check([p.get("number") for p in ps.get("targetPorts", [])] == [port],
            "InferencePool targetPorts is the ggflow container's port", str(ps.get("targetPorts")))
    ref = ps.get("endpointPickerRef", {})
    svc = find(objs, ref.get("kind", "Service"), ref.get("name"))
    epp = next((d for d in deps if svc and selects(svc["spec"].get("selector"), pod_labels(d))), None)
    ok = (svc is not None and epp is not None
          and any(p.get("port") == (ref.get("port") or {}).get("number") for p in svc["spec"]["ports"]))
    c.check(ok, "endpointPickerRef names a Service and port that select the endpoint picker", str(ref))
    if not epp:
        return
    ectr = containers(epp)[0]
    eargs = parse_args(ectr.get("args") or [])
    svc_port = next((p for p in svc["spec"]["ports"] if p.get("port") == ref["port"]["number"]), {})
    c.check(container_port(ectr, svc_port.get("targetPort", svc_port.get("port"))) is not None,
            "the picker's Service port reaches a port of the picker's container")
    group = pool["apiVersion"].split("/")[0]
    c.check(eargs.get("--pool-name") == pool["metadata"]["name"] and eargs.get("--pool-group") == group,
            "the endpoint picker serves this InferencePool (--pool-name, --pool-group)", str(eargs))
    release = k8s_schema.CRD_SCHEMAS[(pool["apiVersion"], "InferencePool")]["x-gateway-api-inference-extension-release"]
    c.check(ectr.get("image", "").endswith(":" + release), "the endpoint picker's image is the schemas' release",
            f"{ectr.get('image')} vs {release}")
    c.check(all(rbac_grants(objs, epp, r, ["get", "list", "watch"]) for r in ("pods", "inferencepools", "inferenceobjectives")),
            "the endpoint picker may watch pods, InferencePools and InferenceObjectives")
    cfg_path = str(eargs.get("--config-file", ""))
    mount = next((m for m in ectr.get("volumeMounts", []) if cfg_path.startswith(m["mountPath"].rstrip("/") + "/")), None)
    vol = next((v for v in epp["spec"]["template"]["spec"].get("volumes", []) if mount and v["name"] == mount["name"]), None)
    cm = find(objs, "ConfigMap", (vol or {}).get("configMap", {}).get("name"))
    key = cfg_path.rsplit("/", 1)[-1]
    cfg = yaml.safe_load(cm["data"][key]) if cm and key in cm.get("data", {}) else None
    if c.check(cfg is not None, "--config-file is a key of the ConfigMap mounted there", cfg_path):
        plugins = {p.get("name", p.get("type")) for p in cfg.get("plugins", [])}
        refs = {r["pluginRef"] for prof in cfg.get("schedulingProfiles", []) for r in prof.get("plugins", [])}
        c.check(cfg.get("kind") == "EndpointPickerConfig" and refs and refs <= plugins,
                "the picker's config: every scheduling profile's plugin is declared", f"{refs - plugins}")
        src = next((p for p in cfg.get("plugins", []) if p.get("type") == "metrics-data-source"), {})
        c.check((src.get("parameters") or {}).get("path", "/metrics") == "/metrics",
                "the picker scrapes ggflow's /metrics")
    for obj in all_of(objs, "InferenceObjective"):
        r = obj["spec"]["poolRef"]
        c.check(r.get("name") == pool["metadata"]["name"] and r.get("group", group) == group
                and r.get("kind", "InferencePool") == "InferencePool",
                f"InferenceObjective {obj['metadata']['name']} refers to the InferencePool", str(r))
    for route in all_of(objs, "HTTPRoute"):
        backends = [br for rule in route["spec"].get("rules", []) for br in rule.get("backendRefs", [])]
        c.check(backends and all(br.get("kind") == "InferencePool" and br.get("group") == group
                                 and br.get("name") == pool["metadata"]["name"] for br in backends)
                and route["spec"].get("parentRefs"),
                f"HTTPRoute {route['metadata']['name']}: a Gateway parent, every backend the InferencePool")


def check_router(c, b):
    objs = b.objs["router"]
    dep, ctr, args = ggflow_pod(b)
    rdep = find(objs, "Deployment", "ggflow-router")
    if not c.check(rdep is not None, "router: a Deployment ggflow-router"):
        return
    rctr = containers(rdep)[0]
    rargs = parse_args(rctr.get("args") or [])
    unknown = [f for f in rargs if f and f not in b.router_flags]
    c.check(not unknown, "router Deployment: every argument is a flag of `vllm-router`", f"unknown: {unknown}")
    sel = str(rargs.get("--selector", ""))
    sel = dict(kv.split("=", 1) for kv in sel.split() if "=" in kv)
    c.check(rargs.get("--service-discovery") is True and selects(sel, pod_labels(dep)),
            "router: service discovery selects the ggflow pods", str(sel))
    c.check(str(rargs.get("--service-discovery-port")) == str(args.get("--port")),
            "router: discovered pods are reached on ggflow's --port")
    c.check(rargs.get("--health-check-endpoint") == ctr["readinessProbe"]["httpGet"]["path"],
            "router: its health check is ggflow's readiness path")
    c.check("--service-discovery-namespace" in rargs and rbac_grants(objs, rdep, "pods", ["get", "list", "watch"]),
            "router: watches its own namespace's pods and may (Role, RoleBinding)")
    rport = int(rargs.get("--port", 0))
    c.check(container_port(rctr, "http") == rport, "router: containerPort `http` is its --port")
    st = stage(b, "router")
    c.check(st is not None and st.get("EXPOSE") == str(rport), "Dockerfile: a `router` stage exposing the router's --port")
    pin = re.search(r"vllm-router==([\w.]+)", b.setup_sh)
    c.check(st is not None and pin is not None and any(f"vllm-router=={pin.group(1)}" in r for r in st.all("RUN")),
            "Dockerfile: the router stage installs the vllm-router version scripts/setup.sh pins")
    sc = rdep["spec"]["template"]["spec"].get("securityContext", {})
    c.check(st is not None and sc.get("runAsNonRoot") is True and str(sc.get("runAsUser")) == (st.get("USER") or "0").split(":")[0],
            "router: runs as non-root, as the router image's USER")
    svc = find(objs, "Service", "ggflow-router")
    c.check(svc is not None and selects(svc["spec"].get("selector"), pod_labels(rdep)), "Service ggflow-router selects the router")


def check_dockerfile(c, b):
    stages = dockerfile.parse(b.dockerfile)
    build = stage(b, "build")
    final = final_stage(b)
    c.check(all(s.base.startswith("debian:12") for s in stages), "Dockerfile: every stage is Debian 12",
            str([s.base for s in stages]))
    runs = " && ".join(build.all("RUN")) if build else ""
    c.check("scripts/setup.sh" in runs and "build-ggflow" in runs, "Dockerfile: the build stage runs scripts/setup.sh and make build-ggflow")
    c.check(final.name is None and final.base.startswith("debian:12-slim"), "Dockerfile: the last (default) stage is the slim runtime")
    user = (final.get("USER") or "0").split(":")[0]
    c.check(user.isdigit() and int(user) != 0, "Dockerfile: runs as a numeric non-root USER (runAsNonRoot can verify it)", user)
    cmd, ep = parse_args(final.exec_form("CMD") or []), final.exec_form("ENTRYPOINT") or []
    port = str(cmd.get("--port"))
    c.check(len(ep) == 2 and ep[0].endswith("/ggflow") and ep[1] == "serve", "Dockerfile: ENTRYPOINT is `ggflow serve` in exec form (PID 1 gets SIGTERM)")
    c.check(cmd.get("--host") == "0.0.0.0" and final.get("EXPOSE") == port, "Dockerfile: CMD listens on 0.0.0.0 at the EXPOSEd port")
    hc = final.get("HEALTHCHECK") or ""
    c.check(f"127.0.0.1:{port}/health" in hc, "Dockerfile: HEALTHCHECK is GET /health on that port", hc)
    c.check(final.get("STOPSIGNAL") == "SIGTERM", "Dockerfile: STOPSIGNAL SIGTERM (ggflow drains on it)")
    unknown = [f for f in cmd if f and f not in b.ggflow_flags]
    c.check(not unknown, "Dockerfile: every CMD argument is a flag of `ggflow serve`", str(unknown))
    apt = " ".join(r for r in final.all("RUN") if "apt-get install" in r)
    missing = sorted({p for p in b.lib_packages.values() if p not in BASE_IMAGE_PACKAGES and not re.search(rf"(^|\s){re.escape(p)}(\s|$)", apt)})
    c.check(b.lib_packages and not missing, "Dockerfile: the runtime stage installs the package of every shared library build/ggflow links",
            f"missing {missing}" if b.lib_packages else "ldd/dpkg found no libraries")
    c.check("curl" in apt.split(), "Dockerfile: the runtime stage has curl for its HEALTHCHECK")


ALL = (check_schemas, check_replicas, check_gateway, check_router, check_dockerfile)

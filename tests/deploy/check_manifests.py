#!/usr/bin/env python3
"""Checks the Dockerfile and the Kubernetes manifests in deploy/ (docs/DEPLOY.md).

Static (contracts.py): every object against its published schema (kubernetes-validate for the
built-in kinds, deploy/schemas for the Inference Extension CRDs), and the contracts between
them and with ggflow: labels, ports, probes, flags, grace period, user, shared libraries.

Live, on this machine (no Docker, no cluster here): the replica container's own arguments from
deploy/base (model, host and port aside) run as `ggflow serve`: its probe paths answer 200, its
/metrics has every series the endpoint picker scrapes, its --served-model-name answers a chat,
its peak RSS fits the memory limit, and SIGTERM ends it with 0 inside the grace period. Then the
router Deployment's arguments (service discovery swapped for the live replica's URL) run as
`vllm-router`: its probe paths answer 200 and a chat goes through it.

--self-test: the static checks on broken copies of the manifests and the Dockerfile; each
mutation must be caught. Prints one line per check and "N passed, M failed".
"""
import argparse
import contextlib
import copy
import io
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "server"), str(HERE.parents[1] / "python")]
import server_util  # noqa: E402
from cluster import http_get as get  # noqa: E402

server_util.require_packages("yaml", "jsonschema", "kubernetes_validate")
import contracts  # noqa: E402
import k8s_schema  # noqa: E402

ROOT = k8s_schema.ROOT
VENV_BIN = ROOT / ".venv" / "bin"
# The series of ggflow's /metrics that the endpoint picker's default mapping reads (Inference
# Extension v1.5.0, core-metrics-extractor), with their Prometheus types.
EPP_METRICS = {"vllm:num_requests_waiting": "gauge", "vllm:num_requests_running": "gauge",
               "vllm:kv_cache_usage_perc": "gauge", "vllm:lora_requests_info": "gauge",
               "vllm:cache_config_info": "gauge"}


def help_flags(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", out.stdout + out.stderr))


def lib_packages(binary):
    """Each shared library `binary` links (ldd) -> the Debian package holding it (dpkg -S)."""
    out = {}
    ldd = subprocess.run(["ldd", str(binary)], capture_output=True, text=True).stdout
    for path in re.findall(r"=> (/\S+)", ldd):
        real = os.path.realpath(path)
        for p in (path, real, re.sub(r"^/lib/", "/usr/lib/", path), re.sub(r"^/usr/lib/", "/lib/", path)):
            r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
            if r.returncode == 0:
                out[path] = r.stdout.split(":")[0].strip()
                break
        else:
            out[path] = "?"
    return out


def load_bundle(ggflow):
    objs = {l: k8s_schema.load_kustomization(ROOT / "deploy" / l) for l in contracts.LAYOUTS}
    listed = {o.file for l in objs.values() for o in l}
    orphans = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "deploy").rglob("*.yaml"))
               if p.name != "kustomization.yaml" and str(p.relative_to(ROOT)) not in listed]
    return contracts.Bundle(
        objs=objs, dockerfile=(ROOT / "Dockerfile").read_text(), setup_sh=(ROOT / "scripts" / "setup.sh").read_text(),
        ggflow_flags=help_flags([ggflow, "serve", "--help"]),
        router_flags=help_flags([str(VENV_BIN / "vllm-router"), "--help"]),
        lib_packages=lib_packages(ggflow), orphans=orphans)


def run_static(c, b):
    for fn in contracts.ALL:
        c.run(fn.__name__, fn, c, b)


# ---- live -----------------------------------------------------------------------------------------
def chat(base, model):
    import json
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 8,
                       "temperature": 0}).encode()
    req = urllib.request.Request(base + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.read()[:300]


def peak_rss(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def without(args, drop):
    """`args` less each flag of `drop` and the number of values it takes ({flag: values})."""
    out, i = [], 0
    while i < len(args):
        if args[i] in drop:
            i += 1 + drop[args[i]]
            continue
        out.append(args[i])
        i += 1
    return out


def run_live(c, b, ggflow, model):
    dep, ctr, args = contracts.ggflow_pod(b)
    flags = without(ctr["args"], {"--model": 1, "-m": 1, "--host": 1, "--port": 1})
    name = args.get("--served-model-name")
    with server_util.Server(ggflow, model, flags, name="deployment-args") as srv:
        for probe in ("readinessProbe", "livenessProbe"):
            path = ctr[probe]["httpGet"]["path"]
            st, _ = get(srv.url + path)
            c.check(st == 200, f"live: the {probe} path {path} answers 200", str(st))
        text = srv.request("GET", "/metrics").body.decode()
        for m, typ in EPP_METRICS.items():
            c.check(re.search(rf"^# TYPE {re.escape(m)} {typ}$", text, re.M) and re.search(rf"^{re.escape(m)}[{{ ]", text, re.M),
                    f"live: /metrics has {m} ({typ}), which the endpoint picker reads")
        st, body = chat(srv.url, name)
        c.check(st == 200 and body["model"] == name, f"live: a chat for model {name!r} (--served-model-name) answers", str(body)[:200])
        run_router(c, b, srv, name)
        rss = peak_rss(srv.proc.pid)
        limit = contracts.memory_bytes(ctr["resources"]["limits"]["memory"])
        c.check(0 < rss < limit, f"live: peak RSS {rss / 2**20:.0f} MiB fits the memory limit {limit / 2**20:.0f} MiB")
        grace = dep["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        pre = (ctr.get("lifecycle", {}).get("preStop", {}).get("sleep") or {}).get("seconds", 0)
        t0 = time.monotonic()
        rc = srv.stop(timeout=grace - pre)
        took = time.monotonic() - t0
        c.check(rc == 0 and took < grace - pre, f"live: SIGTERM ends the replica with 0 in {took:.1f} s (< grace {grace} - preStop {pre})", f"rc {rc}")


def run_router(c, b, srv, name):
    rdep = contracts.find(b.objs["router"], "Deployment", "ggflow-router")
    rctr = contracts.containers(rdep)[0]
    args = without(rctr["args"], {"--service-discovery": 0, "--selector": 1, "--service-discovery-port": 1,
                                  "--service-discovery-namespace": 1, "--host": 1, "--port": 1})
    port = server_util.free_port()
    cmd = [str(VENV_BIN / "vllm-router"), "--host", "127.0.0.1", "--port", str(port), "--worker-urls", srv.url, *args]
    log = open(Path(server_util.LOG_DIR or "/tmp") / "router-deployment-args.log", "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        ready = rctr["readinessProbe"]["httpGet"]["path"]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and get(base + ready)[0] != 200 and proc.poll() is None:
            time.sleep(0.3)
        for probe in ("readinessProbe", "livenessProbe"):
            path = rctr[probe]["httpGet"]["path"]
            st, _ = get(base + path)
            c.check(st == 200, f"live: the router's {probe} path {path} answers 200", f"{st} (log {log.name})")
        st, body = chat(base, name)
        c.check(st == 200 and body["model"] == name, "live: a chat through the router with the Deployment's flags", str(body)[:200])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


# ---- self-test ------------------------------------------------------------------------------------
def mutations():
    """(what, fn(bundle)) pairs; each breaks one contract or schema rule."""
    def dep(b):
        return contracts.find(b.objs["base"], "Deployment", "ggflow")

    def ctr(b):
        return contracts.containers(dep(b))[0]

    def obj(b, layout, kind, name=None):
        return contracts.find(b.objs[layout], kind, name)

    def set_arg(b, flag, value):
        a = ctr(b)["args"]
        a[a.index(flag) + 1] = value

    def df(b, old, new):
        assert old in b.dockerfile, old
        b.dockerfile = b.dockerfile.replace(old, new, 1)

    return [
        ("readiness on /health", lambda b: ctr(b)["readinessProbe"]["httpGet"].update(path="/health")),
        ("liveness on another port", lambda b: ctr(b)["livenessProbe"]["httpGet"].update(port=9999)),
        ("--port differs from containerPort", lambda b: set_arg(b, "--port", "9000")),
        ("--host loopback", lambda b: set_arg(b, "--host", "127.0.0.1")),
        ("--threads above the CPU limit", lambda b: set_arg(b, "--threads", "8")),
        ("--max-memory above the memory limit", lambda b: set_arg(b, "--max-memory", "3GiB")),
        ("an unknown ggflow flag", lambda b: ctr(b)["args"].extend(["--max-tokens", "5"])),
        ("grace period shorter than the drain", lambda b: dep(b)["spec"]["template"]["spec"].update(terminationGracePeriodSeconds=20)),
        ("runAsNonRoot dropped", lambda b: dep(b)["spec"]["template"]["spec"]["securityContext"].pop("runAsNonRoot")),
        ("a misspelt container field", lambda b: ctr(b).update(readinesProbe=ctr(b).pop("readinessProbe"))),
        ("replicas a string", lambda b: dep(b)["spec"].update(replicas="two")),
        ("Service selecting other pods", lambda b: obj(b, "base", "Service", "ggflow")["spec"].update(selector={"app": "x"})),
        ("pool targetPort 8081", lambda b: obj(b, "gateway", "InferencePool")["spec"].update(targetPorts=[{"number": 8081}])),
        ("pool targetPorts repeated (CEL)", lambda b: obj(b, "gateway", "InferencePool")["spec"].update(
            targetPorts=[{"number": 8080}, {"number": 8080}])),
        ("endpointPickerRef without a port (CEL, kind defaulted)", lambda b: obj(b, "gateway", "InferencePool")["spec"]
         ["endpointPickerRef"].pop("port") and obj(b, "gateway", "InferencePool")["spec"]["endpointPickerRef"].pop("kind")),
        ("pool failureMode misspelt", lambda b: obj(b, "gateway", "InferencePool")["spec"]["endpointPickerRef"].update(failureMode="Open")),
        ("an unknown pool field", lambda b: obj(b, "gateway", "InferencePool")["spec"].update(targetPort=8080)),
        ("pool selector empty", lambda b: obj(b, "gateway", "InferencePool")["spec"]["selector"].update(matchLabels={})),
        ("picker serving another pool", lambda b: (lambda a: a.__setitem__(a.index("--pool-name") + 1, "other"))(
            contracts.containers(obj(b, "gateway", "Deployment", "ggflow-epp"))[0]["args"])),
        ("picker config file not in the ConfigMap", lambda b: obj(b, "gateway", "ConfigMap", "ggflow-epp")["data"].update(
            {"plugins.yaml": obj(b, "gateway", "ConfigMap", "ggflow-epp")["data"].pop("default-plugins.yaml")})),
        ("picker without RBAC on InferencePools", lambda b: obj(b, "gateway", "Role", "ggflow-epp")["rules"].pop(1)),
        ("objective pointing at another pool", lambda b: obj(b, "gateway", "InferenceObjective")["spec"]["poolRef"].update(name="x")),
        ("objective priority a string", lambda b: obj(b, "gateway", "InferenceObjective")["spec"].update(priority="high")),
        ("HTTPRoute to a Service", lambda b: obj(b, "gateway", "HTTPRoute")["spec"]["rules"][0]["backendRefs"][0].update(
            kind="Service", group="")),
        ("router selecting other pods", lambda b: (lambda a: a.__setitem__(a.index("--selector") + 1, "app=x"))(
            contracts.containers(obj(b, "router", "Deployment", "ggflow-router"))[0]["args"])),
        ("router health check on /health", lambda b: (lambda a: a.__setitem__(a.index("--health-check-endpoint") + 1, "/health"))(
            contracts.containers(obj(b, "router", "Deployment", "ggflow-router"))[0]["args"])),
        ("an unknown router flag", lambda b: contracts.containers(obj(b, "router", "Deployment", "ggflow-router"))[0]["args"]
         .append("--cache-threshold-pct")),
        ("Dockerfile runs as root", lambda b: df(b, "USER 10001:10001\nEXPOSE 8080", "USER root\nEXPOSE 8080")),
        ("Dockerfile without libfmt9", lambda b: df(b, "libfmt9 ", "")),
        ("Dockerfile HEALTHCHECK on /ready of port 80", lambda b: df(b, "127.0.0.1:8080/health", "127.0.0.1:80/ready")),
        ("Dockerfile CMD on loopback", lambda b: df(b, '"--host", "0.0.0.0"', '"--host", "127.0.0.1"')),
        ("Dockerfile router pin differs", lambda b: df(b, "vllm-router==", "vllm-router>=")),
        ("an orphan manifest", lambda b: b.orphans.append("deploy/extra.yaml")),
    ]


def static_failures(b):
    quiet = server_util.Checker()
    with contextlib.redirect_stdout(io.StringIO()):
        run_static(quiet, b)
    return set(quiet.failures)


def self_test(c, bundle):
    """Each mutation must add a failure to those of the unbroken bundle (normally none)."""
    baseline = static_failures(bundle)
    for what, mutate in mutations():
        b = copy.deepcopy(bundle)
        mutate(b)
        new = static_failures(b) - baseline
        c.check(new, f"self-test: caught {what}", "no check failed that did not fail already")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--model", default=str(ROOT / server_util.DEFAULT_MODEL))
    ap.add_argument("--out-dir", help="keep the logs here")
    ap.add_argument("--self-test", action="store_true", help="only the mutations of the static checks")
    ap.add_argument("--static", action="store_true", help="only the static checks (no process started)")
    a = ap.parse_args()
    server_util.set_log_dir(a.out_dir)
    server_util.loopback_only()
    c = server_util.Checker()
    bundle = load_bundle(a.ggflow)
    if a.self_test:
        self_test(c, bundle)
    else:
        run_static(c, bundle)
        if not a.static:
            c.run("live", run_live, c, bundle, a.ggflow, str(server_util.require_model(a.model)))
        self_test(c, bundle)
    return c.finish(f"{c.passed} passed, {len(c.failures)} failed")


if __name__ == "__main__":
    sys.exit(main())

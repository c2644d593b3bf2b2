"""N `ggflow serve` replicas on loopback behind vllm-router (docs/DEPLOY.md).

    .venv/bin/python python/cluster.py -m models/smollm2-135m-instruct-q4_1.gguf --replicas 2 --policy cache_aware
    make cluster REPLICAS=2 POLICY=round_robin

starts the replicas (the machine's cores split between them unless --threads says), waits until
each answers GET /ready, starts vllm-router in front of them, prints the router's URL and runs
until Ctrl-C or SIGTERM; then it stops everything it started, by process id (SIGTERM, which
drains a replica, then SIGKILL after --stop-timeout seconds).

As a library (tests/server/check_cluster.py, bench/cluster.py):

    with Cluster(ggflow, model, replicas=2, threads=1, policy="cache_aware", log_dir=d) as c:
        c.url                    # the router's base URL, http://127.0.0.1:PORT
        c.replicas[0].url        # a replica's
        c.replicas[0].signal(signal.SIGKILL); c.restart(0)

The router checks each replica's GET /ready every second (the flags in ROUTER_FLAGS): a draining
replica (SIGTERM) answers 503 there and leaves the rotation at the next check, and while it
drains it answers new requests 503 "shutting_down", which the router retries on another one.
Only the standard library.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# How vllm-router watches ggflow replicas: readiness (not liveness) decides the rotation, checked
# every second, one failure takes a replica out and one success brings it back. A request that a
# draining replica refuses (503) is retried with backoff for about 5 s in all, past the next
# health check: cache-aware routing may pick the same replica again until that check has run. Those
# 503s open the router's circuit breaker for the replica; it half-opens again after 2 s, so a
# restarted replica is back in the rotation seconds after it is ready, not the default 30 s.
ROUTER_FLAGS = ["--health-check-endpoint", "/ready", "--health-check-interval-secs", "1",
                "--health-failure-threshold", "1", "--health-success-threshold", "1",
                "--health-check-timeout-secs", "2",
                "--retry-max-retries", "6", "--retry-initial-backoff-ms", "200", "--retry-max-backoff-ms", "2000",
                "--retry-backoff-multiplier", "2", "--cb-timeout-duration-secs", "2", "--log-level", "warning"]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5.0):
    """(status, body) of GET url; status 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return 0, b""


def router_binary():
    """vllm-router from the interpreter's environment (scripts/setup.sh installs it into .venv)."""
    here = Path(sys.executable).parent / "vllm-router"
    found = here if here.exists() else shutil.which("vllm-router")
    if not found:
        raise RuntimeError("vllm-router is not installed: run scripts/setup.sh (it installs the PyPI package into .venv)")
    return str(found)


class Process:
    """One started process: its name, log file and pid; stopped by pid, never by name."""

    def __init__(self, name, cmd, log_dir, url=None):
        self.name, self.cmd, self.url = name, [str(c) for c in cmd], url
        self.log_path = Path(log_dir) / f"{name}.log"
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # Ctrl-C in a terminal reaches the harness only
        log.close()
        return self

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def wait(self, timeout):
        """The exit code after at most `timeout` s, then SIGKILL (negative: killed by a signal)."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def stop(self, timeout=30.0):
        if self.proc is None:
            return None
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def log_tail(self, n=2000):
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def wait_for(self, path, timeout):
        """Polls GET url+path until 200; raises with the log's tail when the process exits or time is up."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}")
            last, _ = http_get(self.url + path, timeout=2)
            if last == 200:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.name}: GET {path} not 200 after {timeout} s (last {last}):\n{self.log_tail()}")


class Cluster:
    def __init__(self, ggflow, model, replicas=2, threads=None, policy="cache_aware", port=0, host="127.0.0.1",
                 replica_flags=(), router_flags=(), log_dir=None, served_name=None, ready_timeout=120.0):
        if replicas < 1:
            raise ValueError("replicas must be at least 1")
        self.ggflow, self.model, self.policy = str(ggflow), str(model), policy
        self.threads = threads or max(1, (os.cpu_count() or 1) // replicas)
        self.host, self.port = host, port
        self.replica_flags, self.router_flags = [str(f) for f in replica_flags], [str(f) for f in router_flags]
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="ggflow-cluster-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.served_name = served_name or Path(model).name.removesuffix(".gguf")
        self.ready_timeout = ready_timeout
        self.replicas = [self._replica(i, free_port()) for i in range(replicas)]
        self.router = None

    def _replica(self, i, port):
        cmd = [self.ggflow, "serve", "-m", self.model, "--host", "127.0.0.1", "--port", port, "-t", self.threads,
               "--served-model-name", self.served_name, "--no-webui", *self.replica_flags]
        return Process(f"replica-{i}", cmd, self.log_dir, url=f"http://127.0.0.1:{port}")

    @property
    def url(self):
        return self.router.url

    def start(self):
        try:
            for r in self.replicas:
                r.start()
            for r in self.replicas:
                r.wait_for("/ready", self.ready_timeout)
            port = self.port or free_port()
            cmd = [router_binary(), "--host", self.host, "--port", port, "--policy", self.policy,
                   "--worker-urls", *[r.url for r in self.replicas], *ROUTER_FLAGS, *self.router_flags]
            self.router = Process("router", cmd, self.log_dir, url=f"http://{self.host}:{port}").start()
            self.router.wait_for("/v1/models", 60)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self, i):
        """Starts replica i again on its port (after it was stopped or killed) and waits until ready."""
        old = self.replicas[i]
        if old.alive():
            raise RuntimeError(f"{old.name} is still running (pid {old.pid})")
        old.start()
        old.wait_for("/ready", self.ready_timeout)

    def stop(self, timeout=30.0):
        """SIGTERM to everything started (the router first, so no request reaches a stopping
        replica), then SIGKILL what is left after `timeout` s. Returns {name: exit code}."""
        codes = {}
        procs = ([self.router] if self.router else []) + self.replicas
        for p in procs:
            p.signal(signal.SIGTERM)
        for p in procs:
            if p.proc is not None:
                codes[p.name] = p.wait(timeout)
        return codes

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", default=str(ROOT / "models" / "smollm2-135m-instruct-q4_1.gguf"))
    ap.add_argument("--ggflow", default=str(ROOT / "build" / "ggflow"))
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--threads", type=int, help="threads per replica (default: the cores split between them)")
    ap.add_argument("--policy", default="cache_aware",
                    choices=["cache_aware", "round_robin", "power_of_two", "random", "consistent_hash"])
    ap.add_argument("--host", default="127.0.0.1", help="the router's address (the replicas stay on loopback)")
    ap.add_argument("--port", type=int, default=30000, help="the router's port")
    ap.add_argument("--log-dir", help="keep the processes' logs here (default: a new temporary folder)")
    ap.add_argument("--stop-timeout", type=float, default=30.0)
    ap.add_argument("serve_args", nargs="*", help="after --: more flags for every `ggflow serve`")
    args = ap.parse_args()
    if not Path(args.ggflow).exists():
        sys.exit(f"cluster: {args.ggflow} not found: run `make build-ggflow` first")
    if not Path(args.model).exists():
        sys.exit(f"cluster: {args.model} not found: run scripts/setup.sh (or give -m)")
    c = Cluster(args.ggflow, args.model, replicas=args.replicas, threads=args.threads, policy=args.policy,
                port=args.port, host=args.host, replica_flags=args.serve_args, log_dir=args.log_dir)
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, f: stop.append(s))
    try:
        c.start()
    except RuntimeError as e:
        sys.exit(f"cluster: {e}")
    print(json.dumps({"router": c.url + "/v1", "policy": c.policy, "logs": str(c.log_dir),
                      "replicas": [{"url": r.url, "pid": r.pid, "threads": c.threads} for r in c.replicas],
                      "router_pid": c.router.pid}, indent=1), flush=True)
    print(f"cluster: serving at {c.url}/v1; Ctrl-C stops the router and the replicas", file=sys.stderr, flush=True)
    while not stop:
        dead = [p for p in [c.router, *c.replicas] if not p.alive()]
        if dead:
            print(f"cluster: {dead[0].name} exited with {dead[0].proc.returncode}; stopping (log: {dead[0].log_path})",
                  file=sys.stderr)
            break
        time.sleep(0.5)
    codes = c.stop(args.stop_timeout)
    print("cluster: stopped " + ", ".join(f"{k} ({v})" for k, v in codes.items()), file=sys.stderr)


if __name__ == "__main__":
    main()

"""Shared helpers of the `ggflow serve` tests: start the server, talk raw HTTP to it, read metrics.

    with Server(ggflow, model, ["-t", "2"]) as srv:   # a free loopback port, waits for GET /ready
        status, headers, body = srv.request("GET", "/health")
        ...
        rc = srv.stop()                               # SIGTERM, 30 s, then SIGKILL

Only the standard library: the tests that use the `openai` client import it themselves.
"""
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKIP_RC = 77
LOG_DIR = None  # set_log_dir(): where each server's log is kept (else a temporary file, removed on success)


def set_log_dir(path):
    """Keeps every server's log (stdout and stderr) in `path`, one file per server."""
    global LOG_DIR
    if path:
        LOG_DIR = Path(path)
        LOG_DIR.mkdir(parents=True, exist_ok=True)
# The flags the tests run the server with: small and quick on 2 cores.
TEST_FLAGS = ["-t", "2", "--parallel", "8", "--kv-cache", "64MiB", "--ctx-size", "1024"]
DEFAULT_MODEL = "models/smollm2-135m-instruct-q4_1.gguf"


def loopback_only():
    """Never let a proxy from the environment see the tests' requests to 127.0.0.1."""
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    for v in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(v, None)


def require_packages(*names):
    """The modules `names` (setup installs them into .venv); exit 77 (skip) when one is missing,
    1 under GGFLOW_REQUIRE_MODELS=1."""
    import importlib
    try:
        return [importlib.import_module(n) for n in names]
    except ImportError as e:
        if os.environ.get("GGFLOW_REQUIRE_MODELS") == "1":
            print(f"FAIL a Python package: {e} (run scripts/setup.sh)")
            sys.exit(1)
        print(f"skip a Python package is missing ({e}); run scripts/setup.sh")
        sys.exit(SKIP_RC)


def require_model(model):
    """Exit 77 (skip) with the reason when the model file is missing; exit 1 under GGFLOW_REQUIRE_MODELS=1."""
    p = Path(model)
    if p.exists():
        return p
    why_file = p.with_name(p.name + ".missing")
    why = why_file.read_text().strip() if why_file.exists() else "not found; run scripts/setup.sh"
    if os.environ.get("GGFLOW_REQUIRE_MODELS") == "1":
        print(f"FAIL {p}: {why} (GGFLOW_REQUIRE_MODELS=1: setup installs it)")
        sys.exit(1)
    print(f"skip {p}: {why}")
    sys.exit(SKIP_RC)


def served_name(model):
    name = Path(model).name
    return name[:-5] if name.endswith(".gguf") else name


def setup(doc):
    """The command line every check program shares (--ggflow, --model, --out-dir): keeps the logs
    where asked, skips without the model; returns (ggflow path, model path, served name)."""
    import argparse
    root = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggflow", default=str(root / "build" / "ggflow"))
    ap.add_argument("--model", default=str(root / DEFAULT_MODEL))
    ap.add_argument("--out-dir", help="keep the servers' logs here")
    args = ap.parse_args()
    set_log_dir(args.out_dir)
    model = str(require_model(args.model))
    return str(Path(args.ggflow).resolve()), model, served_name(model)


def run_ggflow(args, timeout=120):
    """Runs a `ggflow` command; its stdout (text). Raises with stderr's tail on a non-zero exit."""
    r = subprocess.run([str(a) for a in args], capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {r.returncode}: {r.stderr.decode(errors='replace')[-500:]}")
    return r.stdout.decode()


_eos = {}


def eos_id(ggflow, model):
    """The model's end-of-sequence token id (from `ggflow inspect --json`)."""
    key = (str(ggflow), str(model))
    if key not in _eos:
        _eos[key] = json.loads(run_ggflow([ggflow, "inspect", model, "--json"]))["tokenizer"]["eos_id"]
    return _eos[key]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Checker:
    """Prints one line per check (`ok   ...` / `FAIL ...`) and remembers the failures."""

    def __init__(self):
        self.failures = []
        self.passed = 0

    def check(self, cond, what, detail=""):
        if cond:
            self.passed += 1
            print("ok   " + what, flush=True)
        else:
            line = what + (f": {detail}" if detail else "")
            print("FAIL " + line, flush=True)
            self.failures.append(line)
        return bool(cond)

    def fail(self, what, detail=""):
        return self.check(False, what, detail)

    def run(self, what, fn, *args):
        """Runs one group of checks; an exception in it is one failure with its traceback."""
        import traceback
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001
            self.fail(what, f"{type(e).__name__}: {e}\n{traceback.format_exc()}")

    def finish(self, summary=None):
        if summary:
            print(summary)
        if self.failures:
            print(f"{len(self.failures)} failed:")
            for f in self.failures:
                print("  " + f)
            return 1
        return 0


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-cased names
        self.body = body

    def json(self):
        return json.loads(self.body)

    def header(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def __repr__(self):
        return f"<{self.status} {self.body[:300]!r}>"


class Server:
    """`ggflow serve` on a free loopback port, as a context manager."""

    instances = []  # every server started, for the crash report

    def crashed(self):
        """The server exited on its own with a non-zero code (or a signal): its log tail, else None."""
        if (self.proc is None or self.proc.poll() is None or self.proc.returncode == 0 or self.returncode is not None
                or getattr(self, "_reported", False)):
            return None
        self._reported = True
        return f"{self.name} exited with {self.proc.returncode}:\n" + self.log_tail()

    def __init__(self, ggflow, model, flags=(), env=None, ready_timeout=120.0, name="server", tls=None):
        """`tls`: an ssl.SSLContext that trusts the server's certificate (the server runs with
        --ssl-cert/--ssl-key among `flags`): requests and `url` then use HTTPS."""
        self.tls = tls
        self.ggflow = str(ggflow)
        self.model = str(model) if model else None  # None: the flags name the models (--models-dir)
        self.flags = [str(f) for f in flags]
        self.env = env
        self.ready_timeout = ready_timeout
        self.name = name
        self.host = "127.0.0.1"
        self.port = None
        self.proc = None
        self.log = None
        self.returncode = None

    # ---- life cycle ------------------------------------------------------------------------------
    def start(self, tries=3):
        env = dict(os.environ)
        env.pop("GGFLOW_API_KEY", None)  # only the flags given here decide whether a key is needed
        if self.env:
            env.update(self.env)
        for attempt in range(tries):
            self.port = free_port()
            if LOG_DIR is not None:
                slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.name).strip("_")
                self.log = open(LOG_DIR / f"serve-{len(Server.instances):02d}-{slug}.log", "wb")
            else:
                self.log = tempfile.NamedTemporaryFile(prefix="ggflow-serve-", suffix=".log", delete=False)
            cmd = [self.ggflow, "serve", *(["-m", self.model] if self.model else []), "--host", self.host, "--port", str(self.port), *self.flags]
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                         env=env)
            Server.instances.append(self)
            try:
                self.wait_ready()
                return self
            except RuntimeError:
                # The free port was taken between free_port() and the bind: another port.
                if attempt + 1 < tries and self.proc.poll() is not None and "cannot listen" in self.log_tail():
                    self.log.close()
                    continue
                raise
        return self

    def wait_ready(self):
        deadline = time.monotonic() + self.ready_timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: ggflow serve exited with {self.proc.returncode} before ready\n"
                                   + self.log_tail())
            try:
                r = self.request("GET", "/ready", timeout=5)
                if r.status == 200:
                    return
                last = r.status
            except OSError as e:
                last = e
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"{self.name}: GET /ready not 200 after {self.ready_timeout} s (last: {last})\n"
                           + self.log_tail())

    def signal(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout=30.0):
        """Waits for the process; SIGKILL after `timeout`. Returns the exit code (negative: killed)."""
        try:
            self.returncode = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.returncode = self.proc.wait()
            print(f"note {self.name}: still running {timeout} s after SIGTERM; killed", flush=True)
        return self.returncode

    def stop(self, timeout=30.0):
        """SIGTERM, then wait up to `timeout` s (SIGKILL after). Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is not None:
            self.returncode = self.proc.returncode
            return self.returncode
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.returncode = self.proc.wait()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, n=40):
        try:
            lines = Path(self.log.name).read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(f"  [{self.name}] {l}" for l in lines[-n:])

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        if self.log:
            self.log.close()
            if exc[0] is None and LOG_DIR is None:
                try:
                    os.unlink(self.log.name)
                except OSError:
                    pass
            else:
                print(f"{self.name} log: {self.log.name}")
        return False

    # ---- HTTP --------------------------------------------------------------------------------------
    @property
    def url(self):
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    def connection(self, timeout=60.0):
        if self.tls:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60.0):
        """One request on a fresh connection. `body`: bytes, str, or an object sent as JSON."""
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            data = r.read()
            return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data)
        finally:
            conn.close()

    def metrics(self):
        """GET /metrics as {"name{labels}": value}; also "name" alone for unlabeled series."""
        r = self.request("GET", "/metrics", timeout=10)
        if r.status != 200:
            raise RuntimeError(f"GET /metrics: {r.status}")
        return parse_metrics(r.body.decode())

    def wait_idle(self, timeout=10.0):
        """Waits until no request runs or waits and no KV block is held; returns the last metrics."""
        deadline = time.monotonic() + timeout
        m = {}
        while True:
            m = self.metrics()
            if (m.get("ggflow:num_requests_running") == 0 and m.get("ggflow:num_requests_waiting", 0) == 0
                    and m.get("ggflow:kv_cache_usage_perc") == 0):
                return m
            if time.monotonic() > deadline:
                return m
            time.sleep(0.2)


_METRIC_RE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def parse_metrics(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _METRIC_RE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        out[m.group(1) + (m.group(2) or "")] = v
        if not m.group(2):
            out[m.group(1)] = v
    return out


def idle_detail(m):
    keys = ["ggflow:num_requests_running", "ggflow:num_requests_waiting", "ggflow:kv_cache_usage_perc"]
    return ", ".join(f"{k.split(':')[1]}={m.get(k)}" for k in keys)


def sse_events(resp):
    """Yields the `data:` payloads of a Server-Sent Events response (http.client), comments skipped."""
    buf = []
    while True:
        line = resp.readline()
        if not line:
            return
        line = line.rstrip(b"\r\n")
        if not line:
            if buf:
                yield b"\n".join(buf).decode()
                buf = []
            continue
        if line.startswith(b":"):
            continue
        if line.startswith(b"data:"):
            v = line[5:]
            buf.append(v[1:] if v.startswith(b" ") else v)

#!/usr/bin/env python3
"""The chat page of `ggflow serve` (src/server/webui/index.html), in a real headless Chromium.

    check_webui.py --ggflow build/ggflow --model models/smollm2-135m-instruct-q4_1.gguf --out-dir DIR

1. Against the real server (`ggflow serve` on a free loopback port): the page shows the model name,
   answers a question (streamed, non-empty, stats shown) and a second turn; screenshot webui.png.
2. Against a stub server in this process that serves the same page bytes (fetched from the real
   server's `/`) and scripted answers:
   - an answer that spells `<script>` and `<img onerror>` shows as text and runs nothing (no
     `window.__pwned`, no script/img element in the transcript); screenshot webui_injection.png;
   - the second turn sends the whole conversation; stats use `usage.completion_tokens`;
   - an error response shows as an error line, as text;
   - a 401 asks for the API key, which is then sent as `Authorization: Bearer KEY`.

Exit 0: all passed; 1: a check failed; 77 (ctest's skip): the model, chromium, chromedriver or
selenium is missing (a failure instead under GGFLOW_REQUIRE_MODELS=1).
`--page FILE` runs only the stub checks, on FILE instead of the server's page (page development).
"""
import argparse
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
REQUIRE = os.environ.get("GGFLOW_REQUIRE_MODELS") == "1"
SKIP = 77

INJECTION = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
INJECTION_PIECES = ["<scr", "ipt>window.__pw", "ned=1</script>", "<img src=x ", 'onerror="window.__pwned=2">']
ERROR_MESSAGE = "<b>bad</b> request <img src=x onerror=\"window.__pwned=3\">"
STUB_KEY = "stub-secret-key"


class Failed(Exception):
    pass


def ok(what):
    print("ok   " + what, flush=True)


def check(cond, what, detail=""):
    if not cond:
        raise Failed(what + (f": {detail}" if detail else ""))
    ok(what)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


# ---- the real server --------------------------------------------------------------------------

class Server:
    def __init__(self, ggflow, model, out_dir):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = out_dir / "ggflow_serve.log"
        self.log = open(self.log_path, "wb")
        cmd = [str(ggflow), "serve", "-m", str(model), "--port", str(self.port), "--host", "127.0.0.1",
               "-t", "2", "--parallel", "2", "--kv-cache", "64MiB"]
        print("run  " + " ".join(cmd), flush=True)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)

    def log_tail(self, n=20):
        self.log.flush()
        lines = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join("     | " + line for line in lines[-n:])

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failed(f"ggflow serve exited with {self.proc.returncode} before /ready:\n{self.log_tail()}")
            try:
                if http_get(self.base + "/ready", timeout=2)[0] == 200:
                    return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        raise Failed(f"/ready not 200 within {timeout} s:\n{self.log_tail()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                print("note ggflow serve ignored SIGTERM for 20 s; SIGKILL", flush=True)
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


# ---- the stub server --------------------------------------------------------------------------

class Stub:
    """Serves the page and scripted API answers; records the chat requests it gets."""

    def __init__(self, page):
        self.page = page
        self.requests = []   # (headers dict, body json) of each POST /v1/chat/completions
        self.require_key = None
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the connection closes after each response

            def log_message(self, *args):
                pass

            def reply(self, status, body, ctype="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def authorized(self):
                if stub.require_key and self.headers.get("Authorization") != "Bearer " + stub.require_key:
                    self.reply(401, {"error": {"message": "invalid API key", "type": "authentication_error",
                                               "param": None, "code": "invalid_api_key"}})
                    return False
                return True

            def do_GET(self):
                if self.path == "/":
                    self.reply(200, stub.page, "text/html; charset=utf-8")
                elif self.path == "/v1/models":
                    if self.authorized():
                        self.reply(200, {"object": "list", "data": [
                            {"id": "stub-model", "object": "model", "created": 0, "owned_by": "ggflow"}]})
                else:
                    self.reply(404, {"error": {"message": "not found", "type": "not_found_error",
                                               "param": None, "code": "not_found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path != "/v1/chat/completions":
                    return self.reply(404, {"error": {"message": "not found"}})
                stub.requests.append((dict(self.headers), body))
                if not self.authorized():
                    return
                last = body.get("messages", [{}])[-1].get("content", "")
                if "trigger-error" in last:
                    return self.reply(400, {"error": {"message": ERROR_MESSAGE, "type": "invalid_request_error",
                                                      "param": "messages", "code": "invalid_value"}})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()

                def chunk(delta, finish=None, choices=True, usage=None):
                    c = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 0,
                         "model": "stub-model", "choices": [], "usage": usage}
                    if choices:
                        c["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
                    return b"data: " + json.dumps(c).encode() + b"\n\n"

                out = [chunk({"role": "assistant", "content": ""}), b": keep-alive\n\n"]
                for piece in INJECTION_PIECES:
                    out += [chunk({"content": piece}), b": keep-alive\n\n"]
                out += [chunk({}, "stop"),
                        chunk(None, choices=False, usage={"prompt_tokens": 9, "completion_tokens": 7,
                                                          "total_tokens": 16}),
                        b"data: [DONE]\n\n"]
                delay = 0.5 if "slow-stream" in last else 0.03
                try:
                    for part in out:
                        self.wfile.write(part)
                        self.wfile.flush()
                        time.sleep(delay)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the page stopped reading (Stop)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


# ---- the browser ------------------------------------------------------------------------------

def start_browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1000,800", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


class Page:
    def __init__(self, driver):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait
        self.d, self.By, self.Wait = driver, By, WebDriverWait

    def el(self, css):
        return self.d.find_element(self.By.CSS_SELECTOR, css)

    def all(self, css):
        return self.d.find_elements(self.By.CSS_SELECTOR, css)

    def text(self, el):
        return el.get_attribute("textContent") or ""

    def wait(self, cond, timeout, what):
        from selenium.common.exceptions import TimeoutException
        try:
            return self.Wait(self.d, timeout, poll_frequency=0.2).until(lambda d: cond())
        except TimeoutException:
            raise Failed(f"{what} (waited {timeout} s)") from None

    def open(self, url, model):
        self.d.get(url)
        self.wait(lambda: model in self.text(self.el("#model-name")), 30,
                  f"#model-name shows {model!r} (it shows {self.text(self.el('#model-name'))!r})")

    def set_value(self, css, value):
        el = self.el(css)
        el.clear()
        el.send_keys(str(value))

    def ask(self, prompt, n_answers, timeout, use_enter=False):
        """Types prompt, sends it and waits until there are n_answers finished assistant messages."""
        from selenium.webdriver.common.keys import Keys
        box = self.el("#prompt")
        box.send_keys(prompt)
        if use_enter:
            box.send_keys(Keys.ENTER)
        else:
            self.el("#send").click()

        def done():
            errs = self.all("#messages .msg.error")
            if errs:
                raise Failed("the page shows an error: " + self.text(errs[-1]))
            msgs = self.all("#messages .msg.assistant")
            return len(msgs) >= n_answers and msgs[-1].get_attribute("data-done") == "1" and msgs[-1]
        last = self.wait(done, timeout, f"assistant message #{n_answers} done")
        return self.text(last)


# ---- the checks -------------------------------------------------------------------------------

def real_server_checks(page, server, model_name, out_dir):
    page.open(server.base + "/", model_name)
    ok(f"page at / shows the model name {model_name!r}")
    page.set_value("#temperature", 0)
    page.set_value("#max-tokens", 48)   # short answers: two cores
    t0 = time.monotonic()
    a1 = page.ask("What is the capital of France? Answer in one sentence.", 1, 90)
    check(a1.strip() != "", f"first answer is non-empty ({time.monotonic() - t0:.1f} s): {a1[:80]!r}")
    stats = page.text(page.el("#stats"))
    check("token" in stats, f"#stats shows the answer's tokens: {stats!r}")
    check(page.el("#stop").get_attribute("hidden") is not None and page.el("#send").is_enabled(),
          "after the answer: Stop hidden, Send enabled")
    a2 = page.ask("And what is the capital of Italy? Answer in one sentence.", 2, 90, use_enter=True)
    n = len(page.all("#messages .msg.assistant"))
    check(n == 2 and a2.strip() != "", f"second turn (Enter sends): {n} assistant messages, {a2[:80]!r}")
    page.d.save_screenshot(str(out_dir / "webui.png"))
    ok("screenshot webui.png")
    page.el("#new-chat").click()
    check(len(page.all("#messages .msg")) == 0 and page.text(page.el("#stats")) == "",
          "New chat empties the transcript")


def stub_checks(page, stub, out_dir):
    page.open(stub.base + "/", "stub-model")
    ok("stub: page shows the stub's model")
    got = page.ask("Say something dangerous.", 1, 30)
    check(got == INJECTION, "injection: the answer shows literally as text", repr(got))
    visible = page.all("#messages .msg.assistant")[-1].text
    check("<script>" in visible, "injection: the visible text contains '<script>'", repr(visible))
    pwned = page.d.execute_script("return typeof window.__pwned === 'undefined' ? null : String(window.__pwned);")
    check(pwned is None, "injection: window.__pwned is undefined", f"it is {pwned}")
    n_tags = page.d.execute_script("return document.querySelectorAll('#messages script, #messages img').length;")
    check(n_tags == 0, "injection: no script/img element inside #messages", f"{n_tags} found")
    stats = page.text(page.el("#stats"))
    check(stats.startswith("7 tokens"), "stats use usage.completion_tokens (7, not 5 chunks)", repr(stats))
    page.d.save_screenshot(str(out_dir / "webui_injection.png"))
    ok("screenshot webui_injection.png")

    _, body = stub.requests[-1]
    check(body.get("stream") is True and body.get("stream_options") == {"include_usage": True}
          and body.get("temperature") == 0.7 and body.get("max_tokens") == 256,
          "request: stream, include_usage, default temperature 0.7 and max_tokens 256",
          json.dumps({k: v for k, v in body.items() if k != "messages"}))
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    page.el("#prompt").send_keys("Again?")
    ActionChains(page.d).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    check(len(page.all("#messages .msg.user")) == 1 and len(stub.requests) == 1, "Shift+Enter does not send")
    page.ask("Really?", 2, 30, use_enter=True)
    _, body = stub.requests[-1]
    roles = [(m["role"], m["content"]) for m in body["messages"]]
    check(roles == [("user", "Say something dangerous."), ("assistant", INJECTION), ("user", "Again?\nReally?")],
          "multi-turn: the second request carries the whole conversation (Shift+Enter: a new line)", repr(roles))

    # Stop while the answer streams: the part so far stays, the page is ready for the next turn.
    page.el("#prompt").send_keys("slow-stream please")
    page.el("#send").click()
    page.wait(lambda: page.el("#stop").is_displayed() and len(page.all("#messages .msg.assistant")) == 3
              and page.text(page.all("#messages .msg.assistant")[-1]) != "", 15, "Stop shows while streaming")
    page.el("#stop").click()
    page.wait(lambda: page.all("#messages .msg.assistant")[-1].get_attribute("data-done") == "1", 15,
              "the stopped answer is marked done")
    partial = page.text(page.all("#messages .msg.assistant")[-1])
    notes = [page.text(e) for e in page.all("#messages .msg.note")]
    check(partial and INJECTION.startswith(partial) and partial != INJECTION and "stopped" in notes
          and not page.el("#stop").is_displayed() and page.el("#send").is_enabled(),
          "Stop: the answer stops, its part stays, Send is back", f"{partial!r} {notes}")

    # An error response: an error line, as text.
    page.el("#prompt").send_keys("trigger-error please")
    page.el("#send").click()
    err = page.wait(lambda: page.all("#messages .msg.error"), 15, "an error line appears")[-1]
    check(ERROR_MESSAGE in page.text(err), "error: the message shows as text", repr(page.text(err)))
    n_tags = page.d.execute_script("return document.querySelectorAll('#messages img, #messages b').length;")
    pwned = page.d.execute_script("return typeof window.__pwned === 'undefined' ? null : String(window.__pwned);")
    check(n_tags == 0 and pwned is None, "error: no markup from the error message is rendered")

    # A server with an API key: the page asks for it, stores it and sends it.
    stub.require_key = STUB_KEY
    page.d.get(stub.base + "/")
    page.wait(lambda: page.el("#api-key").is_displayed(), 15, "401 on /v1/models shows the API key input")
    ok("401: the page asks for the API key")
    page.el("#api-key").send_keys(STUB_KEY)
    page.el("#save-key").click()
    page.wait(lambda: "stub-model" in page.text(page.el("#model-name")), 15, "model name after saving the key")
    page.ask("With a key.", 1, 30)
    headers, _ = stub.requests[-1]
    check(headers.get("Authorization") == "Bearer " + STUB_KEY, "401: the key is sent as Authorization: Bearer",
          repr(headers.get("Authorization")))
    stored = page.d.execute_script("return window.localStorage.getItem('ggflow-api-key');")
    check(stored == STUB_KEY, "401: the key is stored in localStorage", repr(stored))
    page.d.execute_script("window.localStorage.clear();")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ggflow", default="build/ggflow")
    ap.add_argument("--model", default="models/smollm2-135m-instruct-q4_1.gguf")
    ap.add_argument("--out-dir", default="build/webui-test")
    ap.add_argument("--page", help="only the stub checks, serving this file as the page")
    args = ap.parse_args()
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    def unavailable(what):
        if REQUIRE:
            print(f"FAIL {what} (GGFLOW_REQUIRE_MODELS=1: scripts/setup.sh installs it)")
            return 1
        print(f"skip {what}")
        return SKIP

    if not args.page and not Path(args.model).is_file():
        why = Path(str(args.model) + ".missing")  # scripts/setup.sh says why it could not install it
        return unavailable(f"model {args.model}: " + (why.read_text().strip() if why.is_file() else "not found"))
    if not args.page and not Path(args.ggflow).is_file():
        print(f"FAIL ggflow binary {args.ggflow} not found")
        return 1
    for tool in (CHROMIUM, CHROMEDRIVER):
        if not os.access(tool, os.X_OK):
            return unavailable(f"{tool} not found (apt-get install chromium chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return unavailable("python package selenium not installed in this interpreter")

    server = stub = driver = None
    try:
        if args.page:
            page_bytes = Path(args.page).read_bytes()
        else:
            server = Server(args.ggflow, args.model, out_dir)
            server.wait_ready()
            ok(f"ggflow serve is ready on {server.base}")
            status, page_bytes = http_get(server.base + "/")
            check(status == 200 and b'id="messages"' in page_bytes, f"GET / serves the chat page ({len(page_bytes)} bytes)")
            _, models = http_get(server.base + "/v1/models")
            model_name = json.loads(models)["data"][0]["id"]
        stub = Stub(page_bytes)
        os.nice(10)  # chromedriver and chromium inherit it; the server started before keeps its priority
        driver = start_browser()
        page = Page(driver)
        if server:
            real_server_checks(page, server, model_name, out_dir)
        stub_checks(page, stub, out_dir)
    except Exception as e:  # Failed, or selenium's own (the browser did not start, ...)
        print(f"FAIL {e}" if isinstance(e, Failed) else f"FAIL {type(e).__name__}: {e}")
        if driver:
            try:
                driver.save_screenshot(str(out_dir / "webui_failure.png"))
                print(f"     screenshot {out_dir / 'webui_failure.png'}")
            except Exception:
                pass
        return 1
    finally:
        if driver:
            driver.quit()
        if stub:
            stub.stop()
        if server:
            rc = server.stop()
            print(f"note ggflow serve exited with {rc} on SIGTERM; log in {server.log_path}")
    print("all web UI checks passed" + (" (stub only: --page)" if args.page else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

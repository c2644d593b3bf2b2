#!/usr/bin/env python3
"""HTTPS: `ggflow serve --ssl-cert CERT --ssl-key KEY` (OpenSSL through cpp-httplib).

    check_tls.py --ggflow build/ggflow --model models/smollm2-135m-instruct-q4_1.gguf --out-dir DIR

A self-signed certificate for 127.0.0.1 made with the openssl command (setup installs it), then:
1. the official openai client, trusting that certificate (its HTTP client verifying with it), gets a chat
   answer over HTTPS, streamed and not;
2. a client that does not trust it is refused by the TLS handshake; plain HTTP on the port gets
   no HTTP answer;
3. bad flags stop `ggflow serve` with a message: a certificate file that does not exist, a key
   that does not belong to the certificate, --ssl-cert without --ssl-key.

Exit 0: all passed; 1: a check failed; 77: the model, the openssl command or a package is missing.
"""
import http.client
import shutil
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

from server_util import SKIP_RC, TEST_FLAGS, Checker, Server, free_port, loopback_only, require_packages, setup


def make_cert(d, name):
    cert, key = d / f"{name}.pem", d / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def main():
    ggflow, model, name = setup(__doc__)
    loopback_only()
    (openai,) = require_packages("openai")
    if not shutil.which("openssl"):
        print("skip the openssl command is missing (scripts/setup.sh installs it)")
        return 1 if __import__("os").environ.get("GGFLOW_REQUIRE_MODELS") == "1" else SKIP_RC
    c = Checker()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cert, key = make_cert(d, "server")
        _, other_key = make_cert(d, "other")
        ctx = ssl.create_default_context(cafile=str(cert))
        with Server(ggflow, model, TEST_FLAGS + ["--ssl-cert", cert, "--ssl-key", key], name="server --ssl-cert", tls=ctx) as srv:
            c.check(srv.url.startswith("https://"), "the server answers /ready over HTTPS")
            client = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0,
                                   http_client=openai.DefaultHttpxClient(verify=ctx, timeout=60))
            msgs = [{"role": "user", "content": "What is the capital of France?"}]
            r = client.chat.completions.create(model=name, messages=msgs, max_tokens=12, temperature=0)
            text = r.choices[0].message.content or ""
            c.check(len(text) > 0, "openai client over HTTPS: a chat answer", repr(text))
            parts = [ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
                model=name, messages=msgs, max_tokens=12, temperature=0, stream=True) if ch.choices]
            c.check("".join(parts) == text, "openai client over HTTPS: the streamed answer is the same", repr("".join(parts)))
            try:
                conn = http.client.HTTPSConnection(srv.host, srv.port, timeout=10, context=ssl.create_default_context())
                conn.request("GET", "/health")
                conn.getresponse()
                c.fail("a client that does not trust the certificate is refused", "the request went through")
            except ssl.SSLCertVerificationError:
                c.check(True, "a client that does not trust the certificate is refused")
            try:
                conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
                conn.request("GET", "/health")
                resp = conn.getresponse()
                c.fail("plain HTTP on the HTTPS port gets no HTTP answer", f"status {resp.status}")
            except (http.client.HTTPException, ConnectionError, OSError):
                c.check(True, "plain HTTP on the HTTPS port gets no HTTP answer")
            c.check(srv.stop() == 0, "the server exits 0 on SIGTERM")
        for what, flags, want in (
                ("a certificate that does not exist", ["--ssl-cert", d / "missing.pem", "--ssl-key", key], "cannot load the TLS certificate"),
                ("a key of another certificate", ["--ssl-cert", cert, "--ssl-key", other_key], "cannot load the TLS certificate"),
                ("--ssl-cert without --ssl-key", ["--ssl-cert", cert], "--ssl-cert given without --ssl-key")):
            p = subprocess.run([ggflow, "serve", "-m", model, "--port", str(free_port()), *map(str, flags)],
                               capture_output=True, text=True, timeout=60)
            c.check(p.returncode != 0 and want in p.stderr, f"bad flags: {what} stops serve with a message", p.stderr[-300:])
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""HTTPS end to end for `weft model-server` (docs/serving.md, "HTTPS"): [serving] tls_certificate, tls_private_key
and tls_ca. Certificates are made at run time with the openssl command line (a private CA, a server certificate for
IP:127.0.0.1 and DNS:localhost, a client certificate from that CA, and another CA with a client certificate of its
own); clients are Python's ssl and raw sockets, on 127.0.0.1 only. The servers, models and helpers are
model_server_test.py's.

    model_server_tls_test.py WEFT_CLI [-k NAME]

-k runs the tests whose name contains NAME.
"""
import argparse
import http.client
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time

import numpy as np

import model_server_test as ms
from serving_models import affine_ref, randn, write_affine

HOST = ms.HOST
READ_TIMEOUT_MS = 2000  # the TLS server's [serving] read_timeout_ms, which also bounds a handshake

# One openssl configuration for every certificate, so that the system's openssl.cnf does not matter.
OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""
EC_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


def openssl(d, *args, check=True):
    """`openssl ARGS` in directory d: the completed run (asserting exit 0 when check)."""
    exe = shutil.which("openssl")
    assert exe, "the openssl command line is not on PATH (this test makes its certificates with it)"
    run = subprocess.run([exe, *args], cwd=d, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert run.returncode == 0 or not check, f"openssl {' '.join(args)}: exit {run.returncode}:\n{run.stderr[-1500:]}"
    return run


def make_pki(d):
    """Certificates and keys in directory d, PEM: ca.pem (+ .key), server.pem (IP:127.0.0.1, DNS:localhost) and
    client.pem signed by it; other_ca.pem and other_client.pem signed by that; rsa.key (a key of another type);
    server.der (server.pem as DER). Keys are chmod 600. Returns {name: path}."""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "openssl.cnf"), "w") as f:
        f.write(OPENSSL_CNF)
    cnf, serial = ["-config", "openssl.cnf"], [1000]

    def ca(name):
        openssl(d, "req", *cnf, "-x509", *EC_KEY, "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
                "-subj", f"/CN=weft test {name}", "-extensions", "ca")

    def leaf(name, issuer, cn, kind):
        openssl(d, "req", *cnf, *EC_KEY, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}")
        serial[0] += 1
        openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{issuer}.pem", "-CAkey", f"{issuer}.key",
                "-set_serial", str(serial[0]), "-days", "2", "-out", f"{name}.pem", "-extfile", "openssl.cnf",
                "-extensions", kind)
    ca("ca")
    leaf("server", "ca", "localhost", "server")
    leaf("client", "ca", "weft test client", "client")
    ca("other_ca")
    leaf("other_client", "other_ca", "weft test other client", "client")
    openssl(d, "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.key")
    openssl(d, "x509", "-in", "server.pem", "-outform", "DER", "-out", "server.der")
    paths = {}
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if name.endswith(".key"):
            os.chmod(path, 0o600)
        paths[name] = path
    return paths


class TlsEnv(ms.Env):
    """model_server_test's Env, plus the certificates, one model directory and the two TLS servers (lazily)."""

    def __init__(self, cli):
        super().__init__(cli, long_run=False)
        self._pki = self._models = self._tls = self._mtls = None

    def pki(self):
        if self._pki is None:
            self._pki = make_pki(self.path("pki"))
        return self._pki

    def models(self):
        if self._models is None:
            self._models = self.path("models")
            write_affine(os.path.join(self._models, "affine", "1", "model.onnx"))
        return self._models

    def tls(self):
        """HTTPS without client certificates; the config's paths are relative to its directory."""
        if self._tls is None:
            self.pki()
            ms.write_text(self.path("tls.toml"), '[serving]\ntls_certificate = "pki/server.pem"\n'
                          f'tls_private_key = "pki/server.key"\nread_timeout_ms = {READ_TIMEOUT_MS}\n')
            self._tls = TlsServer(self, "tls", self.models(), self.path("tls.toml"))
        return self._tls

    def mtls(self):
        """HTTPS with tls_ca: clients need a certificate from pki/ca.pem (the config is one directory down)."""
        if self._mtls is None:
            self.pki()
            ms.write_text(self.path("conf", "mtls.toml"), '[serving]\ntls_certificate = "../pki/server.pem"\n'
                          'tls_private_key = "../pki/server.key"\ntls_ca = "../pki/ca.pem"\n')
            self._mtls = TlsServer(self, "mtls", self.models(), self.path("conf", "mtls.toml"))
        return self._mtls


class TlsServer(ms.Server):
    """ms.Server for a server that must say https:// when it starts."""

    def __init__(self, env, name, models, config):
        super().__init__(env, name, models, config, scheme="https")

    def handshake_failures(self):
        return self.stderr().count("the TLS handshake failed")

    def wait_log(self, what, pred, limit_s=10):
        """Waits (at most limit_s) until pred(stderr text); fails naming what was expected."""
        deadline = time.time() + limit_s
        while not pred(self.stderr()):
            assert time.time() < deadline, f"{self.name}: within {limit_s} s the log does not show {what}:\n" \
                f"{self.stderr()[-2000:]}"
            time.sleep(0.05)


def client_context(env, trust="ca.pem", cert=None, version=None):
    """A client's SSLContext: verifies the server (chain to |trust|, and its name: check_hostname is on, so
    127.0.0.1 must be in its subjectAltName); presents |cert| (NAME.pem with NAME.key) if given; only TLS |version|
    if given."""
    pki = env.pki()
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=pki[trust])
    assert ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
    if cert:
        ctx.load_cert_chain(pki[cert + ".pem"], pki[cert + ".key"])
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    return ctx


class TlsClient(ms.Client):
    """ms.Client over HTTPS: a keep-alive connection (reopened after the server closes it)."""

    def __init__(self, port, context, headers=None, timeout=30):
        super().__init__(port, headers, timeout)
        self.context = context

    def call(self, method, path, body=None, headers=None):
        if self.conn is None:
            self.conn = http.client.HTTPSConnection(HOST, self.port, timeout=self.timeout, context=self.context)
        return super().call(method, path, body, headers)

    def local_port(self):
        """The client end's port of the open connection; None when there is none."""
        sock = self.conn.sock if self.conn is not None else None
        return sock.getsockname()[1] if sock is not None else None


# What a client may see when the server refuses it: an alert or a failed handshake (SSLError), or the connection
# closed (before the handshake's end, or, in TLS 1.3, after the client's part of it, at the first request).
REFUSED = (ssl.SSLError, ConnectionResetError, ConnectionAbortedError, BrokenPipeError,
           http.client.RemoteDisconnected)


def expect_refused(port, ctx, what, timeout=10):
    """Asserts a connection with ctx gets no answer to GET /v2/health/ready; returns the exception."""
    c = TlsClient(port, ctx, timeout=timeout)
    try:
        ans = c.get("/v2/health/ready")
    except REFUSED as e:
        return e
    except (TimeoutError, socket.timeout) as e:
        raise AssertionError(f"{what}: expected the server to refuse the connection; it said nothing for "
                             f"{timeout} s") from e
    finally:
        c.close()
    raise AssertionError(f"{what}: expected the TLS handshake to fail; got an answer: {ans}")


def predict_affine(c, seed):
    """POST /v1/models/affine:predict of 3 random rows; asserts the answer is affine_ref's."""
    x = randn(seed, 3, 4)
    got = ms.ok(c.post("/v1/models/affine:predict", {"instances": x.tolist()}))["predictions"]
    ms.assert_close(got, *affine_ref(x, 1), 1e-6, f"affine over HTTPS (seed {seed})")


def test_certificates(env):
    """The certificates the other tests use: what each chains to, the server's names, the keys' modes."""
    pki, d = env.pki(), env.path("pki")
    run = openssl(d, "verify", "-CAfile", "ca.pem", "server.pem", "client.pem", check=False)
    assert run.returncode == 0, f"server.pem and client.pem should verify against ca.pem:\n{run.stdout}{run.stderr}"
    run = openssl(d, "verify", "-CAfile", "other_ca.pem", "other_client.pem", check=False)
    assert run.returncode == 0, f"other_client.pem should verify against other_ca.pem:\n{run.stdout}{run.stderr}"
    for cert, ca in (("other_client.pem", "ca.pem"), ("server.pem", "other_ca.pem")):
        run = openssl(d, "verify", "-CAfile", ca, cert, check=False)
        assert run.returncode != 0, f"{cert} should not verify against {ca}, but openssl verify said {run.stdout!r}"
    text = openssl(d, "x509", "-in", "server.pem", "-noout", "-text").stdout
    assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text, \
        f"server.pem should name IP:127.0.0.1 and DNS:localhost in its subjectAltName:\n{text}"
    modes = {n: oct(os.stat(p).st_mode & 0o777) for n, p in pki.items() if n.endswith(".key")}
    assert modes and set(modes.values()) == {"0o600"}, f"the keys should be chmod 600: {modes}"
    return f"{len(pki)} files in {d}"


def test_https(env):
    server = env.tls()
    assert "affine v1" in server.summary, f"the startup line should list affine v1: {server.summary!r}"
    c = TlsClient(server.port, client_context(env))
    try:
        assert ms.ok(c.get("/v2/health/ready")) == {"ready": True}
        version, ports = c.conn.sock.version(), [c.local_port()]
        for i in range(5):  # keep-alive: every request on the first connection
            predict_affine(c, 100 + i)
            ports.append(c.local_port())
        assert ms.ok(c.get("/v2/health/live")) == {"live": True}
        ports.append(c.local_port())
        assert None not in ports and len(set(ports)) == 1, \
            f"expected 7 requests on one kept-alive connection; the client's ports were {ports}"
    finally:
        c.close()
    c = TlsClient(server.port, client_context(env, version=ssl.TLSVersion.TLSv1_2))
    try:
        predict_affine(c, 110)
        assert c.conn.sock.version() == "TLSv1.2", c.conn.sock.version()
    finally:
        c.close()
    return f"{version} (and TLSv1.2), 7 requests on one connection"


def test_plain_http(env):
    server = env.tls()
    failures_before = server.handshake_failures()
    s = socket.create_connection((HOST, server.port), timeout=5)
    local = s.getsockname()[1]
    got, closed, deadline = b"", False, time.time() + 5
    try:
        s.sendall(ms.http_bytes("GET", "/v2/health/ready"))
        for _ in range(1000):
            left = deadline - time.time()
            if left <= 0:
                break
            s.settimeout(left)
            try:
                chunk = s.recv(4096)
            except ConnectionResetError:
                closed = True
                break
            except (TimeoutError, socket.timeout):
                break
            if not chunk:
                closed = True
                break
            got += chunk
    finally:
        s.close()
    assert b"HTTP/1" not in got, f"a plain HTTP request to the TLS port got an HTTP answer: {got[:300]!r}"
    assert closed, f"expected the server to close a plain HTTP connection; after 5 s it was open, having sent {got!r}"
    server.wait_log(f"refused a connection from {HOST}:{local}: the TLS handshake failed",
                    lambda log: f"refused a connection from {HOST}:{local}: the TLS handshake failed" in log)
    assert server.handshake_failures() > failures_before
    c = TlsClient(server.port, client_context(env))
    try:
        assert ms.ok(c.get("/v2/health/ready")) == {"ready": True}, "HTTPS after a plain HTTP client"
        predict_affine(c, 120)
    finally:
        c.close()
    line = [ln for ln in server.stderr().splitlines() if f"{HOST}:{local}" in ln][0]
    return ("closed with a TLS alert" if got.startswith(b"\x15") else f"closed after {len(got)} bytes") + \
        f"; logged: {line.strip()[-140:]}"


def test_silent_client(env):
    """A client that connects and says nothing is dropped after read_timeout_ms, and logged."""
    server = env.tls()
    before = server.handshake_failures()
    s, t0 = socket.create_connection((HOST, server.port), timeout=10), time.time()
    local = s.getsockname()[1]
    try:
        try:
            got = s.recv(1024)
        except ConnectionResetError:
            got = b""
        except (TimeoutError, socket.timeout):
            got = None
        took = time.time() - t0
    finally:
        s.close()
    assert got is not None, f"a silent client was still connected after 10 s (read_timeout_ms {READ_TIMEOUT_MS})"
    assert not got.startswith(b"HTTP/"), f"a silent client got {got[:200]!r}"
    assert READ_TIMEOUT_MS / 1000 * 0.8 <= took <= READ_TIMEOUT_MS / 1000 + 4, \
        f"a silent client was dropped after {took:.2f} s; expected about read_timeout_ms = {READ_TIMEOUT_MS} ms"
    server.wait_log("the silent client's failed handshake", lambda log: log.count("the TLS handshake failed") > before)
    logged = [ln for ln in server.stderr().splitlines() if "the TLS handshake failed" in ln][before:]
    assert any(f"from {HOST}:{local}: " in ln for ln in logged), \
        f"expected the failed handshake logged with the client's address {HOST}:{local}; the log says {logged}"
    return f"dropped after {took:.2f} s"


def test_untrusted(env):
    """A client that trusts another CA refuses the server's certificate; one that checks another name too."""
    server = env.tls()
    e = expect_refused(server.port, client_context(env, trust="other_ca.pem"), "a client trusting other_ca.pem")
    assert isinstance(e, ssl.SSLCertVerificationError), \
        f"expected ssl.SSLCertVerificationError from a client that does not trust the server's CA, got {e!r}"
    # The name: the server's certificate names 127.0.0.1 and localhost; a client expecting another name refuses it.
    ctx = client_context(env)
    with socket.create_connection((HOST, server.port), timeout=10) as raw:
        try:
            with ctx.wrap_socket(raw, server_hostname="weft.invalid"):
                pass
            raise AssertionError("a client expecting the name weft.invalid accepted the server's certificate")
        except ssl.SSLCertVerificationError as e2:
            assert "weft.invalid" in str(e2) or "match" in str(e2), e2
    # ... and localhost by its DNS name.
    with socket.create_connection((HOST, server.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            assert tls.getpeercert()["subjectAltName"], tls.getpeercert()
    return f"{e.verify_message}"


def test_mtls(env):
    server, notes = env.mtls(), []
    for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
        tag = version.name
        before = server.handshake_failures()
        for cert, what in ((None, "a client without a certificate"),
                           ("other_client", "a client with other_ca's certificate")):
            e = expect_refused(server.port, client_context(env, cert=cert, version=version), f"{tag}: {what}")
            notes.append(f"{tag} {cert or 'none'}: {type(e).__name__}")
        server.wait_log(f"{tag}: two more failed handshakes", lambda log: log.count("the TLS handshake failed") >=
                        before + 2)
        c = TlsClient(server.port, client_context(env, cert="client", version=version))
        try:
            assert ms.ok(c.get("/v2/health/ready")) == {"ready": True}, f"{tag}: the client with ca's certificate"
            predict_affine(c, 130)
            predict_affine(c, 131)
            assert c.conn.sock.version() == tag.replace("_", "."), c.conn.sock.version()
        finally:
            c.close()
    return "; ".join(notes)


def start_fails(env, name, config_text, *words):
    """`weft model-server --config NAME.toml` (config_text, in the work dir) must exit 1 at once, its stderr
    holding every one of |words|; no server is left running whatever happens."""
    config = env.path(name + ".toml")
    ms.write_text(config, config_text)
    out_path, err_path = env.path(name + ".stdout"), env.path(name + ".stderr")
    args = [env.cli, "model-server", "--models", env.models(), "--http-port", "0", "--host", HOST,
            "--poll-interval", "0", "--config", config]
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while proc.poll() is None:
            assert "listening on" not in ms.read_text(out_path), \
                f"{name}: expected the server to refuse to start; it started: {ms.read_text(out_path)!r}"
            assert time.time() < deadline, f"{name}: expected exit 1; still running after 60 s"
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    err = ms.read_text(err_path)
    assert proc.returncode == 1, f"{name}: expected exit 1, got {proc.returncode}; stderr:\n{err[-1500:]}"
    missing = [w for w in words if w not in err]
    assert not missing, f"{name}: stderr lacks {missing}:\n{err[-1500:]}"
    return err.strip().splitlines()[-1] if err.strip() else ""


def test_setup(env):
    pki, p = env.pki(), env.path
    shutil.copy(pki["server.key"], p("pki", "server_0644.key"))
    os.chmod(p("pki", "server_0644.key"), 0o644)
    with open(p("pki", "not_pem.pem"), "w") as f:
        f.write("this is not a certificate\n")

    def serving(**keys):
        return "[serving]\n" + "".join(f'{k} = "{v}"\n' for k, v in keys.items())
    cert = "pki/server.pem"
    cases = [
        ("missing_key", serving(tls_certificate=cert, tls_private_key="pki/missing.key"),
         ["tls_private_key", p("pki", "missing.key")]),
        ("key_0644", serving(tls_certificate=cert, tls_private_key="pki/server_0644.key"),
         ["tls_private_key", p("pki", "server_0644.key"), "chmod 600"]),
        ("other_key", serving(tls_certificate=cert, tls_private_key="pki/client.key"),  # EC, as the certificate's
         ["tls_private_key", p("pki", "client.key"), "is not the key of", "tls_certificate", p("pki", "server.pem")]),
        ("rsa_key", serving(tls_certificate=cert, tls_private_key="pki/rsa.key"),  # another type of key
         ["tls_private_key", p("pki", "rsa.key"), "is not the key of", "tls_certificate"]),
        ("ca_only", serving(tls_ca="pki/ca.pem"), ["tls_ca", "need tls_certificate"]),
        ("key_only", serving(tls_private_key="pki/server.key"), ["tls_private_key", "need tls_certificate"]),
        ("no_key", serving(tls_certificate=cert), ["tls_certificate is set but tls_private_key is not"]),
        ("der_cert", serving(tls_certificate="pki/server.der", tls_private_key="pki/server.key"),
         ["tls_certificate", p("pki", "server.der")]),
        ("text_cert", serving(tls_certificate="pki/not_pem.pem", tls_private_key="pki/server.key"),
         ["tls_certificate", p("pki", "not_pem.pem")]),
        ("missing_cert", serving(tls_certificate="pki/missing.pem", tls_private_key="pki/server.key"),
         ["tls_certificate", p("pki", "missing.pem")]),
        ("missing_ca", serving(tls_certificate=cert, tls_private_key="pki/server.key", tls_ca="pki/missing_ca.pem"),
         ["tls_ca", p("pki", "missing_ca.pem")]),
    ]
    failures, said = [], {}
    for name, text, words in cases:
        try:
            said[name] = start_fails(env, "setup_" + name, text, *words)
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} of {len(cases)} bad set-ups:\n" + "\n".join(failures)
    return f"{len(cases)} refused, e.g. {said['other_key']}"


def test_cli_predict(env):
    """`weft predict https://...`: --cacert, the host name checked, --cert/--key for mutual TLS, and its refusals."""
    pki, d = env.pki(), env.path("predict")
    os.makedirs(d, exist_ok=True)
    x = randn(71, 3, 4)
    np.save(os.path.join(d, "x.npy"), x)
    tls, mtls = env.tls().port, env.mtls().port

    def predict(url, *extra):
        args = [env.cli, "predict", url, "--feed", f"x={os.path.join(d, 'x.npy')}", "--out-dir", d, "-q", *extra]
        return subprocess.run(args, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)

    def answered(run, what):
        assert run.returncode == 0, f"{what}: weft predict exit {run.returncode}: {run.stderr}"
        y = np.load(os.path.join(d, "y.npy"))
        os.remove(os.path.join(d, "y.npy"))
        ms.assert_close(y, *affine_ref(x, 1), 1e-6, what)
    ca, cert, key = ("--cacert", pki["ca.pem"]), ("--cert", pki["client.pem"]), ("--key", pki["client.key"])
    encrypted = os.path.join(d, "client_encrypted.key")
    openssl(d, "pkey", "-in", pki["client.key"], "-aes256", "-passout", "pass:secret", "-out", encrypted)
    answered(predict(f"https://127.0.0.1:{tls}/v2/models/affine", *ca), "https://127.0.0.1")
    answered(predict(f"https://localhost:{tls}/v2/models/affine", *ca), "https://localhost (DNS name)")
    answered(predict(f"https://127.0.0.1:{mtls}/v2/models/affine/infer", *ca, *cert, *key), "mutual TLS")
    cases = [
        ("untrusted", [f"https://127.0.0.1:{tls}/v2/models/affine"], ["TLS handshake", "certificate verify failed",
                                                                       "--cacert"]),
        # 127.1 is 127.0.0.1 to the resolver, but a name the certificate does not hold.
        ("wrong name", [f"https://127.1:{tls}/v2/models/affine", *ca], ["certificate verify failed"]),
        ("no client certificate", [f"https://127.0.0.1:{mtls}/v2/models/affine", *ca], ["certificate required"]),
        ("foreign client certificate", [f"https://127.0.0.1:{mtls}/v2/models/affine", *ca, "--cert",
                                        pki["other_client.pem"], "--key", pki["other_client.key"]], ["unknown ca"]),
        ("http to https", [f"http://127.0.0.1:{tls}/v2/models/affine"], ["use an https:// URL"]),
        ("cacert on http", [f"http://127.0.0.1:{tls}/v2/models/affine", *ca], ["are for https:// URLs"]),
        ("cert without key", [f"https://127.0.0.1:{mtls}/v2/models/affine", *ca, *cert], ["--cert and --key go"]),
        ("key of another", [f"https://127.0.0.1:{mtls}/v2/models/affine", *ca, *cert, "--key", pki["server.key"]],
         ["is not the key of --cert"]),
        ("encrypted key", [f"https://127.0.0.1:{mtls}/v2/models/affine", *ca, *cert, "--key", encrypted],
         ["--key", "client_encrypted.key", "without a pass phrase"]),
        ("missing cacert", [f"https://127.0.0.1:{tls}/v2/models/affine", "--cacert", os.path.join(d, "no.pem")],
         ["--cacert", "no.pem", "No such file"]),
        ("cacert not PEM", [f"https://127.0.0.1:{tls}/v2/models/affine", "--cacert", pki["server.der"]],
         ["--cacert", "server.der"]),
    ]
    failures = []
    for what, args, words in cases:
        run = predict(*args)
        missing = [w for w in words if w not in run.stderr]
        if run.returncode != 1 or missing:
            failures.append(f"{what}: exit {run.returncode}, stderr lacks {missing}: {run.stderr.strip()[-400:]}")
    assert not failures, "\n".join(failures)
    return f"3 answered, {len(cases)} refused"


TESTS = [test_certificates, test_https, test_plain_http, test_silent_client, test_untrusted, test_mtls, test_setup,
         test_cli_predict]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("weft")
    parser.add_argument("-k", default="", help="run the tests whose name contains this")
    args = parser.parse_args()
    return ms.run_tests(TESTS, TlsEnv(os.path.abspath(args.weft)), args.k, "model-server TLS tests")

if __name__ == "__main__":
    sys.exit(main())

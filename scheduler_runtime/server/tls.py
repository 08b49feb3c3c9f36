"""TLS of the secure port: `--tls-min-version` and `--tls-cipher-suites` as kube names them, and the
self-signed pair kube-scheduler makes when given no certificate.

Follows k8s.io/component-base v0.36.3 cli/flag/ciphersuites_flag.go (Go/IANA suite names, TLS 1.3 suites not
configurable) and client-go v0.36.3 util/cert/cert.go (GenerateSelfSignedCertKeyWithFixtures).
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import ipaddress
import logging
import ssl
import threading
from typing import Any

from ..errors import UsageError

#: Go/IANA cipher-suite names (crypto/tls) -> OpenSSL names; TLS 1.3 suites are not configurable in Go either
CIPHER_SUITES: dict[str, str] = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
}
TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
TLS_VERSIONS = {"VersionTLS12": ssl.TLSVersion.TLSv1_2, "VersionTLS13": ssl.TLSVersion.TLSv1_3}


def tls_settings(min_version: str | None, cipher_suites: list[str]) -> tuple[ssl.TLSVersion, str | None]:
    """Validate `--tls-min-version` and `--tls-cipher-suites`; (minimum version, OpenSSL cipher string)."""
    if min_version in ("VersionTLS10", "VersionTLS11"):
        raise UsageError(f"--tls-min-version: {min_version} is not supported by ksched (OpenSSL here refuses TLS "
                         "below 1.2); use VersionTLS12 or VersionTLS13")
    if min_version and min_version not in TLS_VERSIONS:
        raise UsageError(f'--tls-min-version: unknown tls version "{min_version}": allowed values are '
                         "VersionTLS12, VersionTLS13")
    version = TLS_VERSIONS.get(min_version or "VersionTLS12", ssl.TLSVersion.TLSv1_2)
    names = [c.strip() for c in cipher_suites if c.strip()]
    if not names:
        return version, None
    openssl: list[str] = []
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for name in names:
        if name in TLS13_SUITES:
            continue  # as in Go: TLS 1.3 suites are always on and cannot be chosen
        mapped = CIPHER_SUITES.get(name)
        if mapped is None:
            raise UsageError(f"--tls-cipher-suites: cipher suite {name} not supported or doesn't exist "
                             "(use Go/IANA names such as TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)")
        try:
            probe.set_ciphers(mapped)
        except ssl.SSLError:
            raise UsageError(f"--tls-cipher-suites: {name} ({mapped}) is not available in this OpenSSL "
                             f"({ssl.OPENSSL_VERSION})") from None
        openssl.append(mapped)
    if not openssl:
        if version < ssl.TLSVersion.TLSv1_3:
            raise UsageError("--tls-cipher-suites: only TLS 1.3 suites given, which leaves TLS 1.2 with none: add "
                             "TLS 1.2 suites or set --tls-min-version=VersionTLS13")
        return version, None
    return version, ":".join(openssl)


# ------------------------------------------------------------------ client certificates verified after the handshake
#
# kube's secure port asks for a client certificate without requiring one (crypto/tls RequestClientCert) and
# verifies it in the x509 authenticator: a certificate from an unknown authority completes the handshake and
# the request is answered 401. OpenSSL's CERT_OPTIONAL instead aborts the handshake on such a certificate, and
# Python's ssl module offers no verify callback. So the context gets one through libssl (the one `_ssl` is
# linked with): it notes OpenSSL's verdict for the handshaking thread and lets the handshake go on; the server
# then treats a certificate that failed as failed credentials, never as an identity.

log = logging.getLogger("ksched.server")

_verdict = threading.local()
#: OpenSSL X509_V_ERR_* codes -> Go's crypto/x509 wording, which kube's authenticator reports
_X509_ERRORS = {9: "x509: certificate has expired or is not yet valid", 10:
                "x509: certificate has expired or is not yet valid",
                26: "x509: certificate specifies an incompatible key usage"}
_UNKNOWN_AUTHORITY = "x509: certificate signed by unknown authority"
_libssl: Any = None


def _on_verify(preverify_ok: int, store_ctx: int | None) -> int:
    if not preverify_ok and getattr(_verdict, "error", None) is None:
        code = _libssl.X509_STORE_CTX_get_error(store_ctx) if store_ctx else 0
        _verdict.error = _X509_ERRORS.get(code, _UNKNOWN_AUTHORITY)
    return 1  # always go on: the verdict decides authentication, not the handshake


_VERIFY_CB = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)(_on_verify)


def _load_libssl() -> Any:
    global _libssl
    if _libssl is None:
        import _ssl

        lib = ctypes.CDLL(_ssl.__file__)
        lib.SSL_CTX_set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        lib.SSL_CTX_set_verify.restype = None
        lib.SSL_CTX_get_verify_mode.argtypes = [ctypes.c_void_p]
        lib.SSL_CTX_get_verify_mode.restype = ctypes.c_int
        lib.X509_STORE_CTX_get_error.argtypes = [ctypes.c_void_p]
        lib.X509_STORE_CTX_get_error.restype = ctypes.c_int
        _libssl = lib
    return _libssl


def request_client_cert(ctx: ssl.SSLContext) -> bool:
    """Ask for a client certificate (CERT_OPTIONAL) and verify it without failing the handshake; read the
    verdict with `client_cert_verdict()` in the thread that ran the handshake. False (the handshake then
    fails on an unverifiable certificate, as plain CERT_OPTIONAL) where libssl cannot be reached."""
    ctx.verify_mode = ssl.CERT_OPTIONAL
    try:
        lib = _load_libssl()
        # CPython's SSLContext object holds its SSL_CTX* right after the object header
        ssl_ctx = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
        if not ssl_ctx or lib.SSL_CTX_get_verify_mode(ssl_ctx) != 1:  # SSL_VERIFY_PEER: the layout holds
            raise OSError("unexpected SSLContext layout")
        lib.SSL_CTX_set_verify(ssl_ctx, 1, ctypes.cast(_VERIFY_CB, ctypes.c_void_p))
        return True
    except (OSError, AttributeError) as exc:
        log.warning("client certificates from unknown authorities will fail the TLS handshake: %s", exc)
        return False


def start_handshake() -> None:
    """Forget the verdict of an earlier handshake in this thread."""
    _verdict.error = None


def client_cert_verdict() -> str | None:
    """Why the client certificate of this thread's last handshake did not verify (Go's wording); None if it
    did or none was sent."""
    return getattr(_verdict, "error", None)


def self_signed_pem(host: str = "localhost", bind_address: str | None = None) -> tuple[bytes, bytes]:
    """kube-scheduler's pair when given no certificate (client-go GenerateSelfSignedCertKey): an RSA-2048 CA
    `<host>-ca@<unix>` and a serving certificate `<host>@<unix>` it signs, for `host` and 127.0.0.1 (plus
    the bind address unless it is 0.0.0.0/::), valid from an hour ago for a year. RSA, not EC, so that
    `--tls-cipher-suites` with the usual ECDHE_RSA suites works with it as with kube's. Returns
    (serving cert + CA cert PEM, serving key PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = _dt.datetime.now(_dt.UTC)
    ts = int(now.timestamp())

    def builder(cn: str, key: object) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
                .public_key(key.public_key()).serial_number(x509.random_serial_number())  # type: ignore[attr-defined]
                .not_valid_before(now - _dt.timedelta(hours=1)).not_valid_after(now + _dt.timedelta(days=365)))

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-ca@{ts}")])
    ca = (builder(f"{host}-ca@{ts}", ca_key).issuer_name(ca_name)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=True,
                                       content_commitment=False, data_encipherment=False, key_agreement=False,
                                       crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    alt: list[x509.GeneralName] = [x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    if bind_address:
        try:
            ip = ipaddress.ip_address(bind_address)
            if not ip.is_unspecified and ip != ipaddress.ip_address("127.0.0.1"):
                alt.append(x509.IPAddress(ip))
        except ValueError:
            pass
    if host != "localhost":
        alt.append(x509.DNSName("localhost"))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (builder(f"{host}@{ts}", key).issuer_name(ca_name)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                         content_commitment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))

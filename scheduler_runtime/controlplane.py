"""A real local control plane: etcd + kube-apiserver on loopback, as controller-runtime's envtest runs them.

Used by the integration tests and by `ksched dev-cluster`. The binaries come from KUBEBUILDER_ASSETS or
from the cache that `hack/build-controlplane.sh` fills (built from Go modules).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from . import processes
from .atomicfile import atomic_write
from .errors import KschedError

VERSION_FILE = Path(__file__).resolve().parents[1] / "hack" / "controlplane" / "VERSION"
DEFAULT_VERSION = "1.37.2"
#: the previous minor's kube-scheduler (the oracle of `--emulated-version <previous minor>` parity tests)
PREV_VERSION_FILE = VERSION_FILE.parents[1] / "controlplane-prev" / "VERSION"
DEFAULT_PREV_VERSION = "1.36.3"


class ControlPlaneUnavailable(KschedError):
    """No kube-apiserver/etcd binaries: says how to get them."""


def _version() -> str:
    try:
        return VERSION_FILE.read_text().strip()
    except OSError:
        return DEFAULT_VERSION


def prev_version() -> str:
    try:
        return PREV_VERSION_FILE.read_text().strip()
    except OSError:
        return DEFAULT_PREV_VERSION


def find_prev_scheduler() -> Path:
    """The previous minor's kube-scheduler: KSCHED_PREV_SCHEDULER, or the cache `hack/build-prev-scheduler.sh`
    fills."""
    env = os.environ.get("KSCHED_PREV_SCHEDULER")
    cache = Path(os.environ.get("KSCHED_CACHE", Path.home() / ".cache" / "ksched"))
    exe = Path(env) if env else cache / "controlplane" / prev_version() / "bin" / "kube-scheduler"
    if exe.is_file():
        return exe
    raise ControlPlaneUnavailable(f"no kube-scheduler v{prev_version()} at {exe}: run `bash "
                                  "hack/build-prev-scheduler.sh` (builds it from Go modules)")


def find_binaries() -> Path:
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    candidates = [Path(assets)] if assets else []
    cache = Path(os.environ.get("KSCHED_CACHE", Path.home() / ".cache" / "ksched"))
    candidates.append(cache / "controlplane" / _version() / "bin")
    for c in candidates:
        if (c / "kube-apiserver").is_file() and (c / "etcd").is_file():
            return c
    raise ControlPlaneUnavailable(
        "no kube-apiserver/etcd binaries found (looked in " + ", ".join(str(c) for c in candidates)
        + "): run `bash hack/build-controlplane.sh` (builds them from Go modules) or set KUBEBUILDER_ASSETS")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_pki(d: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = _dt.datetime.now(_dt.UTC)

    def pem_key(k: Any) -> bytes:
        return k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())

    def cert(subject: x509.Name, key: Any, issuer: x509.Name, signer: Any, ca: bool,
             san: list[x509.GeneralName] | None = None, usage: list[Any] | None = None) -> x509.Certificate:
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - _dt.timedelta(hours=1))
             .not_valid_after(now + _dt.timedelta(days=365))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        if usage:
            b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        return b.sign(signer, hashes.SHA256())

    d.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ksched-test-ca")])
    ca = cert(ca_name, ca_key, ca_name, ca_key, True)
    (d / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]), srv_key, ca_name, ca_key,
               False, [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
               [ExtendedKeyUsageOID.SERVER_AUTH])
    (d / "apiserver.crt").write_bytes(srv.public_bytes(serialization.Encoding.PEM)
                                      + ca.public_bytes(serialization.Encoding.PEM))
    (d / "apiserver.key").write_bytes(pem_key(srv_key))
    adm_key = ec.generate_private_key(ec.SECP256R1())
    adm = cert(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                          x509.NameAttribute(NameOID.COMMON_NAME, "ksched-admin")]), adm_key, ca_name, ca_key,
               False, None, [ExtendedKeyUsageOID.CLIENT_AUTH])
    (d / "admin.crt").write_bytes(adm.public_bytes(serialization.Encoding.PEM))
    (d / "admin.key").write_bytes(pem_key(adm_key))
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (d / "sa.key").write_bytes(pem_key(sa))
    (d / "sa.pub").write_bytes(sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                            serialization.PublicFormat.SubjectPublicKeyInfo))
    for name in ("apiserver.key", "admin.key", "sa.key"):
        (d / name).chmod(0o600)


class ControlPlane:
    """etcd + kube-apiserver. `start()` waits for /readyz; `stop()` kills both and removes the state dir
    unless it was given by the caller."""

    def __init__(self, state_dir: str | Path | None = None, bin_dir: str | Path | None = None,
                 start_timeout: float = 90.0, stop_grace: float = processes.DEFAULT_GRACE,
                 detached: bool = False, apiserver_args: tuple[str, ...] = ()) -> None:
        self.bin_dir = Path(bin_dir) if bin_dir else find_binaries()
        self._own_dir = state_dir is None
        self.dir = Path(state_dir) if state_dir else Path(tempfile.mkdtemp(prefix="ksched-cp-"))
        self.start_timeout = start_timeout
        #: seconds stop() waits after SIGTERM before it sends SIGKILL
        self.stop_grace = stop_grace
        #: a detached control plane (ksched dev-cluster) outlives this process; any other one is killed by the
        #: kernel when its starter dies, even by SIGKILL
        self._preexec = None if detached else processes.die_with_parent
        #: more kube-apiserver flags, e.g. `--feature-gates` for the alpha fields a parity test needs stored
        self.apiserver_args = apiserver_args
        self.etcd: subprocess.Popen[bytes] | None = None
        self.apiserver: subprocess.Popen[bytes] | None = None
        self.controller_manager: subprocess.Popen[bytes] | None = None
        self.etcd_port = 0
        self.api_port = 0

    # ------------------------------------------------------------------ properties
    @property
    def server_url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def kubeconfig_path(self) -> Path:
        return self.dir / "admin.kubeconfig"

    @property
    def pki(self) -> Path:
        return self.dir / "pki"

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> ControlPlane:
        if not (self.pki / "ca.crt").exists():
            _write_pki(self.pki)
        self.etcd_port = self.etcd_port or free_port()
        self.api_port = self.api_port or free_port()
        self._start_etcd()
        self._start_apiserver()
        self._write_kubeconfig()
        return self

    def _log(self, name: str) -> Any:
        return open(self.dir / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child process

    def _start_etcd(self) -> None:
        peer = free_port()
        url = f"http://127.0.0.1:{self.etcd_port}"
        args = [str(self.bin_dir / "etcd"), f"--data-dir={self.dir / 'etcd'}", f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}", f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}", "--unsafe-no-fsync=true",
                "--log-level=warn"]
        self.etcd = subprocess.Popen(args, stdout=self._log("etcd"), stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=self._preexec)
        self._wait(f"{url}/health", "etcd", self.etcd)

    def _start_apiserver(self) -> None:
        pki = self.pki
        args = [str(self.bin_dir / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--cert-dir={pki}", f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}", f"--client-ca-file={pki / 'ca.crt'}",
                f"--secure-port={self.api_port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
                "--service-cluster-ip-range=10.0.0.0/24", "--allow-privileged=true",
                "--disable-admission-plugins=ServiceAccount", "--authorization-mode=RBAC",
                f"--service-account-issuer=https://127.0.0.1:{self.api_port}/",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                # 1.37 refuses a loopback advertise address with an endpoint reconciler; nothing here can reach
                # the `kubernetes` Service's endpoints anyway (no kube-proxy), so none are kept
                "--endpoint-reconciler-type=none", "--v=0", *self.apiserver_args]
        self.apiserver = subprocess.Popen(args, stdout=self._log("kube-apiserver"), stderr=subprocess.STDOUT,
                                          start_new_session=True, preexec_fn=self._preexec)
        self._wait(f"{self.server_url}/readyz", "kube-apiserver", self.apiserver)

    def start_controller_manager(self, controllers: tuple[str, ...] = ("resourceclaim-controller",),
                                 extra_args: tuple[str, ...] = ()) -> None:
        """kube-controller-manager with only `controllers` (by default the resourceclaim controller, which turns
        pods' ResourceClaimTemplates into claims), no leader election and no serving port, plus `extra_args`.
        Idempotent."""
        if self.controller_manager is not None and self.controller_manager.poll() is None:
            return
        exe = self.bin_dir / "kube-controller-manager"
        if not exe.is_file():
            raise ControlPlaneUnavailable(f"no kube-controller-manager in {self.bin_dir}: run `bash "
                                          f"hack/build-controlplane.sh` (builds it from Go modules)")
        args = [str(exe), f"--kubeconfig={self.kubeconfig_path}", f"--controllers={','.join(controllers)}",
                "--leader-elect=false", "--secure-port=0", "--v=1", *extra_args]
        self.controller_manager = subprocess.Popen(args, stdout=self._log("kube-controller-manager"),
                                                   stderr=subprocess.STDOUT, start_new_session=True,
                                                   preexec_fn=self._preexec)

    def stop_controller_manager(self) -> None:
        self._kill("kube-controller-manager", self.controller_manager)
        self.controller_manager = None

    def _wait(self, url: str, what: str, proc: subprocess.Popen[bytes]) -> None:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt")) if url.startswith("https") else None
        if ctx is not None:
            ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        deadline = time.monotonic() + self.start_timeout
        last = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            try:
                with urllib.request.urlopen(url, timeout=3, context=ctx) as r:  # noqa: S310 - loopback only
                    if r.status == 200:
                        return
            except Exception as exc:  # not up yet
                last = str(exc)
            time.sleep(0.3)
        log = (self.dir / f"{what}.log").read_text(errors="replace").splitlines()[-15:]
        self.stop()
        raise KschedError(f"{what} did not become ready ({last}); last log lines:\n" + "\n".join(log), usage=False)

    def _write_kubeconfig(self) -> None:
        pki = self.pki
        text = f"""apiVersion: v1
kind: Config
clusters:
- name: ksched-dev
  cluster:
    server: {self.server_url}
    certificate-authority: {pki / 'ca.crt'}
users:
- name: ksched-admin
  user:
    client-certificate: {pki / 'admin.crt'}
    client-key: {pki / 'admin.key'}
contexts:
- name: ksched-dev
  context: {{cluster: ksched-dev, user: ksched-admin}}
current-context: ksched-dev
"""
        self.kubeconfig_path.write_text(text)
        self.kubeconfig_path.chmod(0o600)

    def _kill(self, name: str, proc: subprocess.Popen[bytes] | None) -> processes.Stopped | None:
        """SIGTERM the child's process group, SIGKILL it after `stop_grace` seconds; says how it ended."""
        if proc is None:
            return None
        if proc.poll() is not None:
            return processes.Stopped(name, proc.pid, f"had already exited (status {proc.returncode})", True)
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(self.stop_grace)
            return processes.Stopped(name, proc.pid, "stopped by SIGTERM", True)
        except ProcessLookupError:
            proc.wait(processes.KILL_WAIT)
            return processes.Stopped(name, proc.pid, "stopped by SIGTERM", True)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(processes.KILL_WAIT)
            return processes.Stopped(name, proc.pid, f"still running {self.stop_grace:g} s after SIGTERM: killed "
                                                     f"with SIGKILL", True)

    def restart_apiserver(self) -> None:
        """Stop and start kube-apiserver only (same port, certs and etcd), as an API-server restart."""
        self._kill("kube-apiserver", self.apiserver)
        self.apiserver = None
        self._start_apiserver()

    def stop_apiserver(self) -> None:
        self._kill("kube-apiserver", self.apiserver)
        self.apiserver = None

    def stop(self) -> list[processes.Stopped]:
        """Stop kube-controller-manager, kube-apiserver, then etcd (SIGTERM, SIGKILL after `stop_grace`); one
        report per process."""
        out = [r for r in (self._kill("kube-controller-manager", self.controller_manager),
                           self._kill("kube-apiserver", self.apiserver), self._kill("etcd", self.etcd)) if r]
        self.controller_manager = None
        self.apiserver = self.etcd = None
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        return out

    # ------------------------------------------------------------------ detached use (ksched dev-cluster)
    STATE_VERSION = 2

    def save_state(self) -> None:
        """Record ports and each process's identity (pid, start time, command line) for `stop_detached`."""
        import json

        assert self.etcd is not None and self.apiserver is not None
        procs = []
        for name, proc in (("kube-apiserver", self.apiserver), ("etcd", self.etcd)):
            ident = processes.identify_started(proc.pid)
            if ident is None:
                raise KschedError(f"{name} (pid {proc.pid}) exited right after start; see {self.dir / name}.log",
                                  usage=False)
            procs.append({"name": name, **ident.to_json()})
        data = json.dumps({"version": self.STATE_VERSION, "processes": procs, "etcd_port": self.etcd_port,
                           "api_port": self.api_port, "bin_dir": str(self.bin_dir)}, indent=1).encode()
        atomic_write(self.dir / "state.json", data, 0o600)

    @staticmethod
    def load_state(state_dir: Path) -> dict[str, Any] | None:
        import json

        try:
            st = json.loads((state_dir / "state.json").read_text())
        except (OSError, ValueError):
            return None
        return st if isinstance(st, dict) else None

    @staticmethod
    def stop_detached(state_dir: Path, grace: float = processes.DEFAULT_GRACE) -> list[processes.Stopped] | None:
        """Stop the processes a state file records, each only if it is still the process we started.

        None when there is no state file. The state file is removed once every recorded process is gone;
        it stays when one could not be checked or stopped, so the user can see what is left."""
        st = ControlPlane.load_state(state_dir)
        if st is None:
            return None
        out: list[processes.Stopped] = []
        recorded = st.get("processes") if isinstance(st.get("processes"), list) else None
        if recorded is None:  # a state file from before identities were recorded: never signal blindly
            for key, name in (("apiserver_pid", "kube-apiserver"), ("etcd_pid", "etcd")):
                pid = st.get(key)
                if isinstance(pid, int) and processes.identify(pid) is not None:
                    out.append(processes.Stopped(name, pid, f"recorded without its start time and command line "
                                                            f"(state file from an older ksched): not signalled; "
                                                            f"check `ps -o args -p {pid}` and stop it by hand if it "
                                                            f"is the dev cluster's", False))
                elif isinstance(pid, int):
                    out.append(processes.Stopped(name, pid, "already gone", True))
        else:
            for i, entry in enumerate(recorded):
                name = str(entry.get("name") or f"process {i}") if isinstance(entry, dict) else f"process {i}"
                ident = processes.Identity.from_json(entry)
                if ident is None:
                    out.append(processes.Stopped(name, 0, f"state file entry processes[{i}] is not a pid, start "
                                                          f"time and command line: not signalled", False))
                    continue
                out.append(processes.stop(name, ident, grace))
        if all(r.gone for r in out):
            (state_dir / "state.json").unlink(missing_ok=True)
        return out

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

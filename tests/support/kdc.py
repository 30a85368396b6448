"""A throw-away MIT Kerberos KDC on 127.0.0.1, for the secured Hive Metastore tests.

Everything (``krb5.conf``, ``kdc.conf``, the principal database, keytabs, the log) lives in
one directory; the KDC's port is chosen free on loopback, for UDP and TCP alike. Clients use
the realm through ``KRB5_CONFIG`` (Python) or ``-Djava.security.krb5.conf`` (the JVM).

Hostnames are never canonicalized or reverse-resolved (``rdns``,
``dns_canonicalize_hostname``): a server principal ``hive/127.0.0.1@REALM`` is what both sides
build from the address ``127.0.0.1``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

REALM = "LANCE.TEST"
_MASTER_PASSWORD = "lance-metastore-test-master"
KDC_BINARIES = ("krb5kdc", "kdb5_util", "kadmin.local")


def _find(binary: str) -> str | None:
    return shutil.which(binary) or next(
        (str(p) for p in (Path("/usr/sbin") / binary, Path("/sbin") / binary) if p.exists()),
        None,
    )


def missing_binaries() -> list[str]:
    """The MIT KDC programs not installed here (``scripts/install-kerberos.sh`` installs them)."""
    return [name for name in KDC_BINARIES if _find(name) is None]


def _free_port() -> int:
    """A port free on 127.0.0.1 for both TCP and UDP (the KDC listens on both)."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp:
            tcp.bind(("127.0.0.1", 0))
            port = int(tcp.getsockname()[1])
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                try:
                    udp.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
    raise RuntimeError("no port free for both TCP and UDP on 127.0.0.1")


class Kdc:
    """An MIT ``krb5kdc`` with its own realm; ``add_principal`` makes principals and keytabs."""

    def __init__(self, directory: Path, realm: str = REALM) -> None:
        self.directory = directory
        self.realm = realm
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def krb5_conf(self) -> Path:
        return self.directory / "krb5.conf"

    @property
    def env(self) -> dict[str, str]:
        """Environment for MIT tools and libraries run against this realm."""
        return {
            **os.environ,
            "KRB5_CONFIG": str(self.krb5_conf),
            "KRB5_KDC_PROFILE": str(self.directory / "kdc.conf"),
        }

    def start(self, timeout: float = 30.0) -> None:
        """Start the KDC; a restart keeps the port, the realm and its principals."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = _free_port()
            self._write_conf()
            self._run(_find("kdb5_util"), "create", "-s", "-r", self.realm, "-P", _MASTER_PASSWORD)
        log = (self.directory / "krb5kdc.stdout").open("ab")
        self._process = subprocess.Popen(
            [_find("krb5kdc") or "krb5kdc", "-n", "-r", self.realm],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                raise RuntimeError(f"krb5kdc exited: {self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"krb5kdc did not listen: {self.log_tail()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)

    def __enter__(self) -> Kdc:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"

    def add_principal(self, name: str, *, max_life: str | None = None) -> Path:
        """Create ``name@REALM`` with a random key and return a keytab holding it."""
        principal = self.principal(name)
        life = f' -maxlife "{max_life}"' if max_life else ""
        self._kadmin(f"addprinc -randkey{life} {principal}")
        keytab = self.directory / f"{name.replace('/', '_')}.keytab"
        self._kadmin(f"ktadd -k {keytab} {principal}")
        return keytab

    def delete_principal(self, name: str) -> None:
        self._kadmin(f"delprinc -force {self.principal(name)}")

    def log_tail(self, lines: int = 30) -> str:
        path = self.directory / "krb5kdc.log"
        if not path.exists():
            return "(no KDC log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _kadmin(self, query: str) -> None:
        self._run(_find("kadmin.local"), "-r", self.realm, "-q", query)

    def _run(self, binary: str | None, *args: str) -> None:
        if binary is None:
            raise RuntimeError(f"MIT Kerberos tools missing: {', '.join(missing_binaries())}")
        result = subprocess.run(
            [binary, *args], env=self.env, capture_output=True, text=True, timeout=60
        )
        if result.returncode != 0 or "error" in result.stderr.lower():
            raise RuntimeError(f"{Path(binary).name} {' '.join(args)}: {result.stderr.strip()}")

    def _write_conf(self) -> None:
        d = self.directory
        self.krb5_conf.write_text(
            f"""[libdefaults]
  default_realm = {self.realm}
  dns_lookup_kdc = false
  dns_lookup_realm = false
  rdns = false
  dns_canonicalize_hostname = false
  udp_preference_limit = 1
  clockskew = 2
  ticket_lifetime = 1h
  renew_lifetime = 1d
  forwardable = true
  default_ccache_name = FILE:{d}/ccache-default

[realms]
  {self.realm} = {{
    kdc = 127.0.0.1:{self.port}
  }}
"""
        )
        (d / "kdc.conf").write_text(
            f"""[kdcdefaults]
  kdc_ports = {self.port}
  kdc_tcp_listen = 127.0.0.1:{self.port}
  kdc_listen = 127.0.0.1:{self.port}

[realms]
  {self.realm} = {{
    database_name = {d}/principal
    key_stash_file = {d}/stash
    acl_file = {d}/kadm5.acl
    max_life = 1h
    max_renewable_life = 1d
    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
  }}

[logging]
  kdc = FILE:{d}/krb5kdc.log
"""
        )
        (d / "kadm5.acl").write_text("")

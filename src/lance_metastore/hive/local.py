"""Run a real Apache Hive Metastore (HMS) on this machine, for tests, the CLI and demos.

Three releases (``version``): ``"2.3"`` (the default) runs from the pyspark wheel, which ships
Hive Metastore 2.3 with Derby and every dependency it needs, so it needs nothing but a Java
runtime; ``"3.1"`` (3.1.3) and ``"4"`` (4.0.1, the newest 4.x Maven Central holds a server
of) run Hive's standalone metastore, fetched once with Maven into the user cache (see
:mod:`lance_metastore.hive.distributions`). All of them run on Java 17 with Derby.

:class:`LocalMetastore` writes the metastore's configuration into its data directory,
launches ``HiveMetaStore`` as a detached JVM and waits until the Thrift port answers a real
call. All state (the Derby database, the
warehouse, the logs and a state file naming the process) lives in that data directory, so a
later process - ``lance-metastore hms stop`` for instance - can find and stop the server
through :meth:`LocalMetastore.from_data_dir`.

Two things stock HMS 2.3 needs to take table locks, which Lance commits rely on:

- The transaction tables (``TXNS``, ``HIVE_LOCKS``, ...). DataNucleus does not create them,
  and Hive only creates them itself in its test mode (``hive.in.test``), which also rejects
  every lock request whose operation type is left unset (the default of Hive's and
  pymetastore's ``LockComponent``). So the JVM's entry point is a short script, run by the
  Janino script evaluator that pyspark ships, which calls Hive's own ``TxnDbUtil.prepDb``
  (its "already exists" error is ignored on later starts) and then ``HiveMetaStore.main``.
- A connection pool that is on the classpath: Hive's default, BoneCP, is not in pyspark, and
  the transaction code fails with ``NoClassDefFoundError`` without it, so HikariCP is used.

The standalone metastores need the same, found differently:

- 3.1 still has ``TxnDbUtil.prepDb`` in its main jar; the boot script calls it.
- 4.0 moved it to a test jar that reads Hive's SQL scripts from a source tree, and no Maven
  artifact holds those scripts: the boot script runs :data:`HMS4_TXN_TABLES` instead, this
  project's own Derby DDL for the tables the 4.0 server's transaction code reads and writes
  (locks, their housekeeping, and the clean-ups of table drops and renames).
- Their defaults name classes that live in Hive's query engine, not in the standalone jars
  (the partition expression proxy; 3.1's dump-directory cleaner): the configuration names
  the standalone ones.

Every release listens on ``host`` only (``127.0.0.1`` by default): 4.0 through its own
``metastore.thrift.bind.host``. 2.3 and 3.1 have no bind setting (their Thrift server asks for
the wildcard address), so their boot script first installs :data:`_BIND_GUARD`, a server-socket
factory of this project that binds wildcard requests to ``host`` instead; it needs the JVM to
open ``java.net`` to it. A wildcard ``host`` (``0.0.0.0``, ``::``) listens everywhere, as asked.
The exception: a 2.3 or 3.1 metastore with TLS (``hive.metastore.use.SSL``) still listens on
every interface, because Java's TLS server socket cannot accept through the guard. After a
start on Linux, :meth:`LocalMetastore.listening_addresses` shows what the kernel says the port
is bound to, and ``start`` warns if it is more than ``host``.

Tables on S3: a metastore checks (and creates) a table's directory through Hadoop's FileSystem
when it creates or alters the entry, and answers ``No FileSystem for scheme "s3"`` without one.
``LocalMetastore(..., version="3.1", s3_endpoint=..., s3_credentials=...)`` runs the release
with Hadoop's S3A file system (:meth:`HiveRelease.with_s3`) and writes the Hadoop settings of
:func:`s3_site_properties` into ``core-site.xml``, as a deployment configures its metastore.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape

from ..rules.extras import install_hint, requires_extra
from . import class_archive
from .distributions import DEFAULT_VERSION, HiveRelease, ReleaseFetchError, fetch_release, release

if TYPE_CHECKING:
    from pymetastore.hive_metastore import ThriftHiveMetastore

__all__ = [
    "DEFAULT_HEAP",
    "FAST_LOCK_EXPIRY",
    "JVM_FLAGS",
    "JavaNotFoundError",
    "LocalMetastore",
    "MetastoreAlreadyRunningError",
    "MetastoreError",
    "MetastoreStartError",
    "MetastoreStatus",
    "find_pyspark_jars",
    "hive_site_properties",
    "java_executable",
    "listening_addresses",
    "metastore_site_properties",
    "s3_site_properties",
    "thrift_client",
]

DEFAULT_HEAP = "512m"

logger = logging.getLogger("lance_metastore.hms_local")

# Measured on a 2-core machine, from launch to the first answered call: ~2.7 s with the JVM's
# defaults and ~1.9 s with these (~3.2 s and ~2.5 s for start() on a new data directory,
# which also creates the Derby schema). C1-only compilation is plenty for a development
# metastore; the serial collector suits the small heap and starts no GC threads.
JVM_FLAGS: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")

# hive_conf for fault tests: a lock whose holder stops heartbeating expires within seconds
# instead of Hive's default of 5 to 8 minutes (hive.txn.timeout plus the reaper's schedule).
FAST_LOCK_EXPIRY: Mapping[str, str] = MappingProxyType(
    {
        "hive.txn.timeout": "2s",
        "hive.timedout.txn.reaper.start": "1s",
        "hive.timedout.txn.reaper.interval": "1s",
    }
)

STATE_FILE = "hms.pid.json"
LOG_FILE = "hms.log"
CONF_DIR = "conf"
DERBY_DIR = "metastore_db"
WAREHOUSE_DIR = "warehouse"
_START_LOCK_FILE = "hms.start.lock"
_TXN_TABLES_FILE = "txn-tables.sql"
_PORT_ATTEMPTS = 3
_PORT_TAKEN = "Address already in use"

# Identifies our JVM on its command line, so a recorded pid that the OS has since reused for
# another process is never taken for the metastore (and never signalled).
_MARKER_PROPERTY = "lance.metastore.data_dir"


def _resource(name: str) -> str:
    """A file shipped in ``hive/resources`` (package data, so a built wheel carries it)."""
    return resources.files(__package__).joinpath("resources", name).read_text(encoding="utf-8")


_SCRIPT_RUNNER = "org.codehaus.commons.compiler.samples.ScriptDemo"
_BOOT_SCRIPT = """\
try {{
  org.apache.hadoop.hive.metastore.txn.TxnDbUtil.prepDb(new org.apache.hadoop.hive.conf.HiveConf());
}} catch (java.sql.SQLException e) {{
  if (e.getMessage() == null || e.getMessage().indexOf("already exists") < 0) throw e;
}}
org.apache.hadoop.hive.metastore.HiveMetaStore.main(new String[] {{"-p", "{port}"}});
"""

# Prepended to the 2.3 and 3.1 boot scripts (see the module docstring): every server socket
# asked to bind to the wildcard address binds to the address in _BIND_PROPERTY instead. The
# platform socket does the work; this class only passes calls on (by reflection: they are
# protected). Client sockets keep the platform implementation (Java requires a client
# factory once the server one is not the platform's). No braces are formatted in it.
_BIND_PROPERTY = "lance.metastore.bind.host"
_BIND_GUARD = """\
final java.lang.reflect.Method platform = java.net.SocketImpl.class.getDeclaredMethod(
    "createPlatformSocketImpl", new Class[] {boolean.class});
platform.setAccessible(true);
final Class impl = java.net.SocketImpl.class;
final java.lang.reflect.Method[] calls = new java.lang.reflect.Method[] {
  impl.getDeclaredMethod("create", new Class[] {boolean.class}),
  impl.getDeclaredMethod("bind", new Class[] {java.net.InetAddress.class, int.class}),
  impl.getDeclaredMethod("listen", new Class[] {int.class}),
  impl.getDeclaredMethod("accept", new Class[] {java.net.SocketImpl.class}),
  impl.getDeclaredMethod("close", new Class[0]),
  impl.getDeclaredMethod("getLocalPort", new Class[0]),
  impl.getDeclaredMethod("available", new Class[0]),
};
for (int i = 0; i < calls.length; i++) calls[i].setAccessible(true);

class BoundServerSocketImpl extends java.net.SocketImpl {
  private final java.net.SocketImpl delegate;
  private final java.net.InetAddress boundHost;
  private final java.lang.reflect.Method[] methods;
  BoundServerSocketImpl(java.net.SocketImpl delegate, java.net.InetAddress boundHost,
      java.lang.reflect.Method[] methods) {
    this.delegate = delegate; this.boundHost = boundHost; this.methods = methods;
  }
  private Object call(int index, Object[] args) throws java.io.IOException {
    try {
      return methods[index].invoke(delegate, args);
    } catch (java.lang.reflect.InvocationTargetException e) {
      if (e.getCause() instanceof java.io.IOException) throw (java.io.IOException) e.getCause();
      throw new java.io.IOException(e.getCause());
    } catch (IllegalAccessException e) {
      throw new java.io.IOException(e);
    }
  }
  protected void create(boolean stream) throws java.io.IOException {
    call(0, new Object[] {Boolean.valueOf(stream)});
  }
  protected void bind(java.net.InetAddress host, int port) throws java.io.IOException {
    java.net.InetAddress chosen = host.isAnyLocalAddress() ? boundHost : host;
    call(1, new Object[] {chosen, Integer.valueOf(port)});
    address = chosen;
    localport = ((Integer) call(5, new Object[0])).intValue();
  }
  protected void listen(int backlog) throws java.io.IOException {
    call(2, new Object[] {Integer.valueOf(backlog)});
  }
  protected void accept(java.net.SocketImpl s) throws java.io.IOException {
    call(3, new Object[] {s});
  }
  protected void close() throws java.io.IOException { call(4, new Object[0]); }
  protected int available() throws java.io.IOException {
    return ((Integer) call(6, new Object[0])).intValue();
  }
  private java.io.IOException serverOnly() { return new java.io.IOException("a server socket"); }
  protected void connect(String host, int port) throws java.io.IOException { throw serverOnly(); }
  protected void connect(java.net.InetAddress host, int port) throws java.io.IOException {
    throw serverOnly();
  }
  protected void connect(java.net.SocketAddress to, int timeout) throws java.io.IOException {
    throw serverOnly();
  }
  protected java.io.InputStream getInputStream() throws java.io.IOException { throw serverOnly(); }
  protected java.io.OutputStream getOutputStream() throws java.io.IOException {
    throw serverOnly();
  }
  protected void sendUrgentData(int data) throws java.io.IOException { throw serverOnly(); }
  public void setOption(int id, Object value) throws java.net.SocketException {
    ((java.net.SocketOptions) delegate).setOption(id, value);
  }
  public Object getOption(int id) throws java.net.SocketException {
    return ((java.net.SocketOptions) delegate).getOption(id);
  }
}

class BoundSocketFactory implements java.net.SocketImplFactory {
  private final boolean server;
  private final java.net.InetAddress boundHost;
  private final java.lang.reflect.Method createPlatform;
  private final java.lang.reflect.Method[] methods;
  BoundSocketFactory(boolean server, java.net.InetAddress boundHost,
      java.lang.reflect.Method createPlatform, java.lang.reflect.Method[] methods) {
    this.server = server; this.boundHost = boundHost;
    this.createPlatform = createPlatform; this.methods = methods;
  }
  public java.net.SocketImpl createSocketImpl() {
    try {
      java.net.SocketImpl created = (java.net.SocketImpl) createPlatform.invoke(
          null, new Object[] {Boolean.valueOf(server)});
      return server ? new BoundServerSocketImpl(created, boundHost, methods) : created;
    } catch (Exception e) {
      throw new RuntimeException(e);
    }
  }
}

final java.net.InetAddress bindHost = java.net.InetAddress.getByName(
    System.getProperty("lance.metastore.bind.host"));
java.net.ServerSocket.setSocketFactory(new BoundSocketFactory(true, bindHost, platform, calls));
java.net.Socket.setSocketImplFactory(new BoundSocketFactory(false, bindHost, platform, calls));
"""
_WILDCARD_HOSTS = ("", "0.0.0.0", "::", "[::]", "*")
_NO_BIND_SETTING = ("2.3", "3.1")  # releases whose Thrift server always asks for the wildcard

# Hive 3.1's standalone metastore: the same, with its own configuration class.
_BOOT_SCRIPT_3 = """\
try {{
  org.apache.hadoop.hive.metastore.txn.TxnDbUtil.prepDb(
      org.apache.hadoop.hive.metastore.conf.MetastoreConf.newMetastoreConf());
}} catch (Exception e) {{
  if (e.getMessage() == null || e.getMessage().indexOf("already exists") < 0) throw e;
}}
org.apache.hadoop.hive.metastore.HiveMetaStore.main(new String[] {{"-p", "{port}"}});
"""

# Hive 4.0: run HMS4_TXN_TABLES (a file in the conf directory) on the Derby database, skipping
# what exists from an earlier start (Derby SQLState X0Y32; 23505 for the seed rows).
_BOOT_SCRIPT_4 = """\
java.sql.Connection connection = java.sql.DriverManager.getConnection("{jdbc_url}");
try {{
  String script = new String(
      java.nio.file.Files.readAllBytes(java.nio.file.Paths.get("{ddl_path}")), "UTF-8");
  String[] statements = script.split(";");
  java.sql.Statement statement = connection.createStatement();
  for (int i = 0; i < statements.length; i++) {{
    String sql = statements[i].trim();
    if (sql.length() == 0) continue;
    try {{
      statement.execute(sql);
    }} catch (java.sql.SQLException e) {{
      if (!"X0Y32".equals(e.getSQLState()) && !"23505".equals(e.getSQLState())) throw e;
    }}
  }}
}} finally {{
  connection.close();
}}
org.apache.hadoop.hive.metastore.HiveMetaStore.main(new String[] {{"-p", "{port}"}});
"""

# The transaction tables of a Hive 4.0 metastore on Derby, written for this project from the
# columns the 4.0.1 server's SQL names (see the module docstring for why it is not Hive's own
# script). Names are quoted upper case, as the server quotes them.
HMS4_TXN_TABLES = _resource("hms4_txn_tables.sql")

# Hive reads this from the first conf directory on the classpath. Everything goes to stderr,
# which start() sends to the log file; the loud parts (a dump of the whole configuration,
# a second audit line per call, DataNucleus chatter) are turned down.
_LOG4J2_PROPERTIES = _resource("log4j2.properties")

_INSTALL_JAVA_HINT = (
    "install Java 17 (for example `apt-get install openjdk-17-jre-headless`, or run "
    ".ci/install-java.sh) or set JAVA_HOME"
)


class MetastoreError(RuntimeError):
    """A local metastore could not be started, found or stopped."""


class JavaNotFoundError(MetastoreError):
    """No Java runtime to run the metastore with."""


class MetastoreAlreadyRunningError(MetastoreError):
    """A metastore already runs on this data directory (Derby allows one JVM per database)."""


class MetastoreStartError(MetastoreError):
    """The metastore process died or did not answer in time; the message has its log tail."""


@dataclass(frozen=True)
class MetastoreStatus:
    """What :meth:`LocalMetastore.status` found, for a CLI to print."""

    data_dir: Path
    pid: int | None
    port: int | None
    uri: str | None
    process_alive: bool
    responding: bool
    log_path: Path
    version: str = DEFAULT_VERSION

    @property
    def running(self) -> bool:
        return self.process_alive and self.responding


def find_pyspark_jars() -> Path:
    """The ``jars`` directory of the installed pyspark, which holds Hive 2.3 and Derby."""
    try:
        import pyspark
    except ImportError as error:
        raise MetastoreError(
            "pyspark is not installed; a local Hive Metastore runs from the jars in its wheel "
            f"({install_hint('spark')})"
        ) from error
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    if not any(jars.glob("hive-metastore-*.jar")):
        raise MetastoreError(f"no hive-metastore jar in {jars}; is this a full pyspark install?")
    return jars


def java_executable() -> str:
    """The ``java`` of ``JAVA_HOME`` if set, else the one on ``PATH``."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
        raise JavaNotFoundError(f"JAVA_HOME={java_home} has no bin/java; {_INSTALL_JAVA_HINT}")
    found = shutil.which("java")
    if found is None:
        raise JavaNotFoundError(f"no `java` on PATH; {_INSTALL_JAVA_HINT}")
    return found


def hive_site_properties(data_dir: Path) -> dict[str, str]:
    """The ``hive-site.xml`` settings of a local metastore whose state lives in ``data_dir``."""
    return {
        # Embedded Derby in the data directory; DataNucleus creates the schema on first use
        # and the (absent) schema version table is not checked.
        "javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={data_dir / DERBY_DIR};create=true"
        ),
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": (data_dir / WAREHOUSE_DIR).as_uri(),
        # This configuration's logging, not the hive-log4j2.properties in hive-common's jar,
        # which comes first on the class path (see LocalMetastore._command).
        "hive.log4j.file": str(data_dir / CONF_DIR / "hive-log4j2.properties"),
        # BoneCP, Hive's default pool, is not shipped with pyspark; HikariCP is.
        "datanucleus.connectionPoolingType": "HikariCP",
        # The DbTxnManager lock API (lock / check_lock / unlock / heartbeat).
        "hive.support.concurrency": "true",
        "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
        # Also starts the housekeeper, the only thing in HMS 2.3 that times out locks whose
        # holder stopped heartbeating (hive.txn.timeout, default 300 s; see FAST_LOCK_EXPIRY);
        # without it a crashed writer would keep its table lock forever. No compactions run:
        # there are no ACID tables and no worker threads.
        "hive.compactor.initiator.on": "true",
        "hive.compactor.worker.threads": "0",
        # Keep table parameters exactly as clients write them: otherwise create_table and
        # alter_table add numFiles/totalSize, listing every file under the table location.
        "hive.stats.autogather": "false",
        # New directories get the file system's default permissions instead of copies of their
        # parent's: without Hadoop's native library, each copy runs `ls -ld` and `chmod`
        # processes from the JVM, several per created database or table (~1,500 in a minute
        # of behaviour tests). Hive 3 dropped the setting (HIVE-16392).
        "hive.warehouse.subdir.inherit.perms": "false",
        # A call its database refuses (a property longer than Derby's column, say) is still
        # retried 10 times, as HMS does, but 100 ms apart instead of 2 s: the caller hears of
        # it in a second, not in 20 (the retries help only a database that comes back).
        "hive.hmshandler.retry.interval": "100ms",
    }


def metastore_site_properties(
    data_dir: Path, chosen: HiveRelease, host: str = "127.0.0.1"
) -> dict[str, str]:
    """The ``metastore-site.xml`` of a standalone metastore (3.1, 4) whose state is in ``data_dir``.

    The same choices as :func:`hive_site_properties`, in the standalone metastore's names.
    """
    properties = {
        "javax.jdo.option.ConnectionURL": (
            f"jdbc:derby:;databaseName={data_dir / DERBY_DIR};create=true"
        ),
        "datanucleus.schema.autoCreateAll": "true",
        "metastore.schema.verification": "false",
        "metastore.warehouse.dir": (data_dir / WAREHOUSE_DIR).as_uri(),
        "metastore.warehouse.external.dir": (data_dir / WAREHOUSE_DIR).as_uri(),
        "datanucleus.connectionPoolingType": "HikariCP",
        # The default names a class of Hive's query engine, absent from the standalone jars.
        "metastore.expression.proxy": (
            "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy"
        ),
        "hive.support.concurrency": "true",
        "hive.txn.manager": "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager",
        # The housekeeping that times out locks of writers that stopped heartbeating.
        "metastore.compactor.initiator.on": "true",
        "metastore.housekeeping.threads.on": "true",
        "metastore.compactor.worker.threads": "0",
        "metastore.stats.autogather": "false",
        "hive.stats.autogather": "false",
        # Asynchronous logging needs the LMAX disruptor, which the standalone jars lack.
        "metastore.async.log.enabled": "false",
        "metastore.hmshandler.retry.interval": "100ms",  # as hive_site_properties says
    }
    if chosen.key == "3.1":
        # 3.1's default list names a cleaner of Hive's query engine, absent from its jars.
        properties["metastore.task.threads.always"] = ",".join(
            (
                "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
                "org.apache.hadoop.hive.metastore.RuntimeStatsCleanerTask",
                "org.apache.hadoop.hive.metastore.MaterializationsRebuildLockCleanerTask",
            )
        )
    else:
        properties["metastore.thrift.bind.host"] = host
    return properties


_S3A_FILE_SYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def s3_site_properties(
    endpoint: str | None = None, credentials: tuple[str, str] | None = None
) -> dict[str, str]:
    """Hadoop settings (``core-site.xml``) giving a metastore S3A for ``s3://`` and ``s3a://``.

    ``endpoint`` names an S3-compatible store (MinIO, Ceph, moto): path-style addressing, and
    plain HTTP when its URL says ``http://``; None means AWS itself. ``credentials`` is an
    access key id and secret; None leaves Hadoop's default chain (environment, instance
    profile) to find them.
    """
    properties = {"fs.s3.impl": _S3A_FILE_SYSTEM, "fs.s3a.impl": _S3A_FILE_SYSTEM}
    if endpoint:
        properties["fs.s3a.endpoint"] = endpoint
        properties["fs.s3a.path.style.access"] = "true"
        properties["fs.s3a.connection.ssl.enabled"] = str(
            not endpoint.lower().startswith("http://")
        ).lower()
    if credentials is not None:
        access_key_id, secret_access_key = credentials
        properties["fs.s3a.access.key"] = access_key_id
        properties["fs.s3a.secret.key"] = secret_access_key
    return properties


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (it may hold storage credentials)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)


def _hive_site_xml(properties: Mapping[str, str]) -> str:
    lines = ['<?xml version="1.0"?>', "<configuration>"]
    for name, value in properties.items():
        lines.append(
            f"  <property><name>{escape(name)}</name><value>{escape(value)}</value></property>"
        )
    lines.append("</configuration>")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def thrift_client(
    host: str, port: int, timeout: float = 30.0
) -> Iterator[ThriftHiveMetastore.Client]:
    """A connected client of pymetastore's generated Hive Thrift API, closed on exit."""
    # Imported here: the CLI imports this module for every command (its errors), Glue's too.
    with requires_extra("hive"):
        from pymetastore.hive_metastore import ThriftHiveMetastore
        from thrift.protocol import TBinaryProtocol
        from thrift.transport import TSocket, TTransport

    sock = TSocket.TSocket(host, port)
    sock.setTimeout(int(timeout * 1000))
    transport = TTransport.TBufferedTransport(sock)
    transport.open()
    try:
        yield ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
    finally:
        transport.close()


def _port_accepts(host: str, port: int, timeout: float) -> bool:
    # A plain connect first, so polling a port that is not open yet stays quiet (Thrift's
    # TSocket logs an error for every refused connection).
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _answers(host: str, port: int, timeout: float = 5.0) -> bool:
    """Whether a metastore on ``host:port`` answers a real Thrift call."""
    if not _port_accepts(host, port, timeout):
        return False
    try:
        with thrift_client(host, port, timeout) as client:
            client.get_all_databases()
    except Exception:
        return False
    return True


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _port_is_free(port: int) -> bool:
    # HMS 2.3 always listens on every interface, so check the wildcard address; SO_REUSEADDR
    # as Thrift's server socket sets it, so a just-stopped metastore's TIME_WAIT is no conflict.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def listening_addresses(port: int) -> list[str] | None:
    """The local addresses a TCP socket listens on at ``port``, as the kernel reports them
    (``/proc/net/tcp`` and ``tcp6``; an IPv4-mapped IPv6 address as its IPv4 form), or None
    where the kernel does not say (not Linux)."""
    found: list[str] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            if table.endswith("tcp"):
                return None
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            address_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address_hex)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            address = ipaddress.ip_address(raw)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
                address = address.ipv4_mapped
            found.append(str(address))
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has exited and only waits for its parent to collect its status. Look at every
    # thread: a JVM's main thread can be a zombie while the others still shut down.
    try:
        states = [
            (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            for task in Path(f"/proc/{pid}/task").iterdir()
        ]
    except (OSError, IndexError):
        return True  # no procfs, or a thread came or went while reading
    return any(state not in ("Z", "X") for state in states)


def _is_our_jvm(pid: int, data_dir: Path) -> bool:
    """Whether ``pid`` is alive and is the metastore JVM of ``data_dir``."""
    if not _pid_alive(pid):
        return False
    cmdline = Path(f"/proc/{pid}/cmdline")
    try:
        args = cmdline.read_bytes().split(b"\0")
    except OSError:
        # No procfs (macOS): trust the recorded pid.
        return not Path("/proc/self").exists()
    marker = f"-D{_MARKER_PROPERTY}={data_dir}".encode()
    return marker in args


# The JVM's class-data-sharing notices ("[warning][cds] Skipping ...: Signed JAR"): hundreds
# per start with an archive, and never why a start failed.
_CDS_LINE = re.compile(r"^\[[^\]]*\]\[\w+\]\[cds")


def _tail(path: Path, lines: int = 40, width: int = 400) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 256 * 1024))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    tail = [line for line in text.splitlines() if not _CDS_LINE.match(line)][-lines:]
    return "\n".join(line if len(line) <= width else line[:width] + " ..." for line in tail)


# Derby's errors that only wrap the real one ("Failed to start database ..., see the next
# exception for details", "Failed to create database", "Java exception").
_DERBY_WRAPPERS = frozenset({"XJ040", "XJ041", "XJ001"})
_DERBY_ERROR = re.compile(r"^(?:Caused by: )?(?:ERROR )?(?P<code>X[A-Z0-9]{4}): (?P<text>.+)$")
# Its error for a database that another Derby release made (pyspark 4 ships 10.16, 3.5 10.14).
_DERBY_OTHER_RELEASE = "XSLAN"


def derby_cause(log: Path, offset: int = 0) -> str | None:
    """Why Derby could not open the metastore's database, from ``derby.log`` past ``offset``
    (where this start began): the innermost Derby error, in one line; None if Derby said none."""
    try:
        with log.open("rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    causes = [
        match
        for match in map(_DERBY_ERROR.match, (line.strip() for line in text.splitlines()))
        if match and match.group("code") not in _DERBY_WRAPPERS
    ]
    if not causes:
        return None
    cause = causes[-1]
    line = f"{cause.group('code')}: {' '.join(cause.group('text').split())}"
    if cause.group("code") == _DERBY_OTHER_RELEASE:
        line += (
            " (another pyspark's Derby made this database: start this release on another "
            "--data-dir, or use the pyspark that made it)"
        )
    return line


class LocalMetastore:
    """A Hive Metastore JVM whose state lives in ``data_dir``.

    ``port=0`` lets the OS choose a free port at the first start; restarts keep it. ``host``
    is the address it listens on and clients use (``0.0.0.0`` or ``::``: every interface).
    ``version`` is ``"2.3"`` (pyspark's jars, no download), ``"3.1"`` or ``"4"`` (fetched with
    Maven on first use); it is recorded in the data directory, whose Derby schema belongs to
    that release. ``hive_conf`` adds to or overrides :func:`hive_site_properties` (or
    :func:`metastore_site_properties`), e.g. :data:`FAST_LOCK_EXPIRY`.

    A secured metastore (Kerberos or TLS) also needs ``core_conf`` (Hadoop's
    ``core-site.xml``, e.g. ``hadoop.security.authentication=kerberos``), ``jvm_options``
    (e.g. ``-Djava.security.krb5.conf=...``) and a ``probe``: whether ``(host, port)`` answers
    a call, made by a client that can authenticate (the default makes a plain Thrift call).

    Tables on S3 need ``s3_endpoint`` (an S3-compatible store's URL; ``""`` for AWS itself)
    and optionally ``s3_credentials`` (access key id, secret; else Hadoop's default chain):
    the metastore then runs with Hadoop's S3A file system (see :func:`s3_site_properties`).
    Hive 3.1 only (2.3 and 4 refuse). The credentials are written to files only the owner
    may read (``conf/core-site.xml`` and the state file) and never shown in ``repr``.
    """

    def __init__(
        self,
        data_dir: Path | str,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        heap: str = DEFAULT_HEAP,
        hive_conf: Mapping[str, str] | None = None,
        version: str = DEFAULT_VERSION,
        core_conf: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = (),
        probe: Callable[[str, int], bool] | None = None,
        s3_endpoint: str | None = None,
        s3_credentials: tuple[str, str] | None = None,
    ) -> None:
        try:
            self._release = release(version)
            if s3_endpoint is not None or s3_credentials is not None:
                self._release.with_s3()  # refuses a release without an S3 file system
        except ValueError as error:
            raise MetastoreError(str(error)) from None
        self._s3_endpoint = s3_endpoint
        self._s3_credentials: tuple[str, str] | None = (
            (str(s3_credentials[0]), str(s3_credentials[1])) if s3_credentials else None
        )
        self._data_dir = Path(data_dir).expanduser().resolve()
        self._port = port
        self._host = host
        self._heap = heap
        self._hive_conf = dict(hive_conf or {})
        self._core_conf = dict(core_conf or {})
        self._jvm_options = list(jvm_options)
        self._probe = probe or _answers
        self._pid: int | None = None
        self._derby_log_offset = 0
        self._proc: subprocess.Popen[bytes] | None = None
        # The class-data archive the JVM maps or records (see class_archive).
        self._class_archive: Path | None = None

    # -- discovery -------------------------------------------------------------------------

    @classmethod
    def from_data_dir(cls, data_dir: Path | str) -> LocalMetastore:
        """The metastore recorded in ``data_dir`` by an earlier start, possibly by another process.

        Raises :class:`FileNotFoundError` if no metastore was ever started there. The result
        may describe a metastore that has since stopped: check :meth:`is_running`.
        """
        data_dir = Path(data_dir).expanduser().resolve()
        state_path = data_dir / STATE_FILE
        try:
            state = json.loads(state_path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(
                f"no local metastore was started in {data_dir} (no {STATE_FILE})"
            ) from None
        except (OSError, ValueError) as error:
            raise MetastoreError(
                f"unreadable metastore state file {state_path}: {error}"
            ) from error
        metastore = cls(
            data_dir,
            port=int(state["port"]),
            host=str(state.get("host", "127.0.0.1")),
            heap=str(state.get("heap", DEFAULT_HEAP)),
            hive_conf=state.get("hive_conf") or {},
            version=str(state.get("version", DEFAULT_VERSION)),
            core_conf=state.get("core_conf") or {},
            jvm_options=state.get("jvm_options") or (),
            s3_endpoint=state.get("s3_endpoint"),
            s3_credentials=state.get("s3_credentials"),
        )
        pid = state.get("pid")
        metastore._pid = int(pid) if pid is not None else None
        archive = state.get("class_archive")
        metastore._class_archive = Path(archive) if archive else None
        return metastore

    # -- properties ------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return self._data_dir

    @property
    def version(self) -> str:
        """The release it runs: ``"2.3"``, ``"3.1"`` or ``"4"``."""
        return self._release.key

    @property
    def release_version(self) -> str:
        """The exact Hive release (``"3.1.3"``, ``"4.0.1"``; ``"2.3"`` from pyspark)."""
        return self._release.version

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The Thrift port; 0 until the first start when the OS is to choose it."""
        return self._port

    @property
    def uri(self) -> str:
        """``thrift://host:port``, the value for ``hive.metastore.uris``."""
        if not self._port:
            raise MetastoreError("the metastore has no port yet; start it first")
        return f"thrift://{self._host}:{self._port}"

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs (or the last one recorded)."""
        return self._pid

    @property
    def log_path(self) -> Path:
        """The JVM's stdout and stderr, including Hive's own log."""
        return self._data_dir / LOG_FILE

    @property
    def conf_dir(self) -> Path:
        return self._data_dir / CONF_DIR

    @property
    def s3_enabled(self) -> bool:
        """Whether it runs with Hadoop's S3A file system (``s3://`` table locations)."""
        return self._s3_endpoint is not None or self._s3_credentials is not None

    @property
    def s3_endpoint(self) -> str | None:
        """The S3 endpoint its S3A file system uses (``""``: AWS; None: no S3)."""
        return self._s3_endpoint

    @property
    def s3_credentials(self) -> tuple[str, str] | None:
        """The access key id and secret its S3A file system signs with (None: Hadoop's chain)."""
        return self._s3_credentials

    @property
    def _runtime_release(self) -> HiveRelease:
        return self._release.with_s3() if self.s3_enabled else self._release

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self, timeout: float = 120) -> None:
        """Launch the metastore and return once it answers Thrift calls.

        Refuses with :class:`MetastoreAlreadyRunningError` if a metastore already runs on
        this data directory, from this object or any other process.
        """
        choose_port = self._port == 0
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            self._launch()
            try:
                self._wait_until_ready(timeout)
                self._warn_if_listening_beyond_host()
                return
            except MetastoreStartError as error:
                # Another process can take an OS-chosen port before the JVM binds it.
                if not choose_port or attempt == _PORT_ATTEMPTS or _PORT_TAKEN not in str(error):
                    raise
                self._port = 0

    def _launch(self) -> None:
        self._data_dir.mkdir(parents=True, exist_ok=True)
        self._refuse_other_release()
        with self._start_lock():
            self._refuse_if_running()
            java = java_executable()
            jars = self._jars()
            if self._port == 0:
                self._port = _free_port(self._host)
            elif not _port_is_free(self._port):
                raise MetastoreStartError(
                    f"port {self._port} is in use by another process; "
                    "choose another port or 0 for a free one"
                )
            self._write_conf()
            command = self._command(java, jars)
            # Where this start's Derby errors begin (derby.log keeps earlier starts' too).
            derby_log = self._data_dir / "derby.log"
            self._derby_log_offset = derby_log.stat().st_size if derby_log.exists() else 0
            with self.log_path.open("ab") as log:
                log.write(
                    f"\n=== starting metastore: port {self._port}, {time.ctime()} ===\n".encode()
                )
                log.flush()
                self._proc = subprocess.Popen(
                    command,
                    cwd=self._data_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._pid = self._proc.pid
            self._write_state()

    def _jars(self) -> Path:
        if self._release.bundled:
            return find_pyspark_jars()
        try:
            return fetch_release(self._runtime_release)
        except ReleaseFetchError as error:
            raise MetastoreError(str(error)) from error

    def _refuse_other_release(self) -> None:
        # A Derby database holds one release's schema: never start another release on it.
        recorded: LocalMetastore | None = None
        with contextlib.suppress(FileNotFoundError, MetastoreError):
            recorded = LocalMetastore.from_data_dir(self._data_dir)
        if recorded is None or recorded.version == self.version:
            return
        if (self._data_dir / DERBY_DIR).exists():
            raise MetastoreError(
                f"{self._data_dir} holds a Hive Metastore {recorded.version} database; "
                f"use another data directory for version {self.version}"
            )

    def stop(self, timeout: float = 30) -> None:
        """Stop the metastore: SIGTERM (Hive shuts down cleanly), then SIGKILL after ``timeout``."""
        pid = self._live_pid()
        stopped_cleanly = True
        if pid is not None:
            self._signal(pid, signal.SIGTERM)
            if not self._wait_for_exit(pid, timeout):
                self._signal(pid, signal.SIGKILL)
                self._wait_for_exit(pid, 10)
                stopped_cleanly = False
        self._reap()
        self._keep_class_recording(stopped_cleanly)
        self._pid = None
        if self._port:
            self._write_state()

    def kill(self) -> None:
        """SIGKILL the JVM with no shutdown at all, to test recovery from a crashed metastore."""
        pid = self._live_pid()
        if pid is not None:
            self._signal(pid, signal.SIGKILL)
            self._wait_for_exit(pid, 10)
        self._reap()
        self._keep_class_recording(stopped_cleanly=False)

    def restart(self, timeout: float = 120) -> None:
        """Stop (if running) and start again on the same port with the same Derby data."""
        self.stop()
        self.start(timeout)

    def is_running(self) -> bool:
        """Whether the JVM is alive and its port answers a Thrift call."""
        return self._live_pid() is not None and self._probe(self._host, self._port)

    def status(self) -> MetastoreStatus:
        pid = self._live_pid()
        responding = pid is not None and self._probe(self._host, self._port)
        return MetastoreStatus(
            data_dir=self._data_dir,
            pid=pid,
            port=self._port or None,
            uri=self.uri if self._port else None,
            process_alive=pid is not None,
            responding=responding,
            log_path=self.log_path,
            version=self.version,
        )

    def client(
        self, timeout: float = 30.0
    ) -> contextlib.AbstractContextManager[ThriftHiveMetastore.Client]:
        """A Thrift client connected to this metastore (use as a context manager)."""
        return thrift_client(self._host, self._port, timeout)

    def __enter__(self) -> LocalMetastore:
        if self._live_pid() is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"LocalMetastore(data_dir={str(self._data_dir)!r}, version={self.version!r}, "
            f"port={self._port}, pid={self._pid})"
        )

    # -- internals ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _start_lock(self) -> Iterator[None]:
        # Serialises concurrent start() calls on one data directory, across processes.
        with (self._data_dir / _START_LOCK_FILE).open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _refuse_if_running(self) -> None:
        pid = self._live_pid()
        port = self._port
        if pid is None:
            with contextlib.suppress(FileNotFoundError, MetastoreError):
                recorded = LocalMetastore.from_data_dir(self._data_dir)
                pid, port = recorded._live_pid(), recorded.port
        if pid is not None:
            raise MetastoreAlreadyRunningError(
                f"a metastore already runs on {self._data_dir} (pid {pid}, "
                f"thrift://{self._host}:{port}); Derby allows one server per database, "
                "so stop it first"
            )

    def _live_pid(self) -> int | None:
        if self._proc is not None:
            return self._proc.pid if self._proc.poll() is None else None
        if self._pid is not None and _is_our_jvm(self._pid, self._data_dir):
            return self._pid
        return None

    def _write_conf(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        if self._release.standalone:
            properties = metastore_site_properties(self._data_dir, self._release, self._host)
            site, log_config = "metastore-site.xml", "metastore-log4j2.properties"
        else:
            properties = hive_site_properties(self._data_dir)
            site, log_config = "hive-site.xml", "hive-log4j2.properties"
        properties.update(self._hive_conf)
        (self.conf_dir / site).write_text(_hive_site_xml(properties))
        core_site = self.conf_dir / "core-site.xml"
        core_properties = dict(self._core_conf)
        if self.s3_enabled:
            core_properties = {
                **s3_site_properties(self._s3_endpoint, self._s3_credentials),
                **core_properties,
            }
        if core_properties:
            _write_private(core_site, _hive_site_xml(core_properties))
        else:
            core_site.unlink(missing_ok=True)
        (self.conf_dir / log_config).write_text(_LOG4J2_PROPERTIES)
        if self._release.key == "4":
            (self.conf_dir / _TXN_TABLES_FILE).write_text(HMS4_TXN_TABLES)

    def _keep_class_recording(self, stopped_cleanly: bool) -> None:
        """After the JVM exited: keep the class-data archive it recorded, if it stopped cleanly."""
        if self._class_archive is not None:
            class_archive.keep_recording(self._data_dir, self._class_archive, stopped_cleanly)

    def _bind_guarded(self) -> bool:
        """Whether the JVM needs :data:`_BIND_GUARD` to listen on ``host`` only.

        Not with TLS: Java's TLS server socket accepts only into its own platform socket,
        which a guarded server socket cannot accept into, so a TLS 2.3/3.1 metastore listens
        on every interface and ``start`` warns (see :meth:`_warn_if_listening_beyond_host`).
        """
        tls = any(
            self._hive_conf.get(key, "").lower() == "true"
            for key in ("hive.metastore.use.SSL", "metastore.use.SSL")
        )
        guardable = self._release.key in _NO_BIND_SETTING and not tls
        return guardable and self._host not in _WILDCARD_HOSTS

    def _boot_script(self) -> str:
        guard = _BIND_GUARD if self._bind_guarded() else ""
        if self._release.key == "3.1":
            return guard + _BOOT_SCRIPT_3.format(port=self._port)
        if self._release.key == "4":
            url = f"jdbc:derby:;databaseName={self._data_dir / DERBY_DIR};create=true"
            return _BOOT_SCRIPT_4.format(
                port=self._port, jdbc_url=url, ddl_path=self.conf_dir / _TXN_TABLES_FILE
            )
        return guard + _BOOT_SCRIPT.format(port=self._port)

    def _command(self, java: str, jars: Path) -> list[str]:
        options = [
            f"-Xmx{self._heap}",
            *JVM_FLAGS,
            *self._jvm_options,
            *(("--add-opens=java.base/java.net=ALL-UNNAMED",) if self._bind_guarded() else ()),
        ]
        self._class_archive = class_archive.archive_for(java, jars, options)
        return [
            java,
            *options,
            *class_archive.archive_options(self._class_archive, self._data_dir),
            f"-D{_MARKER_PROPERTY}={self._data_dir}",
            *((f"-D{_BIND_PROPERTY}={self._host}",) if self._bind_guarded() else ()),
            # Spark's jars bring a log4j2 setup that otherwise ignores Hive's configuration.
            "-Dlog4j2.contextSelector="
            "org.apache.logging.log4j.core.selector.ClassLoaderContextSelector",
            # Keep derby.log out of the current directory.
            f"-Dderby.system.home={self._data_dir}",
            # No fsync per Derby commit (a development metastore: a power cut may lose its
            # last seconds, a killed JVM loses nothing). Every alter, lock and unlock commits,
            # and on a busy disk each sync cost tens of milliseconds under concurrent writers.
            "-Dderby.system.durability=test",
            f"-Dderby.stream.error.file={self._data_dir / 'derby.log'}",
            "-cp",
            # The configuration after the jars: a class-data archive records only jars, and
            # they must come first (no jar holds a file of the configuration's names but
            # hive-common 2.3's hive-log4j2.properties, overridden by hive.log4j.file).
            f"{jars / '*'}{os.pathsep}{self.conf_dir}",
            _SCRIPT_RUNNER,
            "-te",
            "java.lang.Throwable",
            self._boot_script(),
        ]

    def _write_state(self) -> None:
        state = {
            "pid": self._pid,
            "port": self._port,
            "host": self._host,
            "heap": self._heap,
            "hive_conf": self._hive_conf,
            "version": self.version,
            "core_conf": self._core_conf,
            "jvm_options": self._jvm_options,
            "class_archive": str(self._class_archive) if self._class_archive else None,
            "s3_endpoint": self._s3_endpoint,
            "s3_credentials": self._s3_credentials,
            "uri": f"thrift://{self._host}:{self._port}",
            "log": str(self.log_path),
        }
        path = self._data_dir / STATE_FILE
        temporary = path.with_suffix(".tmp")
        _write_private(temporary, json.dumps(state, indent=2) + "\n")
        temporary.replace(path)

    def _wait_until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self._live_pid() is None:
                code = self._proc.returncode if self._proc is not None else None
                cause = derby_cause(self._data_dir / "derby.log", self._derby_log_offset)
                if cause is not None:
                    raise MetastoreStartError(
                        f"the metastore could not open its Derby database in {self._data_dir} "
                        f"(process exited, code {code}): {cause}"
                    )
                raise MetastoreStartError(
                    f"the metastore process exited (code {code}) before answering on "
                    f"{self.uri}; last lines of {self.log_path}:\n{_tail(self.log_path)}"
                )
            if self._probe(self._host, self._port):
                return
            if time.monotonic() >= deadline:
                self.kill()
                raise MetastoreStartError(
                    f"the metastore did not answer on {self.uri} within {timeout:.0f} s "
                    f"and was killed; last lines of {self.log_path}:\n{_tail(self.log_path)}"
                )
            time.sleep(0.1)

    def listening_addresses(self) -> list[str] | None:
        """What the metastore's port listens on, from the kernel (None: not known here)."""
        return listening_addresses(self._port)

    def _warn_if_listening_beyond_host(self) -> None:
        if self._host in _WILDCARD_HOSTS:
            return
        addresses = self.listening_addresses()
        wildcards = [a for a in addresses or () if ipaddress.ip_address(a).is_unspecified]
        if wildcards:
            logger.warning(
                "the metastore on port %d listens on every interface (%s), not only on %s: "
                "anyone who reaches this machine can use it",
                self._port,
                ", ".join(wildcards),
                self._host,
            )

    def _signal(self, pid: int, sig: signal.Signals) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
        except PermissionError as error:
            raise MetastoreError(f"not allowed to signal metastore pid {pid}: {error}") from error

    def _wait_for_exit(self, pid: int, timeout: float) -> bool:
        if self._proc is not None and self._proc.pid == pid:
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + timeout
        while _pid_alive(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _reap(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(0)
            if self._proc.returncode is not None:
                self._proc = None

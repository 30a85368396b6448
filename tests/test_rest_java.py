"""Lance's Java REST client (``org.lance:lance-namespace-apache-client`` from Maven Central)
against our server, serving our Glue namespace on the emulator, with bearer-token auth.

The client's jars are fetched once with Maven into a cache directory
(``LANCE_METASTORE_JAVA_CACHE``, default ``~/.cache/lance-metastore/java-rest``); the small
program ``support/java/RestClientCheck.java`` is compiled with ``javac`` and runs the core
operations (namespaces, declare, describe, exists, list, deregister, drop) and checks the
spec's error statuses and codes. Skipped, with the reason, when Java or Maven is missing or
Maven Central cannot be reached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.harness import GlueHarness

from lance_metastore.rest import RestServer

JAVA = Path(__file__).parent / "support" / "java"
CACHE = Path(
    os.environ.get("LANCE_METASTORE_JAVA_CACHE", Path.home() / ".cache/lance-metastore/java-rest")
)
TOKEN = "java-client-token-0123456789"


@pytest.fixture(scope="module")
def java_client(java: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(classpath, directory of the compiled check)."""
    for tool in ("java", "javac", "mvn"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    lib = CACHE / "lib"
    marker = CACHE / "pom.xml"
    if not marker.exists() or marker.read_bytes() != (JAVA / "pom.xml").read_bytes():
        shutil.rmtree(lib, ignore_errors=True)
        fetched = subprocess.run(
            [
                "mvn",
                "-q",
                "-B",
                "-f",
                str(JAVA / "pom.xml"),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={lib}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if fetched.returncode != 0:
            pytest.skip(
                f"Maven could not fetch Lance's Java client (offline?): {fetched.stdout[-500:]}"
            )
        marker.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(JAVA / "pom.xml", marker)
    classpath = os.pathsep.join(str(jar) for jar in sorted(lib.glob("*.jar")))
    classes = tmp_path_factory.mktemp("java_classes")
    subprocess.run(
        ["javac", "-d", str(classes), "-cp", classpath, str(JAVA / "RestClientCheck.java")],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return classpath, classes


def test_java_rest_client_core_operations(java_client, glue: GlueHarness):
    classpath, classes = java_client
    with RestServer(glue.connect(), auth_token=TOKEN) as server:
        run = subprocess.run(
            [
                "java",
                "-cp",
                os.pathsep.join([str(classes), classpath]),
                "RestClientCheck",
                server.url,
                TOKEN,
                "java_db",
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().endswith("all checks passed"), run.stdout
    assert "FAILED" not in run.stdout
    assert glue.snapshot() == glue.snapshot()  # the catalog is readable and settled
    assert "java_db" not in str(glue.snapshot())  # dropped through the Java client

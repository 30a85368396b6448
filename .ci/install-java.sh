#!/usr/bin/env bash
# Make sure a Java 17+ runtime and Maven are on PATH. The tests' Hive Metastores
# (src/lance_metastore/hive/local.py) are JVMs: 2.3 from the pyspark jars, 3.1 and 4.0 fetched
# with Maven (src/lance_metastore/hive/distributions.py); Spark 4 needs Java 17 and every one of these
# metastores runs on it. Installs openjdk-17-jre-headless and maven with apt (Debian/Ubuntu)
# when missing, as root or through sudo.
set -euo pipefail

java_major() {
    # "17.0.15", "21", "1.8.0_402" -> 17, 21, 8; prints 0 when there is no usable java.
    local version
    version=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}') || true
    case "$version" in
        "") echo 0 ;;
        1.*) echo "$version" | cut -d. -f2 ;;
        *) echo "${version%%[.+_-]*}" ;;
    esac
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

have_java17() {
    command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge 17 ]
}

if ! have_java17; then
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
        echo "install-java: Java 17 is missing and this is neither root nor has sudo" >&2
        exit 1
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-java: no apt-get; install a Java 17 runtime by hand" >&2
        exit 1
    fi
    echo "install-java: installing openjdk-17-jre-headless"
    # Slim Debian images lack this directory and the JRE's postinst then fails.
    as_root mkdir -p /usr/share/man/man1
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends openjdk-17-jre-headless
    hash -r
    if ! have_java17; then
        # An older java may still win the alternatives; point java at the new one.
        for candidate in /usr/lib/jvm/java-17-openjdk-*/bin/java; do
            if [ -x "$candidate" ]; then
                as_root update-alternatives --set java "$candidate"
                break
            fi
        done
        hash -r
    fi
    if ! have_java17; then
        echo "install-java: java on PATH is still older than 17" >&2
        exit 1
    fi
fi

if ! command -v mvn >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "install-java: no apt-get; install Maven by hand" >&2
        exit 1
    fi
    echo "install-java: installing maven"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends maven
    hash -r
fi

# javac compiles the small Java program that drives Lance's Java REST client against our server
# (tests/test_rest_java.py); a JRE alone lacks it.
if ! command -v javac >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    echo "install-java: installing openjdk-17-jdk-headless (javac)"
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y --no-install-recommends openjdk-17-jdk-headless
    hash -r
fi

# One line, not the JVM's version banner.
echo "install-java: Java $(java_major) at $(command -v java), Maven at $(command -v mvn)"

#!/usr/bin/env bash
# MIT Kerberos for the secured Hive Metastore tests and the [kerberos] extra:
# - krb5-kdc, krb5-admin-server, krb5-user: the KDC the tests start on loopback (their realm,
#   principals and keytabs are made by tests/support/kdc.py; nothing system-wide is configured);
# - libkrb5-dev and gcc: gssapi and kerberos (the GSSAPI bindings of the [kerberos] extra)
#   publish no Linux wheels and build against the system's libgssapi_krb5.
# Installs with apt (as root or through sudo). Without apt or root it only says what is missing
# and exits 0: setup.sh then leaves the Kerberos tests to skip.
set -uo pipefail

needed() {
    local missing=()
    command -v krb5kdc >/dev/null 2>&1 || [ -x /usr/sbin/krb5kdc ] || missing+=(krb5-kdc)
    command -v kadmin.local >/dev/null 2>&1 || [ -x /usr/sbin/kadmin.local ] || missing+=(krb5-admin-server)
    command -v kinit >/dev/null 2>&1 || missing+=(krb5-user)
    command -v krb5-config >/dev/null 2>&1 || missing+=(libkrb5-dev)
    command -v gcc >/dev/null 2>&1 || missing+=(gcc)
    echo "${missing[@]:-}"
}

missing=$(needed)
if [ -z "$missing" ]; then
    echo "install-kerberos: MIT Kerberos KDC, client and headers present"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-kerberos: no apt-get; missing: $missing (Kerberos tests will skip)" >&2
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "install-kerberos: not root and no sudo; missing: $missing (Kerberos tests will skip)" >&2
    exit 0
fi
echo "install-kerberos: installing $missing"
# The packages' debconf questions (default realm, servers) stay unanswered: the tests bring
# their own krb5.conf.
"${as_root[@]}" apt-get update -q >/dev/null || true
if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends $missing >/dev/null; then
    echo "install-kerberos: apt-get install failed; Kerberos tests will skip" >&2
fi
exit 0

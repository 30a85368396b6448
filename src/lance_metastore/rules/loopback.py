"""Whether an address reaches only this machine: the rule for servers we start unasked-for
on the network (``lance-metastore serve`` without authentication, ``hms start``)."""

from __future__ import annotations

import ipaddress
import socket


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name) reaches only this machine."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)

"""Where a webhook may be sent (SPEC §11.3, SSRF): the URL's rules and the public-address check.

A host must resolve only to public addresses: every range of IANA's special-purpose address
registries (loopback, private, link-local, shared, documentation, benchmarking, reserved,
translation, 6to4, Teredo, ...), multicast, site-local and IPv6 outside 2000::/3 are refused,
from one table (`SPECIAL_PURPOSE`; an IPv4-mapped address is judged by the IPv4 inside),
for every address the name resolves to, at registration and again at each delivery attempt
(a name may change what it resolves to). The sender then connects to the address checked here,
not to a second resolution of the name (`webhooks.sender`), so a name that answers a public
address to the check and a private one to the connection (DNS rebinding) cannot pass.
`SERENITY_WEBHOOK_ALLOW_PRIVATE=true` (development and tests only) lifts the address rule and
allows `http://`. A URL names its scheme's standard port (443, or 80 for http) or none: no other
service of a host can be reached through a webhook (`WEBHOOK_STANDARD_PORTS_ONLY`, off in the
test settings only).
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

URL_MAX_LENGTH = 2048
STANDARD_PORTS = {"https": 443, "http": 80}
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class AddressRefusedError(Exception):
    """The URL may not be called; the message says why (no secret, no upstream text)."""


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # as in the URL (lower case), without brackets
    port: int
    path: str  # path and query, at least "/"

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    def url_for(self, address: IpAddress) -> str:
        """The URL with the checked address in place of the host name."""
        host = f"[{address}]" if address.version == 6 else str(address)
        return f"{self.scheme}://{host}:{self.port}{self.path}"


def private_allowed() -> bool:
    return bool(settings.SERENITY_WEBHOOK_ALLOW_PRIVATE)


def target_parse(url: str) -> Target:
    """The URL's parts. Raises `AddressRefusedError`: longer than 2048 characters, not
    `https://` (`http://` too when private addresses are allowed), no host, credentials in it,
    a bad port or another than the scheme's standard one."""
    if len(url) > URL_MAX_LENGTH:
        raise AddressRefusedError(f"at most {URL_MAX_LENGTH} characters.")
    schemes = ("https", "http") if private_allowed() else ("https",)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise AddressRefusedError("not a valid URL.") from None
    if parts.scheme.lower() not in schemes:
        raise AddressRefusedError("must be an https:// URL.")
    if not parts.hostname or any(c.isspace() for c in url):
        raise AddressRefusedError("must be an absolute URL with a host.")
    if parts.username is not None or parts.password is not None:
        raise AddressRefusedError("must not contain credentials.")
    scheme = parts.scheme.lower()
    standard = STANDARD_PORTS[scheme]
    if port is not None and port != standard and settings.WEBHOOK_STANDARD_PORTS_ONLY:
        raise AddressRefusedError(f"an {scheme}:// URL may only name port {standard}.")
    path = parts.path or "/"
    if parts.query:
        path = f"{path}?{parts.query}"
    return Target(scheme=scheme, host=parts.hostname.lower(), port=port or standard, path=path)


# Every range of IANA's IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890 and their
# updates, as of 2025), and the other ranges no webhook may reach: multicast, the deprecated
# site-local fec0::/10, IPv6 outside the global unicast 2000::/3. One table: the check is "in
# none of these" (SPEC §13.6), never a list of the `ipaddress` module's flags whose meaning
# changes between Python releases. Whole ranges are refused, also those IANA marks globally
# reachable (anycast services, AS112, translation prefixes): no receiver lives there.
SPECIAL_PURPOSE: tuple[tuple[str, str], ...] = (
    # IPv4 Special-Purpose Address Registry
    ("0.0.0.0/8", "this network"),
    ("10.0.0.0/8", "private-use"),
    ("100.64.0.0/10", "shared address space"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link local"),
    ("172.16.0.0/12", "private-use"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("192.31.196.0/24", "AS112-v4"),
    ("192.52.193.0/24", "AMT"),
    ("192.88.99.0/24", "deprecated 6to4 relay anycast"),
    ("192.168.0.0/16", "private-use"),
    ("192.175.48.0/24", "direct delegation AS112 service"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    ("240.0.0.0/4", "reserved"),
    ("255.255.255.255/32", "limited broadcast"),
    # IPv4 multicast
    ("224.0.0.0/4", "multicast"),
    # IPv6 Special-Purpose Address Registry
    ("::1/128", "loopback"),
    ("::/128", "unspecified"),
    ("64:ff9b::/96", "IPv4-IPv6 translation"),
    ("64:ff9b:1::/48", "local-use IPv4-IPv6 translation"),
    ("100::/64", "discard-only"),
    ("100:0:0:1::/64", "dummy IPv6 prefix"),
    ("2001::/23", "IETF protocol assignments (Teredo, benchmarking, ORCHID, AMT, drones)"),
    ("2001:db8::/32", "documentation"),
    ("2002::/16", "6to4"),
    ("2620:4f:8000::/48", "direct delegation AS112 service"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing SIDs"),
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local unicast"),
    # IPv6: deprecated site-local, multicast
    ("fec0::/10", "site-local (deprecated)"),
    ("ff00::/8", "multicast"),
)
_SPECIAL_NETWORKS = tuple(ipaddress.ip_network(network) for network, _ in SPECIAL_PURPOSE)
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")


def address_is_public(address: IpAddress) -> bool:
    """An address in none of the `SPECIAL_PURPOSE` ranges (and for IPv6, in the global unicast
    2000::/3). An IPv4-mapped IPv6 address (::ffff:0:0/96) is the IPv4 address it carries."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        elif address not in _GLOBAL_UNICAST_V6:
            return False
    return not any(
        address in network for network in _SPECIAL_NETWORKS if network.version == address.version
    )


def addresses_resolve(target: Target) -> list[IpAddress]:
    """Every address the target's host resolves to, each checked (unless private addresses are
    allowed). Raises `AddressRefusedError` when the name does not resolve or any address is not
    public."""
    try:
        found = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise AddressRefusedError("the host does not resolve.") from None
    addresses: list[IpAddress] = []
    for *_, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise AddressRefusedError("the host does not resolve.")
    if not private_allowed():
        refused = [a for a in addresses if not address_is_public(a)]
        if refused:
            raise AddressRefusedError("the host resolves to a non-public address.")
    return addresses

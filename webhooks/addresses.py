"""Where a webhook may be sent (SPEC §11.3, SSRF): the URL's rules and the public-address check.

A host must resolve only to public addresses: loopback, private, link-local, multicast,
reserved, shared (carrier-grade NAT), unspecified, and IPv6 forms that carry an IPv4 address
(IPv4-mapped, 6to4 `2002::/16`: the IPv4 inside is checked; Teredo `2001::/32`: refused) are
refused, for every address the name resolves to, at registration and again at each delivery attempt
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


def address_is_public(address: IpAddress) -> bool:
    """A public address, and for an IPv6 address that carries an IPv4 one (IPv4-mapped or
    6to4), a public IPv4 inside. Teredo (`2001::/32`) is never public here: its client address
    is obfuscated and its relay is not ours to trust."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.teredo is not None:
            return False
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is not None:
            address = embedded
    return address.is_global and not (
        address.is_multicast
        or address.is_reserved
        or address.is_loopback
        or address.is_link_local
        or address.is_private
        or address.is_unspecified
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

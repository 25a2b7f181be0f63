"""Where a judge may send its calls, and which environment variable may hold its key.

A judge's `base_url` and `api_key_env` may come from a bundle, which is untrusted input
(issue 26): a bundle must not make the server send one of its own secrets (DATABASE_URL,
SECRET_KEY, ...) to an address of the bundle's choosing, nor reach the cloud's metadata
service or the private network. An EndpointPolicy is the administrator's allowance (built
from the settings by scoring.runs.services.backends.endpoint_policy); these checks are pure.

The rules, in order:
- `api_key_env` must not be one of `refused_env` (the settings' own secrets: refused even
  when an allowance names them), and must start with one of `key_env_prefixes` or be one of
  `key_env_allowed`.
- `base_url` must be https, or http to a host in `http_hosts`; it carries no user name,
  password, query or fragment.
- Every address the host stands for (an IP literal, or each address socket.getaddrinfo
  gives before each call and again when a connection is made, against DNS rebinding:
  judges.egress) must be globally routable
  (ipaddress's `is_global`: not loopback, link-local 169.254.0.0/16 and fe80::/10, private
  10/8, 172.16/12, 192.168/16, fc00::/7, shared 100.64/10, reserved, multicast), unless it
  lies in one of `allowed_networks`; the cloud metadata addresses (METADATA_ADDRESSES) are
  refused even then.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .types import JudgeConfigError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# AWS, GCP, Azure, OpenStack and DigitalOcean serve instance metadata (and credentials) at
# 169.254.169.254; AWS's IPv6 endpoint is fd00:ec2::254 and Alibaba Cloud's 100.100.100.200.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
DEFAULT_KEY_ENV_PREFIXES = ("SNAGLIST_JUDGE_KEY_",)
# The variables the vendors' SDKs read by default (judges.base.DEFAULT_API_KEY_ENV).
DEFAULT_KEY_ENV_ALLOWED = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY"})


class EndpointRefused(JudgeConfigError):
    """A judge's base_url or api_key_env breaks the EndpointPolicy. `field` names which
    ("base_url" or "api_key_env"); the message says why, never a secret."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


@dataclass(frozen=True)
class EndpointPolicy:
    """What an administrator allows judges to use (see the module docstring for the rules).

    key_env_prefixes / key_env_allowed: names a key variable may have (prefix, or exact).
    refused_env: names never allowed (the settings' secrets), whatever the allowances say.
    http_hosts: host names or IP literals (lower case) a judge may reach over plain http.
    allowed_networks: address ranges allowed although not globally routable (a loopback
    judge: 127.0.0.0/8). resolve: socket.getaddrinfo's signature (tests replace it).
    """

    key_env_prefixes: tuple[str, ...] = DEFAULT_KEY_ENV_PREFIXES
    key_env_allowed: frozenset[str] = DEFAULT_KEY_ENV_ALLOWED
    refused_env: frozenset[str] = frozenset()
    http_hosts: frozenset[str] = frozenset()
    allowed_networks: tuple[IPNetwork, ...] = ()
    resolve: Callable[..., list] = field(
        default=lambda *a, **k: _getaddrinfo(*a, **k), compare=False
    )

    def check_key_env(self, name: str | None) -> None:
        """Raise EndpointRefused("api_key_env", why) unless `name` may hold a judge's key."""
        if not name:
            return
        if name in self.refused_env:
            raise EndpointRefused(
                "api_key_env",
                f"{name} holds one of the server's own settings and never a judge's key",
            )
        if name in self.key_env_allowed or any(name.startswith(p) for p in self.key_env_prefixes):
            return
        allowed = [f"{p}*" for p in self.key_env_prefixes] + sorted(self.key_env_allowed)
        raise EndpointRefused(
            "api_key_env",
            f"{name[:60]} is not a variable an administrator allowed for judges' keys "
            f"(allowed: {', '.join(allowed) or 'none'}; settings SNAGLIST_JUDGE_KEY_ENV_PREFIX, "
            "SNAGLIST_JUDGE_KEY_ENV_ALLOWED)",
        )

    def check_url(self, url: str | None) -> None:
        """Raise EndpointRefused("base_url", why) when `url` breaks the scheme/host rules or
        its host is an IP literal outside the allowed addresses. No DNS look-up: a host
        name is checked by check_resolved at call time. Empty `url`: the SDK's own vendor
        address, allowed."""
        if not url:
            return
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.scheme not in ("http", "https") or not host:
            raise EndpointRefused("base_url", f"{url[:60]!r} is not an http(s) URL")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise EndpointRefused(
                "base_url", "must not carry a user name, password, query or fragment"
            )
        if parts.scheme == "http" and host not in self.http_hosts:
            raise EndpointRefused(
                "base_url",
                f"http to {host} is not allowed: use https, or an administrator adds the "
                "host to SNAGLIST_JUDGE_HTTP_HOSTS",
            )
        address = _literal(host)
        if address is not None:
            self.check_address(address, host)

    def check_address(self, address: IPAddress, host: str) -> None:
        """Raise EndpointRefused("base_url", why) unless `address` (what `host` stands for)
        is globally routable or in allowed_networks; a metadata address always."""
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if address in METADATA_ADDRESSES:
            raise EndpointRefused(
                "base_url", f"{host} is the cloud metadata address {address}; never a judge"
            )
        if any(address in net for net in self.allowed_networks):
            return
        if address.is_global and not address.is_multicast:
            return
        shown = host if host == str(address) else f"{host} ({address})"
        raise EndpointRefused(
            "base_url",
            f"{shown} is a {_kind(address)} address; an administrator allows such a range "
            "with SNAGLIST_JUDGE_ALLOWED_NETWORKS",
        )

    def check_resolved(self, url: str | None) -> list[IPAddress]:
        """Check `url` (check_url), then every address its host resolves to now
        (socket.getaddrinfo); return those addresses. Raises EndpointRefused for a refused
        URL or address, or a host that does not resolve."""
        self.check_url(url)
        if not url:
            return []
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        literal = _literal(host)
        if literal is not None:
            return [literal]
        return self.resolve_checked(host, parts.port or (443 if parts.scheme == "https" else 80))

    def resolve_checked(self, host: str, port: int) -> list[IPAddress]:
        """Return the addresses `host` stands for now (itself for an IP literal; else each
        address `resolve` gives, in its order, once), after check_address passed each: the
        check before a call (check_resolved) and at connect time (judges.egress, which
        connects to these addresses only). Raises EndpointRefused when any address is
        refused, or the host does not resolve."""
        host = host.lower()
        literal = _literal(host)
        if literal is not None:
            self.check_address(literal, host)
            return [literal]
        try:
            infos = self.resolve(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise EndpointRefused("base_url", f"{host} does not resolve ({exc})") from None
        addresses = _addresses(info[4][0] for info in infos)
        if not addresses:
            raise EndpointRefused("base_url", f"{host} resolves to no address")
        for address in addresses:
            self.check_address(address, host)
        return addresses

    def check(self, url: str | None, key_env: str | None) -> None:
        """Both static checks (no DNS): check_key_env then check_url."""
        self.check_key_env(key_env)
        self.check_url(url)


def _getaddrinfo(*args: object, **kwargs: object) -> list:
    """socket.getaddrinfo, looked up at each call (so a test's replacement applies)."""
    return socket.getaddrinfo(*args, **kwargs)


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _addresses(raw: Iterable[str]) -> list[IPAddress]:
    out: list[IPAddress] = []
    for text in raw:
        address = _literal(str(text))
        if address is not None and address not in out:
            out.append(address)
    return out


def _kind(address: IPAddress) -> str:
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_multicast:
        return "multicast"
    if address.is_private:
        return "private"
    return "non-public"

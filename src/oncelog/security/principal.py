"""Who a client is: ``User:NAME`` principals, and the name a TLS client certificate maps to.

Kafka takes the certificate's subject as ``X500Principal.getName()`` writes it (RFC 2253:
the most specific part first, ``CN=alice,OU=eng,O=acme,C=US``) and runs
``ssl.principal.mapping.rules`` over it: a comma-separated list of ``RULE:pattern/
replacement/`` (optionally ``/L`` or ``/U`` to lower- or upper-case the result), tried in
order, the first whose pattern matches the whole name winning, and ``DEFAULT`` (the name as
it is). A name no rule matches fails the connection's authentication, as in Kafka.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..config import ConfigError

ANONYMOUS = "User:ANONYMOUS"

# Python's names for a subject's attributes, as RFC 2253 (and Java) abbreviate them
_SHORT_NAMES = {"commonName": "CN", "countryName": "C", "localityName": "L",
                "stateOrProvinceName": "ST", "organizationName": "O",
                "organizationalUnitName": "OU", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID"}
_ESCAPED = re.compile(r'([,+"\\<>;])')
# Kafka's SslPrincipalMapper.RULE_PARSER, read the same way
_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,]*)\s*(,|$)")


class NoMatchingRule(Exception):
    """No rule of ``ssl.principal.mapping.rules`` matched a certificate's name."""


def distinguished_name(subject: tuple) -> str:
    """A certificate subject as ``ssl.SSLSocket.getpeercert()`` gives it (its parts in the
    certificate's order), written as RFC 2253 (and Java's ``X500Principal.getName()``) does."""
    return ",".join("+".join(f"{_SHORT_NAMES.get(key, key)}={_escape(value)}"
                             for key, value in rdn) for rdn in reversed(subject))


def _escape(value: str) -> str:
    return _ESCAPED.sub(r"\\\1", value)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        result = match.expand(self.replacement)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" \
            else result


class PrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed once (a bad rule stops the broker)."""

    def __init__(self, rules: str) -> None:
        self.rules: list[_Rule] = []
        text, position = rules.strip(), 0
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise ConfigError(f"ssl.principal.mapping.rules: cannot read the rule at "
                                  f"{text[position:]!r}; expected RULE:pattern/replacement/"
                                  "[LU] or DEFAULT")
            position = match.end()
            if match.group(1) == "DEFAULT":
                self.rules.append(_Rule(None))
                continue
            try:
                pattern = re.compile(match.group(2).replace("\\/", "/"))
            except re.error as error:
                raise ConfigError(f"ssl.principal.mapping.rules: the pattern "
                                  f"{match.group(2)!r} is not a regular expression: "
                                  f"{error}") from None
            # Java's $1 is Python's \1
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", match.group(3).replace("\\/", "/"))
            self.rules.append(_Rule(pattern, replacement, match.group(4)))
        if not self.rules:
            self.rules.append(_Rule(None))

    def name(self, distinguished: str) -> str:
        """The short name ``distinguished`` maps to; NoMatchingRule when no rule matches."""
        for rule in self.rules:
            mapped = rule.apply(distinguished)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"no rule of ssl.principal.mapping.rules matches {distinguished!r}")

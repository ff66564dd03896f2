"""The validity period of the pod's TLS certificate, read from its PEM file for ``openab doctor``.

The standard library loads a certificate into a context but tells nothing of it until a peer has verified it, and
a library that parses X.509 (``cryptography``) would be a large dependency for two dates. A certificate's DER is
fixed up to its validity: ``Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL,
serialNumber, signature, issuer, validity SEQUENCE { notBefore, notAfter }, ... } ... }`` (RFC 5280, 4.1), so
walking five elements of it is enough.
"""

from __future__ import annotations

import datetime
import re
import ssl
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CertificateError", "Validity", "read_validity"]

_PEM_BLOCK = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.DOTALL)
_SEQUENCE, _INTEGER, _EXPLICIT_0, _UTC_TIME, _GENERALIZED_TIME = 0x30, 0x02, 0xA0, 0x17, 0x18


class CertificateError(ValueError):
    """The file holds no certificate this reader can take apart."""


@dataclass(frozen=True, slots=True)
class Validity:
    not_before: datetime.datetime
    not_after: datetime.datetime


def _element(der: bytes, at: int) -> tuple[int, int, int]:
    """The DER element at ``at``: its tag, where its content starts and where it ends."""
    if at + 2 > len(der):
        raise CertificateError("the certificate ends inside an element")
    tag, length, at = der[at], der[at + 1], at + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or at + count > len(der):
            raise CertificateError("the certificate has a length DER does not allow")
        length, at = int.from_bytes(der[at:at + count], "big"), at + count
    if at + length > len(der):
        raise CertificateError("the certificate ends inside an element")
    return tag, at, at + length


def _time(der: bytes, at: int) -> datetime.datetime:
    tag, start, end = _element(der, at)
    text = der[start:end].decode("ascii", "replace")
    try:
        if tag == _UTC_TIME:  # YYMMDDHHMMSSZ; RFC 5280: 50-99 are 19xx
            parsed = datetime.datetime.strptime(text, "%y%m%d%H%M%SZ")
            if parsed.year >= 2050:
                parsed = parsed.replace(year=parsed.year - 100)
        elif tag == _GENERALIZED_TIME:
            parsed = datetime.datetime.strptime(text, "%Y%m%d%H%M%SZ")
        else:
            raise CertificateError("the certificate's validity is not a time")
    except ValueError as exc:
        raise CertificateError(f"the certificate's validity is not a time DER allows ({text!r})") from exc
    return parsed.replace(tzinfo=datetime.UTC)


def read_validity(path: str | Path) -> Validity:
    """The validity of the first certificate in the PEM file at ``path`` (the pod's own; the rest is its chain)."""
    try:
        text = Path(path).read_text("ascii", errors="replace")
    except OSError as exc:
        raise CertificateError(f"cannot read {path}: {exc.strerror}") from None
    block = _PEM_BLOCK.search(text)
    if block is None:
        raise CertificateError(f"{path} holds no PEM certificate")
    try:
        der = ssl.PEM_cert_to_DER_cert(block.group(0))
    except ValueError as exc:  # binascii.Error is one
        raise CertificateError(f"{path}: the certificate is not base64") from exc
    tag, at, _ = _element(der, 0)
    if tag != _SEQUENCE:
        raise CertificateError(f"{path}: not an X.509 certificate")
    tag, at, _ = _element(der, at)  # tbsCertificate
    if tag != _SEQUENCE:
        raise CertificateError(f"{path}: not an X.509 certificate")
    tag, _, end = _element(der, at)
    if tag == _EXPLICIT_0:  # version: absent in v1 certificates
        at = end
        tag, _, end = _element(der, at)
    if tag != _INTEGER:  # serialNumber
        raise CertificateError(f"{path}: not an X.509 certificate")
    at = end
    for _what in ("signature", "issuer"):
        tag, _, at = _element(der, at)
        if tag != _SEQUENCE:
            raise CertificateError(f"{path}: not an X.509 certificate")
    tag, at, _ = _element(der, at)  # validity
    if tag != _SEQUENCE:
        raise CertificateError(f"{path}: not an X.509 certificate")
    not_before = _time(der, at)
    _, _, at = _element(der, at)
    return Validity(not_before, _time(der, at))

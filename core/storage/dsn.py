"""A PostgreSQL DSN's secrets: hidden in every form it can be written in.

libpq takes a DSN as a URL (``postgresql://user:pw@host/db``, the password
also as ``?password=pw``) or as ``key=value`` words (``host=h password=pw``,
values optionally single-quoted with ``\\'`` escapes). ``redact_dsn`` hides
the password in each of them, for messages, ``doctor`` and logs;
``dsn_passwords`` gives the values themselves, so the log redactor can hide
them wherever else they show up (a driver's error echoing the DSN) and hook
commands never inherit a variable holding one.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["HIDDEN", "dsn_passwords", "hide_dsn_secrets", "redact_dsn"]

HIDDEN = "***"

# userinfo of a URL: scheme://user:PASSWORD@ (a raw "@" cannot be in the password)
_URL_PASSWORD = re.compile(r"(?P<keep>[A-Za-z][A-Za-z0-9+.-]*://[^:@/\s]*:)(?P<secret>[^@\s]*)@")
# password=VALUE as a URL query parameter or a key=value word, quoted or not
_KEY_PASSWORD = re.compile(
    r"(?P<keep>(?:^|(?<=[\s?&;]))(?:ssl)?password\s*=\s*)"
    r"(?P<secret>'(?:[^'\\]|\\.)*'?|[^\s&#']*)",
    re.IGNORECASE,
)


def redact_dsn(dsn: str) -> str:
    """``dsn`` (or any text holding one) with every password replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['keep']}{HIDDEN}@", dsn)
    return _KEY_PASSWORD.sub(lambda m: f"{m['keep']}{HIDDEN}", text)


def dsn_passwords(dsn: str) -> list[str]:
    """The passwords written in ``dsn``, as written and as libpq reads them
    (percent-decoded, unquoted): what must never reach a log or a hook command."""
    found: list[str] = []
    for match in (*_URL_PASSWORD.finditer(dsn), *_KEY_PASSWORD.finditer(dsn)):
        raw = match["secret"]
        value = re.sub(r"\\(.)", r"\1", raw[1:-1]) if raw.startswith("'") else unquote(raw)
        found.extend(v for v in (raw, value) if v and v != HIDDEN)
    return list(dict.fromkeys(found))


def hide_dsn_secrets(text: str, dsn: str) -> str:
    """``text`` (a driver's error message) with ``dsn``'s passwords hidden, however it
    quotes them."""
    for secret in sorted(dsn_passwords(dsn), key=len, reverse=True):
        text = text.replace(secret, HIDDEN)
    return redact_dsn(text)

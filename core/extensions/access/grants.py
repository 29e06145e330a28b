"""What an extension asks the user for, in plain words (issue 11 items 5 and 6).

An extension that asks for more than the defaults — a secret, the network,
extra paths, speaking as the user, driving the agent, controlling the
kernel, topics outside its own ``<id>.*`` namespace — or that runs inside
the kernel process (where it can do anything) loads only after the user
granted exactly that request. ``GrantRequest`` is that request; its
``digest`` changes whenever the request does, so a changed manifest needs a
new grant. A grant also binds the code it was given for: ``code`` is the
digest of the extension's files (``code_digest``, ADR 0044), kept beside the
request's digest, so changed code needs a new grant too. The names it may
take from other extensions (``replaces``) are part of the grant, not of the
digest: they are only known once its code ran.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Literal

from core.extensions.contract.context import CONVERSATIONS_PERMISSION
from core.extensions.loading.isolation_choice import IN_PROCESS, isolation_of
from core.extensions.loading.manifest import PERMISSION_FLAGS, Manifest, ResolvedPermissions

# in-process is a choice the user grants; isolated is the default (ADR 0086)
IN_PROCESS_WORDS = (
    "runs inside the kernel process, not sandboxed, with full access to your files and "
    "accounts (in-process is an explicit choice you grant)"
)
# turn hooks, context providers, post-processors, prompt additions, ui_request (ADR 0041)
CONVERSATIONS_WORDS: str = CONVERSATIONS_PERMISSION.grant or ""
# the boolean permissions every digest names; any other only when asked, so that
# requests made before it existed keep their digest (ADR 0024, 0041, 0059)
_ALWAYS_DIGESTED = ("notify", "user_messages", "agent", "control")

_DRAW_WORDS = {
    "clock": "reads the clock (recorded for replay)",
    "random": "draws random numbers (recorded for replay)",
}

# what changed since an extension's grant: what it asks, or its code (ADR 0044)
Change = Literal["request", "code"]


@dataclass(frozen=True, slots=True)
class GrantRequest:
    """One extension's request: its secrets and resolved permissions under the
    isolation it will really run with, and the digest of the code asking."""

    ext_id: str
    isolation: str
    secrets: tuple[str, ...]
    permissions: ResolvedPermissions
    in_process_digest: str
    code: str  # code_digest of its directory: the grant binds this code
    # a wasm module's nondeterministic imports it asks for: "clock", "random" (ADR 0085)
    draws: tuple[str, ...] = ()

    @classmethod
    def from_manifest(
        cls, manifest: Manifest, *, default_isolation: str, code: str
    ) -> GrantRequest:
        isolation = isolation_of(manifest, default_isolation)
        isolated = isolation != IN_PROCESS
        secrets = tuple(sorted(set(manifest.secret_names)))
        in_process = manifest.permissions.resolved(manifest.id, isolated=False)
        wasm = manifest.wasm if isolation == "wasm" else None
        draws = () if wasm is None else tuple(k for k in ("clock", "random") if getattr(wasm, k))
        return cls(
            ext_id=manifest.id,
            isolation=isolation,
            secrets=secrets,
            permissions=manifest.permissions.resolved(manifest.id, isolated=isolated),
            in_process_digest=_digest(IN_PROCESS, secrets, in_process),
            code=code,
            draws=draws,
        )

    @property
    def in_process(self) -> bool:
        return self.isolation == IN_PROCESS

    @property
    def needs_grant(self) -> bool:
        """True when it asks for anything beyond an isolated extension's defaults."""
        return bool(self.describe())

    def describe(self) -> list[str]:
        """What it asks, one plain phrase each (empty: nothing beyond the defaults)."""
        perms = self.permissions
        words: list[str] = []
        if self.in_process:
            words.append(IN_PROCESS_WORDS)
        words.extend(f"reads the secret {name}" for name in self.secrets)
        if not self.in_process:
            if perms.network:
                words.append("network access")
            words.extend(f"publishes events on {p}" for p in perms.emit if not self._own_topic(p))
            words.extend(f"reads events on {p}" for p in perms.subscribe if not self._own_topic(p))
        words.extend(_path_words(p) for p in perms.paths)
        words.extend(_DRAW_WORDS[d] for d in self.draws)
        # each permission's own words, as declared beside its context method (issue 42)
        words.extend(
            p.grant for p in PERMISSION_FLAGS if p.grant is not None and getattr(perms, p.key)
        )
        return words

    def sentence(self) -> str:
        """``it asks to …`` as one line, for skip reasons and prompts."""
        return "; ".join(self.describe()) or "nothing beyond the defaults"

    @property
    def digest(self) -> str:
        """A stable fingerprint of the request: equal iff the request is equal."""
        digest = _digest(self.isolation, self.secrets, self.permissions)
        if not self.draws:  # requests made before wasm existed keep their digest
            return digest
        return _digest(f"{self.isolation}+{'+'.join(self.draws)}", self.secrets, self.permissions)

    def covering_digests(self) -> frozenset[str]:
        """Digests of grants that cover this request: its own, and — when it
        runs isolated — the same manifest's in-process request, since a grant
        to run inside the kernel already trusts it with everything."""
        digests = {self.digest}
        if not self.in_process:
            digests.add(self.in_process_digest)
        return frozenset(digests)

    def _own_topic(self, pattern: str) -> bool:
        return pattern == f"{self.ext_id}.*" or pattern.startswith(f"{self.ext_id}.")


def replaces_words(replaces: dict[str, str]) -> list[str]:
    """``{"remember": "memory"}`` → ``["replaces `remember` from memory"]``."""
    return [f"replaces `{name}` from {owner}" for name, owner in sorted(replaces.items())]


def grant_command_hint(ext_id: str) -> str:
    """The skip reason's last words: exactly what to run — the grant, from the
    command line or a chat, and then the reload that serves it."""
    return (
        f"run `python main.py extensions grant {ext_id}` (or send `/grant {ext_id} yes`), "
        f"then `/reload {ext_id}`"
    )


def not_granted_reason(request: GrantRequest, *, changed: Change | None) -> str:
    """Why it is skipped: never granted, or what changed since its grant."""
    what = {
        None: "not granted",
        "request": "its request changed since the grant",
        "code": "its code changed since the grant (a grant binds the code it was given for)",
    }[changed]
    return f"{what}: it asks to {request.sentence()} — {grant_command_hint(request.ext_id)}"


def _path_words(spec: str) -> str:
    path, _, mode = spec.rpartition(":") if spec.endswith((":ro", ":rw")) else (spec, "", "")
    return f"sees {path} {'read-only' if mode == 'ro' else 'read-write'}"


def _digest(isolation: str, secrets: tuple[str, ...], perms: ResolvedPermissions) -> str:
    body = {
        "isolation": isolation,
        "secrets": list(secrets),
        "emit": sorted(perms.emit),
        "subscribe": sorted(perms.subscribe),
        "network": perms.network,
        "paths": sorted(perms.paths),
        **{key: getattr(perms, key) for key in _ALWAYS_DIGESTED},
    }
    for permission in PERMISSION_FLAGS:
        if permission.key not in body and getattr(perms, permission.key):
            body[permission.key] = True
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:20]

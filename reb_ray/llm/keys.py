"""Where a real LLM key may be: the driver (the user exported it there) and the memory of the
node's metering proxy. Nowhere else: not in any Ray process's environment, not in a
runtime_env, an actor's arguments, the object store, a log or a file.

Three rules keep it so:

- `scrubbed(names)`: a local Ray started by the sweep is started with the key variables taken
  out of the driver's environment for the moment of `ray.init`. Ray's head processes (GCS,
  raylet, agents) are the driver's children and every worker is the raylet's child, so none of
  them inherits a key.
- `KeyInbox` / `seal`: the driver hands the keys to a node's proxy actor sealed to a key pair
  the proxy made in its own memory (X25519 key agreement, HKDF-SHA256, AES-256-GCM). What Ray
  carries, and may log, keep in its task table or spill, is ciphertext only; the proxy opens
  it and keeps the values in a dict in memory (never in its environment).
- A trial's spec never carries an LLM agent's key: its sandbox gets the stand-in key only, and
  the trial's worker has no use for the real one.

`KNOWN_KEY_VARS`: the provider key variables reb-ray knows (the LLM kinds' defaults and the
variables their CLIs would read on their own); `scrubbed` always removes them, together with the
variables the sweep's agents name.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Iterable, Iterator

from reb_ray.models.agent import KNOWN_KEY_VARS


_INFO = b"reb-ray llm proxy keys v1"


@contextlib.contextmanager
def scrubbed(names: Iterable[str] = ()) -> Iterator[list[str]]:
    """Takes KNOWN_KEY_VARS and `names` out of os.environ for the block (processes started
    meanwhile do not inherit them) and puts back exactly what was there. Yields the names removed."""
    removed = {name: os.environ.pop(name) for name in dict.fromkeys((*KNOWN_KEY_VARS, *names)) if name in os.environ}
    try:
        yield sorted(removed)
    finally:
        os.environ.update(removed)


def _cipher(shared: bytes, salt: bytes):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=_INFO).derive(shared))


def seal(public_key: bytes, values: dict[str, str]) -> dict[str, bytes]:
    """`values` ({variable: key}) sealed to the holder of `public_key` (32 bytes, X25519): a
    dict of bytes that only `KeyInbox.open` of that holder turns back into `values`."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    mine = X25519PrivateKey.generate()
    sender = mine.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    nonce = os.urandom(12)
    shared = mine.exchange(X25519PublicKey.from_public_bytes(public_key))
    box = _cipher(shared, sender + public_key).encrypt(nonce, json.dumps(values).encode(), _INFO)
    return {"sender": sender, "nonce": nonce, "box": box}


class KeyInbox:
    """A key pair made in this process's memory: `public_key` (32 bytes) may travel anywhere;
    `open(sealed)` returns the {variable: key} dict `seal` sealed to it. Raises ValueError for
    anything else (a box sealed to another inbox, or altered on the way)."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        self._private = X25519PrivateKey.generate()
        self.public_key = self._private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)

    def __repr__(self) -> str:
        return f"KeyInbox(public_key={self.public_key.hex()[:16]}...)"

    def open(self, sealed: dict[str, bytes]) -> dict[str, str]:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

        try:
            shared = self._private.exchange(X25519PublicKey.from_public_bytes(sealed["sender"]))
            data = _cipher(shared, sealed["sender"] + self.public_key).decrypt(sealed["nonce"], sealed["box"], _INFO)
        except (InvalidTag, KeyError, TypeError, ValueError):
            raise ValueError("sealed keys: not sealed to this inbox, or altered on the way") from None
        values = json.loads(data)
        if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
            raise ValueError("sealed keys: not a {variable: key} table")
        return values

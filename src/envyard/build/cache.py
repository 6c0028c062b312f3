"""The build cache: a step's key → the layers of the image after it.

A key hashes the parent image's layer ids, the instruction after substitution and what else decides the step's
result: for RUN the environment, workdir, user and network it runs with (build args in scope are in that
environment); for COPY/ADD the digests of the files it reads (.dockerignore applied) and its flags. Layer ids
are unique, so a changed step gives new layers and every key after it changes too: a rebuild reruns from the
first changed step on.

Entries are ordinary images named `buildcache/<key>`, so the store's rules keep their layers alive (gc never
deletes a layer an image stands on) and nothing new is needed for gc-safety. `put` refreshes an entry's time
on every hit; `prune` removes entries unused for longer than a given age (`envyard build-cache prune`), and
their layers go with them once no other image or sandbox uses them.
"""

from __future__ import annotations

import hashlib
import json
import time

from ..errors import NotFound
from ..store import Image, ImageConfig, Store

PREFIX = "buildcache/"
VERSION = 1  # bump when the builder's semantics change, so that old entries stop matching


def key(parent_layers: list[str], parts: dict) -> str:
    blob = json.dumps({"v": VERSION, "parent": parent_layers, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def get(store: Store, k: str) -> Image | None:
    name = f"{PREFIX}{k}:latest"
    if not store.has_image(name):
        return None
    try:
        return store.image(name)
    except NotFound:  # pruned meanwhile: a miss
        return None


def put(store: Store, k: str, layers: list[str], config: ImageConfig) -> Image:
    # An entry is a step's state, not a product: without its own provenance it would carry its FROM image's,
    # and a step over a verified setup image would pass for one (`envyard derive` would take it).
    entry = config.replace(provenance={"provider": "buildcache"})
    return store.put_image(f"{PREFIX}{k}:latest", layers, entry)


def entries(store: Store) -> list[Image]:
    return [i for i in store.images() if i.name.startswith(PREFIX)]


def prune(store: Store, older_than: float = 0.0) -> list[str]:
    """Remove cache entries not used for `older_than` seconds (0: all). Returns their names."""
    cutoff = time.time() - older_than
    gone = []
    for img in entries(store):
        if img.created <= cutoff:
            try:
                store.remove_image(img.name)
                gone.append(img.name)
            except NotFound:  # removed by someone else meanwhile
                pass
    return gone

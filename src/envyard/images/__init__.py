"""OCI images without a Docker daemon: pull from and push to registries (the distribution protocol), save
and load OCI image layouts. See docs/images.md.

    pull_image(yard, "python:3.12-slim")                  → Image "docker.io/library/python:3.12-slim"
    push_image(yard, "debian:bookworm", "127.0.0.1:5000/base/debian:bookworm")
    save_image(yard, "debian:bookworm", "debian.tar");  load_image(yard, "debian.tar")
"""

from .layout import load_image, save_image
from .progress import Progress
from .pull import pull_image
from .push import PushResult, push_image

__all__ = ["Progress", "PushResult", "load_image", "pull_image", "push_image", "save_image"]

"""The layer store: sealed layers, images (layer stacks + config) and sandbox leases under $ENVYARD_HOME."""

from .store import Image, ImageConfig, LayerInfo, SandboxRecord, Store, default_home, parse_image_name

__all__ = ["Image", "ImageConfig", "LayerInfo", "SandboxRecord", "Store", "default_home", "parse_image_name"]

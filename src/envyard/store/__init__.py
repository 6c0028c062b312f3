"""The layer store: sealed layers, images (layer stacks + config) and sandbox leases under $ENVYARD_HOME."""

from .names import Reference, parse_image_name, parse_reference
from .store import BlobInfo, Image, ImageConfig, LayerInfo, SandboxRecord, Store, default_home

__all__ = ["BlobInfo", "Image", "ImageConfig", "LayerInfo", "Reference", "SandboxRecord", "Store", "default_home",
           "parse_image_name", "parse_reference"]

"""debian:bookworm through a real registry: envyard pushes it, pulls it into fresh stores, runs it."""

from __future__ import annotations

import time

from envyard.images import push_image

# Every path's type, mode, owner (size and link target for non-directories: a directory's size is the file
# system's business), then every file's content, as seen from inside a sandbox.
TREE = ("find / -xdev \\( -type d -printf '%p d %m %U:%G\\n' \\) -o -printf '%p %y %m %U:%G %s %l\\n' | sort "
        "| sha256sum; find / -xdev -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum")


def layer_dirs(yard) -> list[str]:
    return sorted(p.name for p in yard.store.layers_dir.iterdir() if not p.name.startswith("."))


def first_phases(events) -> list[str]:
    """Per layer, in order, whether the pull found it stored ("exists") or fetched it ("download")."""
    seen: dict[str, str] = {}
    for e in events:
        if e.phase in ("download", "exists"):
            seen.setdefault(e.digest, e.phase)
    return list(seen.values())


def test_pushed_debian_pulls_into_a_fresh_store_and_runs_the_same_files(pushed_debian, debian_yard, make_yard):
    yard = make_yard()
    started = time.monotonic()
    img = yard.pull_image(pushed_debian)
    cold = time.monotonic() - started
    assert img.name == pushed_debian
    assert img.config.env == debian_yard.image("debian:bookworm").config.env
    assert img.config.provenance["manifest_digest"].startswith("sha256:")
    with yard.sandbox(img) as pulled, debian_yard.sandbox("debian:bookworm") as original:
        seen, expected = pulled.exec(TREE, timeout=120), original.exec(TREE, timeout=120)
        assert seen.exit_code == 0 and len(seen.stdout.split()) == 4
        assert seen.stdout == expected.stdout
        assert pulled.exec("cat /etc/debian_version").stdout.startswith("12.")

    events = []
    started = time.monotonic()
    again = yard.pull_image(pushed_debian, on_progress=events.append)
    warm = time.monotonic() - started
    assert again.layers == img.layers
    assert first_phases(events) == ["exists"]
    assert layer_dirs(yard) == img.layers
    print(f"\npull of debian:bookworm from the local registry: cold {cold:.2f} s, warm {warm:.2f} s")


def test_images_sharing_a_base_share_its_layer(pushed_debian, registry, make_yard):
    builder = make_yard()
    base = builder.pull_image(pushed_debian)
    with builder.sandbox(base) as sb:
        sb.write_file("/opt/derived.txt", "on top of debian\n")
        derived = sb.snapshot("derived:v1")
    result = push_image(builder, "derived:v1", f"{registry.host}/team/derived:v1")
    # the base layer is linked from the repository it came from, only the new layer travels
    assert [layer["action"] for layer in result.layers] == ["mounted", "uploaded"]
    again = push_image(builder, "derived:v1", f"{registry.host}/team/derived:v1")
    assert [layer["action"] for layer in again.layers] == ["exists", "exists"]
    assert again.digest == result.digest

    user = make_yard()
    first = user.pull_image(pushed_debian)
    events = []
    second = user.pull_image(f"{registry.host}/team/derived:v1", on_progress=events.append)
    assert second.layers[0] == first.layers[0]
    assert len(second.layers) == len(derived.layers) == 2
    assert layer_dirs(user) == sorted(second.layers)
    assert first_phases(events) == ["exists", "download"]
    with user.sandbox(second) as sb:
        assert sb.read_file("/opt/derived.txt") == b"on top of debian\n"


def test_a_dockerfile_from_a_registry_image_pulls_it(pushed_debian, make_yard, tmp_path):
    """`envyard build` calls pull_image for a FROM image that is not in the store."""
    from envyard.build import build_image

    (tmp_path / "Dockerfile").write_text(f"FROM {pushed_debian}\nRUN echo built > /built.txt\n")
    yard = make_yard()
    img = build_image(yard, tmp_path, tag="built/on-pulled:1")
    base = yard.image(pushed_debian)  # pulled during the build
    assert img.layers[0] == base.layers[0] and base.config.provenance["provider"] == "registry"
    with yard.sandbox(img) as sb:
        assert sb.read_file("/built.txt") == b"built\n"

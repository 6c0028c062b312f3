"""`envyard df`: the store's real disk use by image, layer, sandbox and cache (diskuse.py)."""

from __future__ import annotations

import typer


def _mb(n: int | None) -> str:
    return "–" if n is None else f"{n / 1e6:.1f} MB"


def register(app: typer.Typer, out, err, fail, emit_json, make_yard) -> None:
    @app.command()
    def df(as_json: bool = typer.Option(False, "--json", help="Print JSON (sizes in bytes)."),
           verbose: bool = typer.Option(False, "--verbose", "-v", help="Also list every layer.")):
        """Disk use of the store: per image, layer and sandbox, the package cache and the rest. Shared layers
        and hard-linked files count once; the host view mounted inside the store is never entered."""
        from rich.table import Table

        from ..diskuse import usage
        from ..errors import EnvyardError

        try:
            u = usage(make_yard().store)
        except EnvyardError as e:
            fail(e)
        if as_json:
            emit_json(u)
            return
        p, vol = u["parts"], u["volume"]
        out.print(f"store {u['home']}: {_mb(u['total_bytes'])} on disk", markup=False)
        t = Table("WHAT", "SIZE", "NOTE")
        t.add_row(f"layers ({len(u['layers'])})", _mb(p["layers"]),
                  f"{u['shared_layers']} shared by several images, counted once")
        t.add_row(f"sandboxes ({len(u['sandboxes'])})", _mb(p["sandboxes"]), "")
        t.add_row("package cache", _mb(p["package_cache"]), "prune: envyard gc --cache")
        t.add_row("other cache", _mb(p["other_cache"]), "")
        t.add_row("downloads", _mb(p["downloads"]), "")
        t.add_row("trash", _mb(p["trash"]), "emptied by envyard gc")
        t.add_row("sandbox volume file", _mb(vol["allocated_bytes"]),
                  f"{_mb(vol['used_bytes'])} in use inside" if vol["used_bytes"] is not None else "not mounted")
        out.print(t)
        it = Table("IMAGE", "LAYERS", "SIZE", "UNIQUE")
        for i in u["images"]:
            it.add_row(i["name"], str(i["layers"]), _mb(i["bytes"]), _mb(i["unique_bytes"]))
        out.print(it)
        if u["sandboxes"]:
            st = Table("SANDBOX", "IMAGE", "SIZE", "OWNER")
            for s in u["sandboxes"]:
                st.add_row(s["id"], s["image"], _mb(s["bytes"]), s["owner"])
            out.print(st)
        if verbose:
            lt = Table("LAYER", "SIZE", "IMAGES", "NOTE")
            for layer in u["layers"]:
                lt.add_row(layer["id"], _mb(layer["bytes"]), ", ".join(layer["images"]) or "(none)", layer["note"])
            out.print(lt)

"""Write a root filesystem as an OCI image layout, byte for byte reproducible.

Why not umoci or buildah: both stamp the current time into layers and history unless told otherwise at every
step, and neither is needed for what this does: turn directories into gzip'd tar layers in a fixed order (paths
sorted, owner 0:0 unless the file says otherwise, every mtime = SOURCE_DATE_EPOCH, gzip header without a time or a
name) and write the config, manifest and index that point at them. The same directories and epoch give the same
digests, which is what `build.sh --check-reproducible` compares.

    python3 oci.py --out DIR --epoch N --config config.json --ref aiadmit:dev \
        --layer ROOTFS --skip opt/aiadmit --layer ROOTFS/opt/aiadmit=opt/aiadmit

A layer is `SRC[=DEST]`: the files under SRC go under DEST in the image (default: the image's root). `--skip P`
(repeatable) leaves the paths under P (relative to the root, no leading slash) out of every layer whose DEST is
the root, so one tree can be split in two layers. It prints one JSON line: digest, sizes (compressed and not).
Standard library only: it runs on the build host's Python.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import stat
import sys
import tarfile
from datetime import datetime, timezone
from pathlib import Path

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"


class _HashingWriter(io.RawIOBase):
    """A file object that hashes and counts what goes through it on the way to `sink`."""

    def __init__(self, sink) -> None:
        self.sink, self.sha, self.size = sink, hashlib.sha256(), 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:  # tarfile asks where it starts
        return self.size

    def write(self, data) -> int:
        self.sha.update(data)
        self.size += len(data)
        if self.sink is not None:
            self.sink.write(data)
        return len(data)


def _entries(src: Path, skip: tuple[str, ...]):
    """(path relative to src, absolute path) of every entry under src, parents before children, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        rel_dir = "" if rel_dir == "." else rel_dir
        kept = []
        for d in sorted(dirnames):
            rel = os.path.join(rel_dir, d)
            if not any(rel == s or rel.startswith(s + "/") for s in skip):
                kept.append(d)
        dirnames[:] = kept  # os.walk descends only into these, in this order
        for name in sorted(kept + filenames):
            rel = os.path.join(rel_dir, name)
            if any(rel == s or rel.startswith(s + "/") for s in skip):
                continue
            out.append((rel, os.path.join(dirpath, name)))
    return sorted(out)


def write_layer(src: Path, dest: str, skip: tuple[str, ...], epoch: int, blobs: Path) -> dict:
    """One gzip'd tar layer from the tree under `src`, as a blob; returns its descriptor and diff_id."""
    tmp = blobs / f".layer.{os.getpid()}.tmp"
    with open(tmp, "wb") as raw:
        compressed = _HashingWriter(raw)
        with gzip.GzipFile(filename="", mode="wb", fileobj=compressed, mtime=0, compresslevel=9) as gz:
            plain = _HashingWriter(gz)
            with tarfile.open(fileobj=plain, mode="w", format=tarfile.GNU_FORMAT) as tar:
                seen_inodes: dict[tuple[int, int], str] = {}
                prefix = dest.strip("/")
                if prefix:  # the parents of DEST, so the layer unpacks on its own
                    parts = prefix.split("/")
                    for i in range(1, len(parts) + 1):
                        info = tarfile.TarInfo("/".join(parts[:i]))
                        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
                        tar.addfile(info)
                for rel, path in _entries(src, skip):
                    name = f"{prefix}/{rel}" if prefix else rel
                    st = os.lstat(path)
                    info = tar.gettarinfo(path, arcname=name)
                    info.mtime = epoch
                    info.uname = info.gname = ""
                    key = (st.st_dev, st.st_ino)
                    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                        if key in seen_inodes:
                            info.type, info.linkname, info.size = tarfile.LNKTYPE, seen_inodes[key], 0
                            tar.addfile(info)
                            continue
                        seen_inodes[key] = name
                    if info.isreg():
                        with open(path, "rb") as f:
                            tar.addfile(info, f)
                    elif info.isdir() or info.issym() or info.islnk():
                        tar.addfile(info)
                    else:
                        raise SystemExit(f"oci.py: {path}: device, fifo or socket in a layer (not supported)")
    digest = compressed.sha.hexdigest()
    os.replace(tmp, blobs / digest)
    return {
        "descriptor": {"mediaType": MEDIA_LAYER, "digest": f"sha256:{digest}", "size": compressed.size},
        "diff_id": f"sha256:{plain.sha.hexdigest()}",
        "uncompressed": plain.size,
    }


def _blob(blobs: Path, data: bytes, media: str) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    return {"mediaType": media, "digest": f"sha256:{digest}", "size": len(data)}


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="OCI layout directory to (re)create")
    ap.add_argument("--epoch", required=True, type=int, help="SOURCE_DATE_EPOCH: every time in the image")
    ap.add_argument("--config", required=True, type=Path, help="JSON: the image config's `config` object")
    ap.add_argument("--ref", required=True, help="image name, e.g. aiadmit:dev (index annotations)")
    ap.add_argument("--layer", action="append", required=True, help="SRC[=DEST], in order")
    ap.add_argument("--skip", action="append", default=[], help="path left out of root layers")
    ap.add_argument("--label", action="append", default=[], help="KEY=VALUE image label")
    args = ap.parse_args(argv)

    out: Path = args.out
    blobs = out / "blobs" / "sha256"
    blobs.mkdir(parents=True, exist_ok=True)
    for old in blobs.iterdir():
        old.unlink()
    created = datetime.fromtimestamp(args.epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    layers, history = [], []
    for spec in args.layer:
        src, _, dest = spec.partition("=")
        skip = tuple(s.strip("/") for s in args.skip) if not dest.strip("/") else ()
        layer = write_layer(Path(src), dest, skip, args.epoch, blobs)
        layers.append(layer)
        history.append({"created": created, "created_by": f"manifests/image/build.sh: {dest or '/'}"})
    config_obj = json.loads(args.config.read_text())
    labels = dict(config_obj.get("Labels") or {})
    labels.update(kv.split("=", 1) for kv in args.label)
    if labels:
        config_obj["Labels"] = labels
    image_config = {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": config_obj,
        "rootfs": {"type": "layers", "diff_ids": [l["diff_id"] for l in layers]},
        "history": history,
    }
    config_desc = _blob(blobs, _canonical(image_config), MEDIA_CONFIG)
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config_desc,
        "layers": [l["descriptor"] for l in layers],
    }
    manifest_desc = _blob(blobs, _canonical(manifest), MEDIA_MANIFEST)
    name, _, tag = args.ref.rpartition(":")
    full = args.ref if "/" in name else f"docker.io/library/{args.ref}"
    manifest_desc["annotations"] = {
        "org.opencontainers.image.ref.name": tag,
        "io.containerd.image.name": full,
    }
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    (out / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
    (out / "index.json").write_bytes(
        _canonical({"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": [manifest_desc]})
    )
    report = {
        "ref": full,
        "digest": manifest_desc["digest"],
        "compressed_bytes": sum(l["descriptor"]["size"] for l in layers) + config_desc["size"],
        "uncompressed_bytes": sum(l["uncompressed"] for l in layers),
        "layers": [
            {"digest": l["descriptor"]["digest"], "compressed": l["descriptor"]["size"],
             "uncompressed": l["uncompressed"]}
            for l in layers
        ],
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())

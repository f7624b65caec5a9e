#!/usr/bin/env bash
# Build the aiadmit webhook image without Docker: a root filesystem from Debian packages (mmdebstrap), aiadmit's
# wheel and its locked dependencies from PyPI installed by the image's own interpreter, written as an OCI image
# layout by oci.py. Same layout as the Dockerfile: /opt/aiadmit venv, uid/gid 65532, entrypoint `aiadmit serve`,
# workdir /tmp, nothing written outside /tmp at run time.
#
#   manifests/image/build.sh [--rebuild] [--ref NAME:TAG]
#
# What is in it, and only that: the Debian packages python3.11-minimal and libpython3.11-stdlib with the libraries
# they depend on (no shell, no dpkg, no apt, no coreutils), their copyright files and a status.d entry per
# package (what image scanners read); /etc/passwd and /etc/group naming uid 0 and 65532; the venv. Two layers:
# the Debian part, and /opt/aiadmit.
#
# Reproducible: every mtime is SOURCE_DATE_EPOCH (the commit time of the last commit touching the inputs), tar
# entries are sorted and owned 0:0, gzip carries no time, bytecode is compiled in unchecked-hash mode, and the
# wheels are pinned by sha256 (requirements.lock, pip.lock). Two builds from the same commit and the same Debian
# archive state give the same image digest (tests/e2e/install/test_image.py checks it). Debian's archive moves (security
# updates): the package versions are recorded in packages.txt beside the image, and the Debian part is cached
# for the ISO week (see base_key); tests/e2e/install/test_image.py rebuilds from the cached Debian part.
#
# Cache: ${AIADMIT_IMAGE_CACHE:-$HOME/.cache/aiadmit-image}/
#   base-<hash>/rootfs/   the Debian part, keyed by this script, platform.sh, the suite and the ISO week
#   image-<hash>/         keyed by the base key, the lock files, oci.py, wheels.sh and the package sources:
#     oci/                the OCI image layout (index.json, blobs/)
#     aiadmit-image.tar   the same layout as one tar (`ctr images import`, `skopeo copy oci-archive:...`)
#     report.json         digest, sizes, build seconds; packages.txt: Debian package versions
# The last line on stdout is the image-<hash> directory; progress goes to stderr.
# Needs: root (chroot), mmdebstrap, python3 >= 3.11 with pip, GNU tar, the Debian archive and PyPI.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/platform.sh"
log() { printf '[aiadmit image] %s\n' "$*" >&2; }

rebuild=0
ref="aiadmit:dev"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rebuild) rebuild=1 ;;
    --ref) ref="$2"; shift ;;
    *) log "unknown argument: $1"; exit 2 ;;
  esac
  shift
done
[[ "$(id -u)" == 0 ]] || { log "ERROR: needs root (mmdebstrap and chroot)"; exit 1; }
for tool in mmdebstrap python3 tar chroot; do
  command -v "$tool" >/dev/null || { log "ERROR: $tool not found (apt-get install mmdebstrap)"; exit 127; }
done

mirror="${AIADMIT_IMAGE_MIRROR:-http://deb.debian.org/debian}"
security="${AIADMIT_IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
packages=(python3.11-minimal libpython3.11-stdlib libstdc++6)  # libstdc++: google-re2 (matches(), RE2) is C++
# Pulled in by those packages' dependencies for the package manager's sake, needed by nothing that serves: their
# files are deleted after extraction (listed from each .deb), their status.d entries are not written.
unwanted=(dpkg tar libacl1 libmd0 libselinux1 libpcre2-8-0 libzstd1)
cache="${AIADMIT_IMAGE_CACHE:-${HOME:-/tmp}/.cache/aiadmit-image}"
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

sources=(pyproject.toml README.md webhook policies)
sources_hash="$(cd "$repo" && find "${sources[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 \
  | sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)"
epoch="${SOURCE_DATE_EPOCH:-}"
if [[ -z "$epoch" ]] && git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
  epoch="$(git -C "$repo" log -1 --format=%ct -- "${sources[@]}" manifests/image 2>/dev/null || true)"
fi
epoch="${epoch:-1700000000}"
export SOURCE_DATE_EPOCH="$epoch"
# The Debian part is rebuilt every ISO week even when nothing here changed: the archive takes security updates
# (seen: zlib1g 1:1.2.13.dfsg-1 -> 1:1.2.13.dfsg-1+deb12u1 between two builds of one morning), and a cache keyed
# only by this script would keep the old libraries forever.
week="$(date -u +%G-W%V)"
base_key="$(printf '%s\n' "$DEBIAN_SUITE" "$mirror" "$security" "$week" "${packages[@]}" "${unwanted[@]}" \
  | cat - "$here/build.sh" "$here/platform.sh" | sha256sum | cut -c1-16)"
image_key="$(printf '%s\n' "$base_key" "$sources_hash" "$epoch" "$ref" \
  | cat - "$here/requirements.lock" "$here/pip.lock" "$here/oci.py" "$here/wheels.sh" | sha256sum | cut -c1-16)"
base="$cache/base-$base_key"
out="$cache/image-$image_key"

if [[ $rebuild == 0 && -f "$out/.complete" ]]; then
  log "cache hit: $out ($(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["digest"])' "$out/report.json"))"
  echo "$out"
  exit 0
fi
start=$SECONDS

# ---------------------------------------------------------------- the Debian part
if [[ $rebuild == 1 || ! -f "$base/.complete" ]]; then
  log "base: mmdebstrap $DEBIAN_SUITE ${packages[*]} (extract: no maintainer scripts, no essential set)"
  rm -rf "$base"
  mkdir -p "$base"
  # The extract hook runs on the host with the tree as $1, before the downloaded .debs are removed: each wanted
  # one leaves its control file in var/lib/dpkg/status.d/ (the distroless convention scanners read) and its version
  # in packages.txt; then documentation, man pages, locales and apt/dpkg state go, copyright files stay.
  mmdebstrap --variant=extract --include="$(IFS=,; echo "${packages[*]}")" --skip=download/empty \
    --extract-hook='set -e; r="$1"; mkdir -p "$r/var/lib/dpkg/status.d";
      for d in "$r"/var/cache/apt/archives/*.deb; do
        p="$(dpkg-deb -f "$d" Package)";
        case " '"${unwanted[*]}"' " in *" $p "*)
          dpkg-deb --fsys-tarfile "$d" | tar -t | grep -v "/$" | sed "s#^\./##" \
            | while read -r f; do rm -f "$r/$f"; done; continue;;
        esac;
        dpkg-deb -f "$d" > "$r/var/lib/dpkg/status.d/$p";
        printf "%s %s\n" "$p" "$(dpkg-deb -f "$d" Version)" >> "$r/../packages.txt.unsorted";
      done' \
    "$DEBIAN_SUITE" "$base/rootfs" "deb $mirror $DEBIAN_SUITE main" \
    "deb $mirror $DEBIAN_SUITE-updates main" "deb $security $DEBIAN_SUITE-security main" >&2
  sort "$base/packages.txt.unsorted" > "$base/packages.txt"
  rm "$base/packages.txt.unsorted"
  r="$base/rootfs"
  find "$r/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete
  find "$r/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$r"/usr/share/{man,info,locale,lintian,bug,binfmts,polkit-1,readline,menu,pixmaps,applications} \
    "$r"/usr/lib/binfmt.d "$r"/lib/systemd "$r"/usr/lib/mime "$r"/usr/share/mime \
    "$r"/var/cache/apt "$r"/var/lib/apt "$r"/var/log "$r"/etc/apt "$r"/usr/share/dpkg "$r"/usr/libexec/dpkg
  find "$r/var/lib/dpkg" -mindepth 1 -maxdepth 1 ! -name status.d -exec rm -rf {} +
  # Device nodes (mmdebstrap makes a few) belong to the runtime, which mounts its own /dev.
  rm -rf "$r/dev"
  mkdir -p "$r"/{tmp,etc,dev,proc,sys,opt} && chmod 1777 "$r/tmp"
  printf 'root:x:0:0:root:/root:/usr/sbin/nologin\naiadmit:x:65532:65532:aiadmit:/nonexistent:/usr/sbin/nologin\n' \
    > "$r/etc/passwd"
  printf 'root:x:0:\naiadmit:x:65532:\n' > "$r/etc/group"
  # The standard library's bytecode: Debian compiles it in a maintainer script (not run by `extract`). Read-only
  # at run time, so unchecked-hash: never re-validated against the sources, no timestamps in it.
  PYTHONHASHSEED=0 chroot "$r" /usr/bin/python3.11 -m compileall -q --invalidation-mode unchecked-hash \
    /usr/lib/python3.11 >&2 \
    || { log "ERROR: compiling the standard library failed"; exit 1; }
  touch "$base/.complete"
fi

# ---------------------------------------------------------------- the venv
stage="$cache/stage.$$"
rm -rf "$stage"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"
log "wheels: aiadmit from this checkout + requirements.lock (hash-checked)"
"$here/wheels.sh" "$stage/wheels" "$repo" >&2
log "venv: /opt/aiadmit by the image's /usr/bin/python3.11"
cp -a "$base/rootfs" "$stage/rootfs"
r="$stage/rootfs"
mkdir -p "$r/wheels"
cp "$stage"/wheels/* "$r/wheels/"
pipwhl="$(cd "$r/wheels" && ls pip-*.whl)"
appwhl="$(cd "$r/wheels" && ls aiadmit-*.whl)"
chroot="$(command -v chroot)"
in_image() { env -i PATH=/opt/aiadmit/bin:/usr/bin HOME=/nonexistent PIP_NO_CACHE_DIR=1 \
  PIP_DISABLE_PIP_VERSION_CHECK=1 SOURCE_DATE_EPOCH="$epoch" PYTHONHASHSEED=0 "$chroot" "$r" "$@"; }
in_image /usr/bin/python3.11 -m venv --without-pip /opt/aiadmit
# pip runs from its wheel (a zip on sys.path) and is never installed into the image.
in_image /opt/aiadmit/bin/python "/wheels/$pipwhl/pip" install -q --no-index --find-links=/wheels --no-compile \
  --require-hashes --no-deps -r /wheels/requirements.lock >&2
in_image /opt/aiadmit/bin/python "/wheels/$pipwhl/pip" install -q --no-index --no-compile --no-deps \
  "/wheels/$appwhl" >&2
rm -rf "$r/wheels"
# pip records the installer's own paths: drop what differs between runs (direct_url.json of a local wheel).
find "$r/opt/aiadmit" -name direct_url.json -path '*.dist-info/*' -delete
find "$r/opt/aiadmit" -name RECORD -path '*.dist-info/*' -exec sed -i '/\.dist-info\/direct_url\.json,/d' {} +
# -f: rewrite every .pyc, also ones something left in timestamp mode (attrs' were, with the extraction time in
# their header, which made two builds differ). A fixed hash seed (in_image sets PYTHONHASHSEED=0): set and frozenset constants are marshalled in iteration order, which follows string hashes
# (two builds differed in attrs' bytecode before this).
in_image /opt/aiadmit/bin/python -m compileall -q -f --invalidation-mode unchecked-hash \
  /opt/aiadmit >&2
# A smoke test by the image's interpreter, as the user the Pod runs as: the serving stack imports.
env -i PATH=/opt/aiadmit/bin:/usr/bin HOME=/nonexistent PYTHONDONTWRITEBYTECODE=1 \
  "$chroot" --userspec=65532:65532 "$r" /opt/aiadmit/bin/python -c \
  'import webhook.app.serving, webhook.app.cli, gunicorn, cryptography, kubernetes; print("imports ok")' >&2

# ---------------------------------------------------------------- the OCI layout
log "oci: two layers (Debian, /opt/aiadmit), epoch $epoch"
cat > "$stage/config.json" <<EOF
{
  "User": "65532:65532",
  "Env": ["PATH=/opt/aiadmit/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"],
  "Entrypoint": ["aiadmit", "serve"],
  "WorkingDir": "/tmp",
  "ExposedPorts": {"8443/tcp": {}}
}
EOF
rm -rf "$stage/out" && mkdir -p "$stage/out"
python3 "$here/oci.py" --out "$stage/out/oci" --epoch "$epoch" --config "$stage/config.json" --ref "$ref" \
  --layer "$r" --skip opt/aiadmit --layer "$r/opt/aiadmit=opt/aiadmit" \
  --label "org.opencontainers.image.title=aiadmit" \
  --label "org.opencontainers.image.version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$repo/webhook/__init__.py")" \
  --label "org.opencontainers.image.base.name=debian:$DEBIAN_SUITE ${packages[*]}" \
  > "$stage/out/oci.json"
tar -C "$stage/out/oci" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  -cf "$stage/out/aiadmit-image.tar" oci-layout index.json blobs
cp "$base/packages.txt" "$stage/out/packages.txt"
seconds=$((SECONDS - start))
python3 - "$stage/out/oci.json" "$seconds" "$epoch" "$(basename "$base")" > "$stage/out/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r.update(build_seconds=int(sys.argv[2]), source_date_epoch=int(sys.argv[3]), base=sys.argv[4])
print(json.dumps(r, indent=1))
PY
rm "$stage/out/oci.json"
touch "$stage/out/.complete"
rm -rf "$out"
mv "$stage/out" "$out"
python3 - "$out/report.json" >&2 <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"[aiadmit image] {r['ref']} {r['digest']}: {r['compressed_bytes']/2**20:.1f} MiB compressed, "
      f"{r['uncompressed_bytes']/2**20:.1f} MiB unpacked, built in {r['build_seconds']} s")
PY
echo "$out"

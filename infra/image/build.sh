#!/usr/bin/env bash
# Builds Shoal's OCI image without a container registry: a minimal Debian base from Debian's own
# packages (mmdebstrap), the Node binary the project pins, the compiled services and their
# production node_modules (infra/image/stage.ts), assembled with umoci. One image for both
# services: `gateway` or `worker` as its argument. Needs root (mmdebstrap, umoci).
#
#   infra/image/build.sh                 # CPU image; prints the image directory
#   infra/image/build.sh --variant cuda  # CUDA worker image (needs a GPU host's files, see below)
#
# Output: ${SHOAL_CACHE:-~/.cache/shoal}/image-<variant>-<hash>/ with
#   oci/           an OCI image layout (tag `shoal`): `podman run oci:<dir>/oci:shoal worker`
#   shoal.tar      the same as an OCI archive: `podman load -i shoal.tar`
#   image.env      IMAGE_DIR, IMAGE_ARCHIVE, IMAGE_HASH, IMAGE_BYTES
# The hash covers the staged files, this script and the base's package list, so an unchanged tree
# reuses its image. The Debian base is cached apart, keyed by its suite, variant and package list.
#
# CUDA variant: onnxruntime-node's CUDA 12 provider (libonnxruntime_providers_{shared,cuda}.so,
# installed into node_modules by infra/gpu/onnxruntime-cuda.sh on a GPU host) and the CUDA 12 +
# cuDNN 9 runtime libraries (a directory given as SHOAL_CUDA_LIBS, e.g. the lib folders of the
# nvidia-*-cu12 wheels) are copied in and put on LD_LIBRARY_PATH; the NVIDIA container toolkit
# mounts the driver. Neither can be fetched on a machine without those files, so this variant is
# not built by the tests.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${SHOAL_CACHE:-$HOME/.cache/shoal}
variant=cpu
while (($#)); do
  case $1 in
  --variant) variant=$2; shift 2 ;;
  *) echo "usage: build.sh [--variant cpu|cuda]" >&2; exit 2 ;;
  esac
done
[[ $variant == cpu || $variant == cuda ]] || { echo "build.sh: unknown variant '$variant' (cpu or cuda)" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "build.sh: needs root (mmdebstrap and umoci write files owned by other users)" >&2; exit 1; }
for tool in mmdebstrap umoci; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool is missing: run infra/dev/setup-system.sh" >&2; exit 1; }
done

suite=bookworm
# Essential packages plus what node and onnxruntime link (libstdc++, libgcc), CA roots for TLS to
# Kafka, and tini as PID 1 (signals forwarded, zombies reaped).
base_packages="ca-certificates,libstdc++6,tini"
base_key=$(printf '%s\n' "$suite" essential "$base_packages" "$(sed -n '/^# base-recipe/,/^# end-base-recipe/p' "$0")" | sha256sum | cut -c1-16)
base_dir=$cache/image-base-$base_key
log() { printf 'image: %s\n' "$*" >&2; }
started=$SECONDS

# base-recipe
if [[ ! -f $base_dir/rootfs.tar ]]; then
  log "building the Debian $suite base ($base_packages) into $base_dir"
  mkdir -p "$base_dir"
  mmdebstrap --variant=essential --include="$base_packages" --mode=root --format=tar \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
    --customize-hook='echo "shoal:x:10001:" >>"$1"/etc/group' \
    --customize-hook='echo "shoal:x:10001:10001:shoal:/nonexistent:/usr/sbin/nologin" >>"$1"/etc/passwd' \
    "$suite" "$base_dir/rootfs.tar.partial"
  mv "$base_dir/rootfs.tar.partial" "$base_dir/rootfs.tar"
  log "base built in $((SECONDS - started)) s"
fi
# end-base-recipe

work=$(mktemp -d "${TMPDIR:-/tmp}/shoal-image-XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/stage
staged_hash=$(cd "$repo" && node_modules/.bin/node --import tsx infra/image/stage.ts "$stage")

install -D -m 0755 "$here/shoal-entry.sh" "$stage/usr/local/bin/shoal"
install -D -m 0644 "$here/health.mjs" "$stage/opt/shoal/health.mjs"
if [[ $variant == cuda ]]; then
  ort_bin=$stage/opt/shoal/node_modules/onnxruntime-node/bin/napi-v6/linux/x64
  src_bin=$repo/node_modules/onnxruntime-node/bin/napi-v6/linux/x64
  for lib in libonnxruntime_providers_shared.so libonnxruntime_providers_cuda.so; do
    [[ -f $src_bin/$lib ]] || { echo "build.sh: $src_bin/$lib is missing: run infra/gpu/onnxruntime-cuda.sh on a GPU host first" >&2; exit 1; }
    cp "$src_bin/$lib" "$ort_bin/"
  done
  [[ -d ${SHOAL_CUDA_LIBS:-} ]] || { echo "build.sh: SHOAL_CUDA_LIBS must name a folder with the CUDA 12 + cuDNN 9 runtime libraries" >&2; exit 1; }
  mkdir -p "$stage/opt/cuda/lib" && cp -a "$SHOAL_CUDA_LIBS"/. "$stage/opt/cuda/lib/"
fi
hash=$(printf '%s\n' "$staged_hash" "$base_key" "$variant" "$(cat "$0" "$here/shoal-entry.sh" "$here/health.mjs" | sha256sum)" | sha256sum | cut -c1-16)
out=$cache/image-$variant-$hash
if [[ -f $out/image.env ]]; then
  log "up to date: $out"
  echo "$out"
  exit 0
fi

log "assembling the image in $out"
rm -rf "$out.partial" && mkdir -p "$out.partial"
(cd "$stage" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$work/app.tar" .)
layout=$out.partial/oci
umoci init --layout "$layout"
umoci new --image "$layout:shoal"
umoci raw add-layer --image "$layout:shoal" "$base_dir/rootfs.tar"
umoci raw add-layer --image "$layout:shoal" "$work/app.tar"
env_args=(
  --config.env=PATH=/usr/local/bin:/usr/bin:/bin
  --config.env=NODE_ENV=production
  # The read-only root has one writable place, /tmp (a volume or tmpfs); the console is not built in.
  --config.env=TMPDIR=/tmp
  --config.env=SHOAL_CONSOLE_DIR=/opt/shoal/console
)
[[ $variant == cuda ]] && env_args+=(--config.env=LD_LIBRARY_PATH=/opt/cuda/lib --config.env=SHOAL_EXECUTION_PROVIDER=cuda)
umoci config --image "$layout:shoal" "${env_args[@]}" \
  --config.entrypoint=/usr/bin/tini --config.entrypoint=-- --config.entrypoint=/usr/local/bin/shoal \
  --config.cmd=gateway --config.user=10001:10001 --config.workingdir=/opt/shoal \
  --config.exposedports=8080/tcp --config.exposedports=9464/tcp --config.volume=/tmp \
  --config.label=org.opencontainers.image.title=shoal \
  --config.label=dev.shoal.variant="$variant" --config.label=dev.shoal.input-hash="$hash" \
  --history.comment="shoal $variant $hash"
umoci gc --layout "$layout"
(cd "$layout" && tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$out.partial/shoal.tar" .)
bytes=$(stat -c %s "$out.partial/shoal.tar")
cat >"$out.partial/image.env" <<EOF
IMAGE_DIR=$out
IMAGE_ARCHIVE=$out/shoal.tar
IMAGE_HASH=$hash
IMAGE_BYTES=$bytes
EOF
rm -rf "$out" && mv "$out.partial" "$out"
log "built $out ($((bytes / 1024 / 1024)) MiB compressed) in $((SECONDS - started)) s"
echo "$out"

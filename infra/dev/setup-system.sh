#!/usr/bin/env bash
# Installs the Debian packages the tests drive, when missing: chromium (browser e2e),
# python3-venv (Python client e2e), mmdebstrap + umoci + podman + runc (the OCI image, e2e/image.test.ts)
# and unzip (schemas read out of Go module zips, infra/k8s). Idempotent; needs root (or sudo) only
# when something is missing.
set -euo pipefail

missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
for tool in mmdebstrap umoci podman runc unzip; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]} == 0)); then
  echo "system packages present (chromium, python3 venv, mmdebstrap, umoci, podman, runc, unzip)"
  exit 0
fi
sudo=()
[[ $(id -u) == 0 ]] || sudo=(sudo)
echo "installing: ${missing[*]}"
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"

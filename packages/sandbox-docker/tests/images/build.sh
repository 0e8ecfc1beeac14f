#!/bin/bash
# Build the sandbox test image (python3, git, a tiny git repository under /testbed) from
# the local base image `local/bookworm-py` (made by ci/engines/docker-up.sh).
# Idempotent and fast: skips the build when the image already carries this Dockerfile's hash.
# Usage: build.sh [TAG]   (default tag: local/patchgym-testbed:latest; env PATCHGYM_TEST_IMAGE)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tag="${1:-${PATCHGYM_TEST_IMAGE:-local/patchgym-testbed:latest}}"
base="local/bookworm-py"
docker info >/dev/null 2>&1 || { echo "build.sh: the Docker engine is not reachable; run ci/engines/docker-up.sh" >&2; exit 1; }
docker image inspect "$base" >/dev/null 2>&1 || { echo "build.sh: base image $base is missing; run ci/engines/docker-up.sh" >&2; exit 1; }
base_id="$(docker image inspect -f '{{.Id}}' "$base")"
want="$( (cat "$here/Dockerfile"; echo "$base_id") | sha256sum | cut -c1-16)"
have="$(docker image inspect -f '{{index .Config.Labels "patchgym.test-image"}}' "$tag" 2>/dev/null || true)"
if [ "$have" = "$want" ]; then
  echo "build.sh: $tag is up to date ($want)"
  exit 0
fi
DOCKER_BUILDKIT=0 docker build --network none -q --label "patchgym.test-image=$want" -t "$tag" "$here" >/dev/null
docker run --rm --network none "$tag" bash -c 'cd /testbed && git log --oneline | grep -q "initial commit" && python3 -c "import pkg.calc"' \
  || { echo "build.sh: $tag does not work" >&2; exit 1; }
echo "build.sh: built $tag ($want)"

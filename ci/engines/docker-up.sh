#!/bin/bash
# Start a Docker engine for patchgym's tests on a Debian bookworm machine without systemd (root; no bridge, no
# iptables: containers run with --network none), and build the base image local/bookworm-py without a registry.
# Idempotent: a running engine and an existing image are kept. Used by .ci/run; see CONTRIBUTING.md.
set -euo pipefail
apt_install() { # install Debian packages, refreshing the package lists once if they are missing
  apt-get install -y --no-install-recommends "$@" || { apt-get update && apt-get install -y --no-install-recommends "$@"; }
}
# The Debian mirror this machine's apt already uses (read from its sources, never hard-coded).
debian_mirror() { grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v -- '-security' | head -1; }
export DEBIAN_FRONTEND=noninteractive
command -v dockerd >/dev/null || apt_install docker.io debootstrap jq
# OCI runtime wrapper: without CAP_SYS_RESOURCE (as on our CI machines), so negative oom_score_adj (kubelet: -998) must be clamped to 0.
cat > /usr/local/bin/runc-clamp-oom <<'SH'
#!/bin/bash
bundle=""; prev=""
for a in "$@"; do
  case "$prev" in --bundle|-b) bundle="$a";; esac
  case "$a" in --bundle=*) bundle="${a#--bundle=}";; esac
  prev="$a"
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ] && grep -q '"oomScoreAdj":-' "$bundle/config.json"; then
  jq -c '.process.oomScoreAdj |= (if . != null and . < 0 then 0 else . end)' "$bundle/config.json" > "$bundle/config.json.clamp" \
    && mv "$bundle/config.json.clamp" "$bundle/config.json"
fi
exec /usr/bin/runc "$@"
SH
chmod +x /usr/local/bin/runc-clamp-oom
if ! docker info >/dev/null 2>&1; then
  # --bridge=none: no docker0 (172.17/16) bridge; containers use --network none.
  nohup dockerd --iptables=false --bridge=none --storage-driver=overlay2 \
     --add-runtime clampoom=/usr/local/bin/runc-clamp-oom --default-runtime=clampoom \
     > /tmp/dockerd.log 2>&1 &
  echo $! > /tmp/dockerd.pid
  for i in $(seq 1 150); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
  docker info >/dev/null
fi
if ! docker image inspect local/bookworm-py >/dev/null 2>&1; then
  MIRROR=$(debian_mirror)
  [ -x /tmp/rootfs-py/usr/bin/python3 ] || debootstrap --variant=minbase --include=python3,git bookworm /tmp/rootfs-py "$MIRROR"
  mkdir -p /tmp/rootfs-py/testbed
  tar -C /tmp/rootfs-py -c . | docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - local/bookworm-py
fi
docker run --rm --network none local/bookworm-py python3 -c 'print("docker ok")'

#!/usr/bin/env bash
# Run pytest (default: the local backend's cgroup tests and its security suite under bwrap)
# inside a small qemu guest whose kernel is Debian's and whose only cgroup hierarchy is v2.
#
#   ci/engines/cgv2-guest.sh [PYTHON] [-- PYTEST ARGS...]
#
# This machine is cgroup v1 (hybrid); most users' hosts are v2 only. The guest:
#   - kernel: Debian's `linux-image-amd64` (its dependency, the versioned image package),
#     fetched with `apt-get download` and unpacked into $CACHE (nothing is installed);
#   - root filesystem: this host's own `/`, shared read-only over 9p (so the guest runs this
#     workspace's virtualenv and the host's bwrap), ext4 on /tmp (a sparse disk), tmpfs on
#     /run and /var/tmp;
#   - init: a busybox initramfs built here that mounts cgroup2 at /sys/fs/cgroup (no v1),
#     switches root to the shared one (a chroot would forbid user namespaces), moves itself
#     into a child group (as a systemd service sits), runs the command, prints its exit
#     status and powers off.
# The exit status of this script is pytest's. Needs qemu-system-x86, busybox-static, cpio,
# kmod (installed from Debian if missing); uses KVM where it can run the guest, else TCG.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${1:-$ROOT/.venv/bin/python}
shift || true
[ "${1:-}" = "--" ] && shift
T=packages/sandbox-core/tests
# Default: the tests about limits, cgroups and kills, and the security suite under bwrap
# (about 5 minutes under TCG on 2 cores). Under TCG the guest runs Python ~8x slower than
# this host: the whole conformance suite (four isolation modes, 96 tests) would take about
# 20 minutes more and gVisor's suites longer still, so they run here only when asked
# (-- -q "$T/test_local_conformance.py" "$T/test_local_security.py").
[ $# -gt 0 ] || set -- -p no:cacheprovider -q -rs "$T/test_cgroup_v2.py" "$T/test_local_backend.py" \
  "$T/test_local_security.py::TestLocalSecurity"
CACHE=${PATCHGYM_CGV2_CACHE:-/tmp/patchgym-cgv2}
MEM_MB=${PATCHGYM_CGV2_MEM_MB:-3072}
TIMEOUT_S=${PATCHGYM_CGV2_TIMEOUT_S:-1800}
mkdir -p "$CACHE"
export DEBIAN_FRONTEND=noninteractive

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
command -v depmod >/dev/null || need+=(kmod)
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null; }
fi

# -- kernel and modules (cached by package name) -------------------------------------------
kernel_pkg() { apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}'; }
pkg=$(kernel_pkg)
[ -n "$pkg" ] || { apt-get update -q >/dev/null && pkg=$(kernel_pkg); }
[ -n "$pkg" ] || { echo "FATAL: apt knows no linux-image-amd64 (run apt-get update)" >&2; exit 2; }
KDIR=$CACHE/$pkg
if [ ! -e "$KDIR/.done" ]; then
  rm -rf "$KDIR" && mkdir -p "$KDIR"
  (cd "$KDIR" && apt-get download -q "$pkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  dpkg-deb -x "$KDIR"/"$pkg"_*.deb "$KDIR/x"
  rm -f "$KDIR"/*.deb
  depmod -b "$KDIR/x" "${pkg#linux-image-}"
  touch "$KDIR/.done"
fi
KVER=${pkg#linux-image-}
VMLINUZ=$KDIR/x/boot/vmlinuz-$KVER
MODS=$KDIR/x/lib/modules/$KVER

# -- initramfs: busybox, the modules for virtio 9p and overlayfs, /init ---------------------
INITRD=$CACHE/initrd-$KVER.cpio.gz
work=$(mktemp -d "$CACHE/initrd.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"/{bin,dev,proc,sys,newroot,mods}
cp /bin/busybox "$work/bin/busybox"
order=()
add_mod() {  # a module and what it depends on, dependencies first (from modules.dep)
  local rel deps d
  rel=$(grep -E "(^|/)$1\.ko:" "$MODS/modules.dep" | head -1 | cut -d: -f1)
  [ -n "$rel" ] || { echo "FATAL: module $1 not in $pkg" >&2; exit 2; }
  deps=$(grep -E "^$rel:" "$MODS/modules.dep" | cut -d: -f2)
  for d in $deps; do add_mod "$(basename "$d" .ko)"; done
  [[ " ${order[*]-} " == *" $1 "* ]] || { order+=("$1"); cp "$MODS/$rel" "$work/mods/$1.ko"; }
}
for m in virtio_pci 9pnet_virtio 9p overlay virtio_blk crc32c_generic ext4; do add_mod "$m"; done
cat >"$work/stage2.sh" <<EOF
echo \$\$ >/sys/fs/cgroup/driver/cgroup.procs
echo "guest: \$(uname -r); cgroup mounts: \$(grep cgroup /proc/mounts | cut -d' ' -f2,3 | tr '\n' ' ')"
cd $ROOT && env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp PYTHONDONTWRITEBYTECODE=1 \
  TMPDIR=/tmp $(printf '%q ' "$PY" -m pytest "$@")
echo "PATCHGYM_GUEST_EXIT=\$?"
sync; echo o >/proc/sysrq-trigger; while :; do sleep 1; done
EOF
cat >"$work/init" <<EOF
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in ${order[*]}; do insmod /mods/\$m.ko || echo "insmod \$m failed"; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose host /newroot || poweroff -f
R=/newroot
mount -t proc proc \$R/proc; mount -t sysfs sys \$R/sys; mount -t devtmpfs dev \$R/dev
mkdir -p \$R/dev/pts; mount -t devpts devpts \$R/dev/pts
mount -t ext4 /dev/vda \$R/tmp && chmod 1777 \$R/tmp || poweroff -f
for d in run var/tmp; do mount -t tmpfs -o mode=1777 tmpfs \$R/\$d; done
mount -t cgroup2 none \$R/sys/fs/cgroup
echo "+cpu +memory +pids" >\$R/sys/fs/cgroup/cgroup.subtree_control
mkdir \$R/sys/fs/cgroup/driver
cp /stage2.sh \$R/run/stage2.sh
exec switch_root \$R /bin/sh /run/stage2.sh
EOF
chmod +x "$work/init"
(cd "$work" && find . | cpio -o -H newc --quiet | gzip -1) >"$INITRD"

# -- accelerator: KVM when a guest actually runs under it, else TCG ---------------------------
# This project's machines are themselves guests whose /dev/kvm is KVM_PVM (a nested,
# page-table-based hypervisor: `/sys/module/kvm_pvm`, no kvm_intel/kvm_amd). PVM runs only
# kernels built as PVM guests (CONFIG_PVM_GUEST, which Debian does not build); any other
# kernel's ring-0 code is emulated one instruction at a time: Debian's 6.1 image prints
# "Probing EDD" from its real-mode stub, then spends minutes in its decompressor, which TCG
# runs in about a second. No -cpu model or kernel argument changes that, so PVM means TCG.
# Elsewhere a /dev/kvm can exist yet fail a guest: probe that the kernel prints its banner.
TCG="-accel tcg,thread=multi -cpu max"
KVM="-accel kvm -cpu max,-arch-capabilities"
kvm_runs() {
  [ -w /dev/kvm ] || { why="no writable /dev/kvm"; return 1; }
  if [ -d /sys/module/kvm_pvm ] && [ ! -d /sys/module/kvm_intel ] && [ ! -d /sys/module/kvm_amd ]; then
    why="/dev/kvm is KVM_PVM, which runs only PVM guest kernels"; return 1
  fi
  timeout 20 qemu-system-x86_64 $KVM -m 256 -kernel "$VMLINUZ" \
    -append "console=ttyS0 panic=-1 rdinit=/nonexistent" -nic none -display none \
    -serial stdio -no-reboot </dev/null 2>/dev/null | grep -q "Linux version" \
    || { why="a probe guest printed nothing under KVM in 20 s"; return 1; }
}
why=""
case ${PATCHGYM_CGV2_ACCEL:-auto} in
  kvm) ACCEL=$KVM ;;
  tcg) ACCEL=$TCG; why="PATCHGYM_CGV2_ACCEL=tcg" ;;
  *) if kvm_runs; then ACCEL=$KVM; else ACCEL=$TCG; fi ;;
esac
# Under TCG: the TSC as clocksource (the default, the HPET, is an emulated MMIO read at
# every clock_gettime) and no speculation mitigations (nothing to protect in a test VM).
APPEND="console=ttyS0 quiet panic=-1 mitigations=off systemd.unified_cgroup_hierarchy=1 cgroup_no_v1=all"
[ "$ACCEL" = "$KVM" ] || APPEND="$APPEND clocksource=tsc tsc=reliable"

# -- bytecode: the guest's root is read-only, so every module that has no .pyc (uv installs
# none) would be compiled again by every guest process; compile them here, once -----------
"$PY" - <<'PYEOF'
import compileall, os, sys
base = os.path.realpath(sys.base_prefix) + os.sep
for d in sys.path:
    if d and os.path.isdir(d) and not os.path.realpath(d).startswith(base):
        compileall.compile_dir(d, quiet=2, workers=0)
PYEOF

# -- /tmp: ext4 on a sparse disk (the local backend shows templates through idmapped mounts,
# which this kernel's tmpfs lacks: tmpfs has them from Linux 6.3, ext4 from 5.12) ----------
DISK=$CACHE/tmp.img
rm -f "$DISK" && truncate -s 16G "$DISK"
mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$DISK"

# -- boot ---------------------------------------------------------------------------------
LOG=$CACHE/console.log
echo "cgroup v2 guest: $pkg, ${MEM_MB} MiB, $(nproc) vCPU, $ACCEL${why:+ ($why)}, log $LOG"
set +e
timeout "$TIMEOUT_S" qemu-system-x86_64 $ACCEL -smp "$(nproc)" -m "$MEM_MB" \
  -kernel "$VMLINUZ" -initrd "$INITRD" \
  -append "$APPEND" \
  -virtfs "local,path=/,mount_tag=host,security_model=passthrough,readonly=on,multidevs=remap" \
  -drive "file=$DISK,if=virtio,format=raw,cache=unsafe" \
  -nic none -display none -serial stdio -no-reboot </dev/null | tee "$LOG"
rm -f "$DISK"
set -e
code=$(tr -d '\r' <"$LOG" | sed -n 's/^PATCHGYM_GUEST_EXIT=\([0-9]*\)$/\1/p' | tail -1)
[ -n "$code" ] || { echo "FATAL: the guest did not report an exit status (see $LOG)" >&2; exit 3; }
exit "$code"

#!/usr/bin/env bash
# install-deps.sh -- installs what building and testing weft needs, from Debian, if it is missing.
set -euo pipefail

need=()
command -v bazel >/dev/null 2>&1 || need+=(bazel-bootstrap)
command -v g++ >/dev/null 2>&1 || need+=(g++)
# ip and tc, for the emulated multi-host tests (scripts/netns-hosts.sh, tests/netns).
{ command -v ip && command -v tc && command -v ss; } >/dev/null 2>&1 || need+=(iproute2)
# nft and iptables, for the fault matrix's loss and delay where the kernel has no netem
# (tests/netns/faults_test: an nftables random drop, an NFQUEUE to tests/netns/queue_delay).
command -v nft >/dev/null 2>&1 || need+=(nftables)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
[ -f /usr/lib/x86_64-linux-gnu/libgtest.a ] || [ -f /usr/lib/libgtest.a ] ||
  ls /usr/lib/*/libgtest.a >/dev/null 2>&1 || need+=(libgtest-dev)
# cmake and pkg-config: the install test builds a program against an installed weft with both.
command -v cmake >/dev/null 2>&1 || need+=(cmake)
command -v pkg-config >/dev/null 2>&1 || need+=(pkgconf)
# Headers of the RDMA verbs transport (libibverbs itself is loaded at run time, if present).
[ -f /usr/include/infiniband/verbs.h ] || need+=(libibverbs-dev)
# The fuzz targets (scripts/fuzz.sh): clang, and its libFuzzer and sanitizer runtimes, which
# Debian ships in libclang-rt-14-dev, only recommended by clang.
command -v clang >/dev/null 2>&1 || need+=(clang)
ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
  need+=(libclang-rt-14-dev)
# The Python package's tests (scripts/test-python.sh): Debian's torch, numpy and pytest, a venv
# that sees them, and pip to install the package into it; psutil for weft.torch.utils; setuptools
# and wheel, which build the package and its wheel without fetching a build backend.
for pkg in python3-torch python3-numpy python3-pytest python3-venv python3-pip python3-psutil \
  python3-setuptools python3-wheel; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${need[*]}" >&2
$sudo apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null

#!/usr/bin/env bash
# rdma-vm.sh -- runs a command on emulated hosts that have a real RDMA device: qemu VMs with the
# kernel's Soft-RoCE driver (rdma_rxe). See --help. The script and the guests' init live in
# scripts/rdma-vm/, a Bazel package of their own, which //tests/rdma:vm_test runs.
exec "$(dirname "${BASH_SOURCE[0]}")/rdma-vm/main.sh" "$@"

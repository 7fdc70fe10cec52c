"""cuda_backend_check.py -- the weft torch backend on CUDA tensors, run by torchrun on a machine
with a GPU (every rank on the current device): each check compares with a result computed on the
host. Prints "cuda_backend_check rank R: ok N checks" or raises. Not collected by pytest (no test_
prefix): the suite has no GPU; results/2026-11-25-torch2-cuda/ has the run on one.

    torchrun --nproc-per-node 2 python/tests/cuda_backend_check.py
"""
import copy
import os

import torch
import torch.distributed as dist

import weft.torch  # noqa: F401  registers "weft"


def main():
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("weft")
    checks = 0

    def host(values):
        return torch.tensor(values).double()

    side = torch.cuda.Stream()
    # On the legacy default stream (synchronized, then run) and on a stream of our own
    # (enqueued; the host returns at once).
    for where in ("default", "side"):
        with torch.cuda.stream(side if where == "side" else torch.cuda.current_stream()):
            count = (1 << 20) + 3
            t = torch.arange(count, device=dev, dtype=torch.float32) * (rank + 1)
            dist.all_reduce(t)
            want = torch.arange(count, dtype=torch.float64) * (n * (n + 1) / 2)
            torch.cuda.current_stream().synchronize()
            assert torch.equal(t.cpu().double(), want), f"all_reduce SUM on {where}"
            checks += 1

            b = torch.full((4097,), float(rank + 1), device=dev, dtype=torch.bfloat16)
            dist.all_reduce(b, op=dist.ReduceOp.AVG)
            m = torch.tensor([rank * 10 + 1, -rank], device=dev, dtype=torch.int64)
            dist.all_reduce(m, op=dist.ReduceOp.MAX)
            bc = torch.arange(1000, device=dev, dtype=torch.float64) + rank
            dist.broadcast(bc, src=n - 1)
            ag = torch.empty(n * 33, device=dev, dtype=torch.int32)
            dist.all_gather_into_tensor(ag, torch.full((33,), rank, device=dev, dtype=torch.int32))
            rs = torch.empty(5, device=dev, dtype=torch.float32)
            dist.reduce_scatter_tensor(rs, torch.arange(5 * n, device=dev, dtype=torch.float32))
            a2a = torch.empty(2 * n, device=dev, dtype=torch.int64)
            src = torch.arange(2 * n, device=dev, dtype=torch.int64) + 100 * rank
            dist.all_to_all_single(a2a, src)
            torch.cuda.current_stream().synchronize()
            avg = torch.tensor(sum(range(1, n + 1)) / n, dtype=torch.bfloat16).item()
            assert torch.all(b.cpu() == avg), f"bf16 AVG on {where}: {b[:4]}"
            assert m.cpu().tolist() == [(n - 1) * 10 + 1, 0], f"MAX on {where}: {m}"
            assert torch.equal(bc.cpu(), torch.arange(1000, dtype=torch.float64) + n - 1), where
            assert ag.cpu().tolist() == sum(([r] * 33 for r in range(n)), []), f"all_gather {where}"
            assert rs.cpu().tolist() == [float(n * (5 * rank + i)) for i in range(5)], where
            assert a2a.cpu().tolist() == sum(([100 * r + 2 * rank, 100 * r + 2 * rank + 1]
                                              for r in range(n)), []), f"all_to_all {where}"
            checks += 6
            if n > 1:
                x = torch.full((100000,), float(rank), device=dev)
                if rank == 0:
                    dist.send(x, 1)
                elif rank == 1:
                    dist.recv(x, 0)
                torch.cuda.current_stream().synchronize()
                if rank == 1:
                    assert torch.all(x.cpu() == 0.0), f"send/recv on {where}"
                checks += 1
                # A ring through batch_isend_irecv, too large to be buffered: every rank sends
                # to the next before receiving from the previous, which deadlocks unless the
                # backend issues the batch as one group (p2p.py's lanes).
                ring = 4 << 20
                out = torch.full((ring,), float(rank), device=dev)
                got = torch.empty(ring, device=dev)
                reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, (rank + 1) % n),
                                               dist.P2POp(dist.irecv, got, (rank - 1) % n)])
                for r in reqs:
                    r.wait()
                torch.cuda.current_stream().synchronize()
                assert torch.all(got.cpu() == float((rank - 1) % n)), f"ring on {where}"
                checks += 1

    # DDP on CUDA with weft next to DDP on CPU with gloo, same model, data and steps.
    gloo = dist.new_group(backend="gloo")
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    cpu_model = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base), process_group=gloo)
    gpu_model = torch.nn.parallel.DistributedDataParallel(copy.deepcopy(base).to(dev),
                                                          device_ids=[dev.index])
    opt_c = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    opt_g = torch.optim.SGD(gpu_model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(1 + rank)
    for _ in range(5):
        x = torch.randn(16, 32, generator=g)
        y = torch.randn(16, 8, generator=g)
        for model, opt, xd, yd in ((cpu_model, opt_c, x, y),
                                   (gpu_model, opt_g, x.to(dev), y.to(dev))):
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(xd), yd).backward()
            opt.step()
    torch.cuda.synchronize()
    for pc, pg in zip(cpu_model.parameters(), gpu_model.parameters()):
        assert torch.allclose(pc, pg.cpu(), rtol=1e-4, atol=1e-5), "DDP weights differ from gloo's"
    checks += 1
    dist.barrier()
    dist.destroy_process_group()
    print(f"cuda_backend_check rank {rank}: ok {checks} checks", flush=True)


if __name__ == "__main__":
    main()

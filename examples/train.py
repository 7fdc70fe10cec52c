"""train.py -- data-parallel training of a small classifier on CPU, gradients averaged by weft.

    weft-run -n 2 /usr/bin/python3 examples/train.py
    /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 examples/train.py
    /usr/bin/python3 examples/train.py              # one process, nothing to synchronize

Each rank reads its own shard of the data (DistributedSampler, reshuffled every epoch),
computes gradients on it, and weft.torch.utils.sync_grad averages them across the ranks before
the optimizer step, so every rank makes the same update and the models stay identical (plain
all-reduces, no DistributedDataParallel wrapper). Rank 0 saves a checkpoint; every rank loads it
back onto the CPU and checks it against its own model.
"""

import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

try:
    import weft.torch.utils as wu
except ImportError:
    # Run from a source checkout without the package installed.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import weft.torch.utils as wu


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="weft",
                   help="torch.distributed backend: weft (default), gloo, nccl")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--samples", type=int, default=1024, help="size of the whole data set")
    p.add_argument("--bucket-mb", type=float, default=1.0,
                   help="gradients travel in flat buckets of at most this size")
    p.add_argument("--out", default="checkpoints", help="folder for the data set and checkpoint")
    return p.parse_args()


def init(backend):
    """Joins the process group when started by a launcher (WORLD_SIZE set); alone, runs single."""
    if "WORLD_SIZE" not in os.environ:
        return
    if backend == "weft":
        try:
            import weft.torch  # noqa: F401 -- registers the "weft" backend with torch.distributed
        except ImportError as e:
            sys.exit("train.py: the weft backend needs the weft package (pip install ./python): "
                     "%s; or run with --backend gloo" % e)
    # Every rank waits at most this long for the others: a dead peer ends the job, not hangs it.
    dist.init_process_group(backend, init_method="env://",
                            timeout=datetime.timedelta(seconds=60))


def make_dataset(path, samples):
    """A fixed two-class problem: the label says on which side of a hidden plane a point lies.
    Written once to path, so ranks share one copy as they would a downloaded data set."""
    if not os.path.exists(path):
        g = torch.Generator().manual_seed(1234)
        x = torch.randn(samples, 16, generator=g)
        plane = torch.randn(16, generator=g)
        y = (x @ plane > 0).long()
        tmp = path + ".tmp%d" % os.getpid()
        torch.save({"x": x, "y": y}, tmp)
        os.replace(tmp, path)
    data = torch.load(path, map_location="cpu")
    return TensorDataset(data["x"], data["y"])


def model_fn():
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, 2))


def main():
    args = parse_args()
    init(args.backend)
    info = wu.get_dist_info()
    wu.print("train.py: %d rank(s), backend %s, master %s:%s" %
             (info.world_size, info.backend or "none", info.master_addr, info.master_port))
    os.makedirs(args.out, exist_ok=True)

    # The local rank 0 of each host writes the data set while the others wait, then they read it.
    with wu.zero_first():
        dataset = make_dataset(os.path.join(args.out, "dataset.pt"), args.samples)

    torch.manual_seed(wu.get_rank())  # different initial weights on purpose...
    model = model_fn()
    wu.broadcast_tensors(model)  # ...replaced by rank 0's, so every rank starts alike
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    sampler = DistributedSampler(dataset, num_replicas=wu.get_world_size(), rank=wu.get_rank(),
                                 shuffle=True, seed=0)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)
    bucket_bytes = int(args.bucket_mb * (1 << 20))

    previous_order = None
    for epoch in range(args.epochs):
        # Without set_epoch every epoch would visit the shard in the same order.
        sampler.set_epoch(epoch)
        order = list(iter(sampler))
        if previous_order is not None:
            if order == previous_order:
                sys.exit("train.py: rank %d: epoch %d visits the data in the same order as the "
                         "last one: set_epoch() has no effect" % (wu.get_rank(), epoch))
            wu.print("epoch %d: sampler order differs from epoch %d" % (epoch, epoch - 1))
        previous_order = order

        t0 = time.time()
        loss_sum, correct, seen = 0.0, 0, 0
        for x, y in loader:
            opt.zero_grad(set_to_none=True)
            out = model(x)
            loss = torch.nn.functional.cross_entropy(out, y)
            loss.backward()
            wu.sync_grad(model, bucket_bytes=bucket_bytes)
            opt.step()
            loss_sum += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            seen += len(y)
        m = wu.average_metrics({"loss": loss_sum / seen, "acc": correct / seen}, count=seen)
        wu.print("epoch %d: loss %.4f accuracy %.3f samples %d (%.2f s)" %
                 (epoch, m["loss"], m["acc"], wu.reduce_sum(seen), time.time() - t0))

    # Same updates on every rank: the models must still be identical, bit for bit.
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    rank0 = flat.clone()
    wu.broadcast_tensors([rank0])
    differing = wu.reduce_sum(int(not torch.equal(rank0, flat)))
    if differing:
        sys.exit("train.py: rank %d: the parameters of %d rank(s) differ from rank 0's" %
                 (wu.get_rank(), differing))
    wu.print("parameters identical on all %d rank(s)" % wu.get_world_size())

    path = os.path.join(args.out, "model.pt")
    if wu.is_main():
        torch.save({"model": model.state_dict(), "epochs": args.epochs, "loss": m["loss"]}, path)
        wu.print("checkpoint saved to %s" % path)
    wu.barrier()  # nobody reads the file before rank 0 has written it
    ckpt = torch.load(path, map_location="cpu")
    restored = model_fn()
    restored.load_state_dict(ckpt["model"])
    same = all(torch.equal(a, b) for a, b in zip(restored.state_dict().values(),
                                                   model.state_dict().values()))
    if not same:
        sys.exit("train.py: rank %d: the loaded checkpoint differs from the model" % wu.get_rank())
    wu.print("checkpoint loaded on the CPU, matches the model; memory %.3f GB" % wu.memory_gb(),
             all=True)

    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()

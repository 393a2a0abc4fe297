"""Every torch.distributed collective through hccl on hpu tensors, checked
exactly against values each rank can compute alone. Run under torchrun or
mpirun (any world size >= 2). Prints 'COLLECTIVES OK' on rank 0."""
import ctypes
import datetime
import os
import sys

import torch
import torch.distributed as dist

import habana_torch.core as htcore
import habana_torch.distributed.hccl as hccl

world, rank, local_rank = hccl.initialize_distributed_hpu()
dist.init_process_group("hccl", timeout=datetime.timedelta(seconds=60))
dev = torch.device("hpu", local_rank)
W = world
checks = 0


def check(name, got, want):
    global checks
    got = got.cpu() if isinstance(got, torch.Tensor) else got
    if isinstance(want, torch.Tensor):
        ok = torch.equal(got, want)
    else:
        ok = got == want
    if not ok:
        raise AssertionError(f"rank {rank}: {name}: got {got}, want {want}")
    checks += 1


def t(vals, dtype=torch.float32):
    return torch.tensor(vals, dtype=dtype).to(dev)


ranks = torch.arange(W, dtype=torch.float32)
# all_reduce, each op and several dtypes
for dtype in (torch.float32, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.float16, torch.uint8):
    x = t([rank + 1, 2 * rank + 1], dtype)
    dist.all_reduce(x)
    check(f"all_reduce sum {dtype}", x, torch.tensor([sum(r + 1 for r in range(W)), sum(2 * r + 1 for r in range(W))], dtype=dtype))
x = t([rank + 1.0]); dist.all_reduce(x, op=dist.ReduceOp.MAX); check("max", x, torch.tensor([float(W)]))
x = t([rank + 1.0]); dist.all_reduce(x, op=dist.ReduceOp.MIN); check("min", x, torch.tensor([1.0]))
x = t([rank + 1.0]); dist.all_reduce(x, op=dist.ReduceOp.PRODUCT)
check("product", x, torch.tensor([float(torch.arange(1, W + 1).prod())]))
x = t([2.0 * rank]); dist.all_reduce(x, op=dist.ReduceOp.AVG); check("avg", x, torch.tensor([float(W - 1)]))
x = t([rank + 1.0]); dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
check("premul_sum", x, torch.tensor([float(W * (W + 1))]))
x = t([rank % 2 == 0], torch.bool); dist.all_reduce(x); check("bool sum", x, torch.tensor([True]))
# (complex tensors: hpu has no complex dtype; the backend sends their real view)
# all_reduce_coalesced
xs = [t([rank * 1.0]), t([1.0, 2.0])]
dist.all_reduce_coalesced(xs)
check("coalesced 0", xs[0], torch.tensor([float(sum(range(W)))]))
check("coalesced 1", xs[1], torch.tensor([1.0 * W, 2.0 * W]))
# broadcast / reduce
x = t([rank * 10.0, 1.0]); dist.broadcast(x, src=W - 1); check("broadcast", x, torch.tensor([(W - 1) * 10.0, 1.0]))
x = t([rank + 1.0]); dist.reduce(x, dst=0)
if rank == 0:
    check("reduce", x, torch.tensor([float(W * (W + 1) // 2)]))
# all_gather / all_gather_into_tensor
outs = [t([0.0, 0.0]) for _ in range(W)]
dist.all_gather(outs, t([rank, -rank]))
for i in range(W):
    check("all_gather", outs[i], torch.tensor([float(i), float(-i)]))
out = torch.empty(W * 3, device=dev)
dist.all_gather_into_tensor(out, t([rank, rank, rank]))
check("all_gather_into_tensor", out, torch.arange(W).float().repeat_interleave(3))
out2 = torch.empty(W, 2, device=dev)
dist.all_gather_into_tensor(out2, t([[rank, 1]]))
check("all_gather_into_tensor 2d", out2, torch.stack([torch.tensor([float(i), 1.0]) for i in range(W)]))
# coalesced all_gather_into_tensor / reduce_scatter_tensor
o1, o2 = torch.empty(W, device=dev), torch.empty(2 * W, device=dev)
with dist._coalescing_manager(async_ops=True) as cm:
    dist.all_gather_into_tensor(o1, t([rank]))
    dist.all_gather_into_tensor(o2, t([rank, rank]))
cm.wait()
check("ag coalesced 1", o1, torch.arange(W).float())
check("ag coalesced 2", o2, torch.arange(W).float().repeat_interleave(2))
r1, r2 = torch.empty(1, device=dev), torch.empty(2, device=dev)
with dist._coalescing_manager(async_ops=True) as cm:
    dist.reduce_scatter_tensor(r1, t([1.0] * W))
    dist.reduce_scatter_tensor(r2, t([float(rank)] * (2 * W)))
cm.wait()
check("rs coalesced 1", r1, torch.tensor([float(W)]))
check("rs coalesced 2", r2, torch.tensor([float(sum(range(W)))] * 2))
# gather / scatter
g = [t([0.0]) for _ in range(W)] if rank == 1 else None
dist.gather(t([rank * 3.0]), g, dst=1)
if rank == 1:
    for i in range(W):
        check("gather", g[i], torch.tensor([i * 3.0]))
o = t([0.0])
dist.scatter(o, [t([i * 5.0]) for i in range(W)] if rank == 0 else None, src=0)
check("scatter", o, torch.tensor([rank * 5.0]))
# reduce_scatter (list) / reduce_scatter_tensor
o = t([0.0, 0.0])
dist.reduce_scatter(o, [t([float(i), float(rank)]) for i in range(W)])
check("reduce_scatter", o, torch.tensor([float(rank * W), float(sum(range(W)))]))
o = torch.empty(2, device=dev)
dist.reduce_scatter_tensor(o, torch.arange(2 * W, dtype=torch.float32).to(dev) + rank, op=dist.ReduceOp.MAX)
check("reduce_scatter_tensor max", o, torch.tensor([2.0 * rank + W - 1, 2.0 * rank + W]))
# all_to_all_single (equal and uneven) / all_to_all
inp = (torch.arange(W, dtype=torch.float32) + 100 * rank).to(dev)
o = torch.empty(W, device=dev)
dist.all_to_all_single(o, inp)
check("all_to_all_single", o, torch.tensor([rank + 100.0 * i for i in range(W)]))
in_splits = [i + 1 for i in range(W)]                 # rank sends i+1 rows to i
out_splits = [rank + 1] * W                           # receives rank+1 rows from each
inp = torch.full((sum(in_splits), 2), float(rank)).to(dev)
o = torch.empty(sum(out_splits), 2, device=dev)
dist.all_to_all_single(o, inp, out_splits, in_splits)
check("all_to_all_single uneven", o, torch.tensor([float(i) for i in range(W) for _ in range(rank + 1)]).unsqueeze(1).repeat(1, 2))
outs = [torch.empty(2, device=dev) for _ in range(W)]
dist.all_to_all(outs, [t([rank, i]) for i in range(W)])
for i in range(W):
    check("all_to_all", outs[i], torch.tensor([float(i), float(rank)]))
# send / recv (ring), isend/irecv, batch_isend_irecv
nxt, prv = (rank + 1) % W, (rank - 1) % W
r = t([0.0, 0.0])
if rank % 2 == 0:
    dist.send(t([rank, 7]), nxt); dist.recv(r, prv)
else:
    dist.recv(r, prv); dist.send(t([rank, 7]), nxt)
check("send/recv", r, torch.tensor([float(prv), 7.0]))
r = t([0.0])
ops = [dist.P2POp(dist.isend, t([rank * 2.0]), nxt), dist.P2POp(dist.irecv, r, prv)]
for w in dist.batch_isend_irecv(ops):
    w.wait()
check("batch_isend_irecv", r, torch.tensor([prv * 2.0]))
# async_op and futures (the tensor list DDP's comm hooks rely on)
x = t([1.0] * 4)
w = dist.all_reduce(x, async_op=True)
fut = w.get_future()
res = fut.then(lambda f: f.value()[0] * 2).wait()
w.wait()
check("async all_reduce", x, torch.tensor([float(W)] * 4))
check("future value", res, torch.tensor([2.0 * W] * 4))
check("work result", w.result()[0], torch.tensor([float(W)] * 4))
check("is_completed", w.is_completed(), True)
# ordering with compute queued on the card
a = torch.ones(256, 256, device=dev)
for _ in range(3):
    a = a @ a / 256.0 + 1
dist.all_reduce(a)
check("ordering", a, torch.full((256, 256), 26.0 * W))  # 1 -> 2 -> 5 -> 26 on every rank
dist.barrier()
# The two ways a card collective runs: a blocking call (async_op=False) on the
# calling thread once the card has run what was queued before it, and an
# async one on the card's queue, finished by wait(). Each at odd counts on
# both sides of HCCL's small-message limit (64 KB at 2 ranks, 16 KB beyond)
# and near 1 MB and 4 MB, behind compute queued on the card (a collective
# that ran before that compute would reduce the wrong values), and with
# compute queued after an async one before its wait(). Once the call (or
# wait()) returns, the result must already be in the card's memory: read
# there without the synchronize that .cpu() does.
def in_memory(x):
    buf = (ctypes.c_char * (x.numel() * x.element_size())).from_address(x.data_ptr())
    return torch.frombuffer(buf, dtype=x.dtype).clone()


for n in (1, 4095, 16383, 16385, 262143, 1048577):
    pattern = (torch.arange(n, dtype=torch.float32) % 7) + 1  # small integers: exact in float32
    want = pattern * float(W * (W + 1) // 2)
    base = pattern.to(dev)
    x = base * 0.0 + (rank + 1) * base  # queued on the card, not yet run
    dist.all_reduce(x)
    check(f"blocking all_reduce done on return n={n}", in_memory(x), want)
    check(f"blocking all_reduce n={n}", x, want)
    x = base * float(rank + 1)
    w = dist.all_reduce(x, async_op=True)
    after = x * 2.0  # queued behind the collective: must see its result
    w.wait()
    check(f"async all_reduce done after wait n={n}", in_memory(x), want)
    check(f"async all_reduce + wait n={n}", x, want)
    check(f"async all_reduce is_completed n={n}", w.is_completed(), True)
    check(f"compute queued after an async all_reduce n={n}", after, want * 2.0)
    y = base * float(rank + 1)
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    check(f"blocking all_reduce max n={n}", y, pattern * float(W))
    b = base * float(rank + 1)
    dist.broadcast(b, src=W - 1)
    check(f"blocking broadcast n={n}", b, pattern * float(W))
    h = (base * float(rank + 1)).to(torch.bfloat16)
    dist.all_reduce(h)
    check(f"blocking all_reduce bf16 n={n}", h, want.to(torch.bfloat16))
# object collectives
objs = [None] * W
dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
check("all_gather_object", objs, [{"rank": i, "s": "x" * i} for i in range(W)])
lst = [f"obj{rank}", rank] if rank == 0 else [None, None]
dist.broadcast_object_list(lst, src=0)
check("broadcast_object_list", lst, ["obj0", 0])
g = [None] * W if rank == 0 else None
dist.gather_object(("r", rank), g, dst=0)
if rank == 0:
    check("gather_object", g, [("r", i) for i in range(W)])
o = [None]
dist.scatter_object_list(o, [i * 11 for i in range(W)] if rank == 0 else None, src=0)
check("scatter_object_list", o[0], rank * 11)
# sub-groups (new_group), members only
if W >= 2:
    import habana_torch.distributed.hccl as _hccl
    splits0 = _hccl._splits_done
    sub = dist.new_group([0, 1])
    if rank in (0, 1):
        x = t([rank + 1.0]); dist.all_reduce(x, group=sub); check("subgroup", x, torch.tensor([3.0]))
        check("subgroup size", dist.get_world_size(sub), 2)
    # a second group, ranks in reverse order (group rank = position), a
    # large all_reduce (the zero-copy path) on it
    rev = list(range(W))[::-1][:max(2, W - 1)]
    sub2 = dist.new_group(rev, sort_ranks=False) if W > 2 else dist.new_group([1, 0], sort_ranks=False)
    members2 = rev if W > 2 else [1, 0]
    if rank in members2:
        check("subgroup rank order", dist.get_rank(sub2), members2.index(rank))
        n = (1 << 20) + 3
        x = torch.full((n,), float(rank + 1)).to(dev)
        dist.all_reduce(x, group=sub2)
        check("subgroup large", x.cpu(), torch.full((n,), float(sum(r + 1 for r in members2))))
    # new_group went through hcclCommSplit on every rank, members or not
    check("new_group via hcclCommSplit", _hccl._splits_done - splits0, 2)
    dist.barrier()
# bad input -> clear Python exceptions (checked on every rank, no communication)
bad = [
    ("non-contiguous", lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t()), ValueError),
    ("BAND", lambda: dist.all_reduce(t([1], torch.int32), op=dist.ReduceOp.BAND), ValueError),
    ("all_gather size", lambda: dist.all_gather_into_tensor(torch.empty(W + 1, device=dev), t([1.0])), ValueError),
    ("list length", lambda: dist.all_gather([t([0.0])], t([1.0])) if W > 1 else None, ValueError),
]
for name, fn, exc in bad:
    try:
        fn()
    except exc as e:
        assert "hccl" in str(e) or "must" in str(e) or "Tensor" in str(e), (name, str(e))
        checks += 1
    else:
        raise AssertionError(f"{name}: no {exc.__name__} raised")
dist.barrier()
dist.destroy_process_group()
if rank == 0:
    print(f"COLLECTIVES OK world={W} checks={checks} lazy={int(htcore.is_lazy())}", flush=True)

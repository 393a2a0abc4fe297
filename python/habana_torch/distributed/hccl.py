"""The ``hccl`` process-group backend for ``hpu`` tensors.

As ``habana_frameworks.torch.distributed.hccl`` on Gaudi::

    import torch, torch.distributed as dist
    import habana_torch.distributed.hccl           # registers "hccl" for hpu
    world_size, rank, local_rank = habana_torch.distributed.hccl.initialize_distributed_hpu()
    dist.init_process_group("hccl")
    model = torch.nn.parallel.DistributedDataParallel(model.to(torch.device("hpu", local_rank)))

Launch with ``torchrun --nproc_per_node=N``, ``mpirun -np N`` (the
``OMPI_COMM_WORLD_*`` variables are mapped to ``RANK``/``WORLD_SIZE``/
``LOCAL_RANK``) or ``python -m habana_torch.distributed.launch``.

Cards: each process takes its own card (``LOCAL_RANK``). As on Gaudi a card
is held by one process at a time: the backend (and
``initialize_distributed_hpu``) takes an exclusive lock on the card and a
second process asking for it gets an error naming the holder. The lock is a
``flock`` on ``$PT_HPU_CARD_LOCK_DIR/habana_torch-card-<physical id>.lock``
(default directory: ``habana_torch-<uid>`` in the system temp dir, private
to the user: created 0700, refused if it is a symbolic link or belongs to
someone else), released when the process exits, whatever way it exits. The
lock file is opened without following symbolic links and created 0600. ``PT_HPU_SHARE_CARDS=1`` lets processes share cards
(test runners, notebooks). Plain single-process use of ``hpu`` takes no lock.

The process-group timeout (``init_process_group(timeout=...)``) becomes
HCCL's communicator timeout: a dead or stuck rank turns into a
``torch.distributed.DistBackendError`` on the others within it.
"""
import datetime
import errno
import fcntl
import os
import stat
import tempfile

import torch
import torch.distributed as dist

import habana_torch
from habana_torch import _C

__all__ = ["initialize_distributed_hpu", "acquire_card", "HCCL_VERSION"]

HCCL_VERSION = _C._hccl_version() if hasattr(_C, "_hccl_version") else 0

_held_cards = {}  # physical id -> open lock file (kept open for the process' life)


def _env_flag(name):
    return os.environ.get(name, "0").strip().lower() in ("1", "true", "yes", "on")


def _map_launcher_env():
    """Maps mpirun's (Open MPI's) variables to torch.distributed's, as Gaudi's module does."""
    env = os.environ
    if "OMPI_COMM_WORLD_SIZE" in env:
        env.setdefault("WORLD_SIZE", env["OMPI_COMM_WORLD_SIZE"])
        env.setdefault("RANK", env["OMPI_COMM_WORLD_RANK"])
        env.setdefault("LOCAL_RANK", env.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
        env.setdefault("LOCAL_WORLD_SIZE", env.get("OMPI_COMM_WORLD_LOCAL_SIZE", env["OMPI_COMM_WORLD_SIZE"]))
    elif "PMI_SIZE" in env and "PMI_RANK" in env:  # MPICH / Intel MPI
        env.setdefault("WORLD_SIZE", env["PMI_SIZE"])
        env.setdefault("RANK", env["PMI_RANK"])
        env.setdefault("LOCAL_RANK", env.get("MPI_LOCALRANKID", "0"))
    if "WORLD_SIZE" in env:
        env.setdefault("MASTER_ADDR", "localhost")
        env.setdefault("MASTER_PORT", "12355")


def _lock_dir():
    """PT_HPU_CARD_LOCK_DIR (created 0700 if missing), else a per-user
    directory in the temp dir: a shared, predictable path there would let
    another user plant the lock files (or links in their place)."""
    chosen = os.environ.get("PT_HPU_CARD_LOCK_DIR")
    if chosen:
        os.makedirs(chosen, mode=0o700, exist_ok=True)
        return chosen
    uid = os.getuid()
    path = os.path.join(tempfile.gettempdir(), f"habana_torch-{uid}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != uid:
        what = "a symbolic link" if stat.S_ISLNK(st.st_mode) else (
            "not a directory" if not stat.S_ISDIR(st.st_mode) else f"owned by uid {st.st_uid}")
        raise RuntimeError(
            f"card lock directory {path} is {what}, not a private directory of uid {uid}: refusing "
            f"to use it. Remove it, or set PT_HPU_CARD_LOCK_DIR to a directory of your own")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)  # ours, but opened up: only we may create locks in it
    return path


def _open_lock_file(path):
    """The lock file, opened read-write without following a symbolic link
    (created 0600)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise RuntimeError(f"card lock file {path} is a symbolic link: refusing to follow it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RuntimeError(f"card lock file {path} is not a regular file: refusing it")
    return os.fdopen(fd, "r+")


def acquire_card(device=None):
    """Takes the card behind ``hpu:device`` for this process (see the module doc).

    Returns the physical card id. Raises RuntimeError naming the holder when
    another process has it, unless PT_HPU_SHARE_CARDS=1.
    """
    _C._init()
    if device is None:
        device = torch.hpu.current_device()
    device = torch.device("hpu", device).index if not isinstance(device, int) else device
    _C._check_device(device)
    physical = int(_C._device_properties(device)[1])
    if _env_flag("PT_HPU_SHARE_CARDS") or physical in _held_cards:
        return physical
    path = os.path.join(_lock_dir(), f"habana_torch-card-{physical}.lock")
    f = _open_lock_file(path)
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            f.close()
            raise
        f.seek(0)
        holder = f.read().strip() or "another process"
        f.close()
        raise RuntimeError(
            f"hpu:{device} (physical card {physical}) is in use by {holder}; a card is acquired by one "
            f"process at a time. Give each process its own card (LOCAL_RANK, or HABANA_VISIBLE_DEVICES / HABANA_VISIBLE_MODULES), "
            f"or set PT_HPU_SHARE_CARDS=1 to share cards (lock file: {path})") from None
    f.seek(0)
    f.truncate()
    try:
        with open(f"/proc/{os.getpid()}/cmdline", "rb") as c:
            cmd = c.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = ""
    f.write(f"process {os.getpid()} ({cmd[:200]})\n")
    f.flush()
    _held_cards[physical] = f
    return physical


def _rank_arg(name, value, env_name, default):
    """An argument of initialize_distributed_hpu: the given int, or (None or
    negative) the launcher's variable."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"initialize_distributed_hpu: {name} must be an int or None, not {type(value).__name__}")
    if value is not None and value >= 0:
        return value
    raw = os.environ.get(env_name, str(default))
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"initialize_distributed_hpu: {env_name}={raw!r} is not an integer") from None


def initialize_distributed_hpu(world_size=None, rank=None, local_rank=None):
    """Reads the launcher's variables (torchrun's, or mpirun's mapped to them),
    selects this process' card (``hpu:LOCAL_RANK``) and acquires it. An
    argument given (not None) replaces the variable.

    Returns ``(world_size, rank, local_rank)``; ``(1, 0, 0)`` outside a launcher.
    """
    _map_launcher_env()
    env = os.environ
    world_size = _rank_arg("world_size", world_size, "WORLD_SIZE", 1)
    rank = _rank_arg("rank", rank, "RANK", 0)
    local_rank = _rank_arg("local_rank", local_rank, "LOCAL_RANK", 0)
    env.setdefault("WORLD_SIZE", str(world_size))
    env.setdefault("RANK", str(rank))
    env.setdefault("LOCAL_RANK", str(local_rank))
    n = torch.hpu.device_count()
    if local_rank >= n:
        raise RuntimeError(f"LOCAL_RANK {local_rank} needs {local_rank + 1} cards, but {n} are visible "
                           f"(HPU_NUM_CARDS / HABANA_VISIBLE_MODULES / HABANA_VISIBLE_DEVICES)")
    torch.hpu.set_device(local_rank)
    if world_size > 1:
        acquire_card(local_rank)
    return world_size, rank, local_rank


def _backend_device():
    # The card set by initialize_distributed_hpu / torch.hpu.set_device; a
    # process that never chose one takes hpu:LOCAL_RANK.
    env = os.environ
    if "LOCAL_RANK" in env and torch.hpu.current_device() == 0:
        return int(env["LOCAL_RANK"]) % max(torch.hpu.device_count(), 1)
    return torch.hpu.current_device()


def _timeout_ms(timeout):
    if timeout is None:
        return 30 * 60 * 1000
    if isinstance(timeout, datetime.timedelta):
        return max(1, int(timeout.total_seconds() * 1000))
    return max(1, int(float(timeout) * 1000))


# new_group through hcclCommSplit. torch.distributed only splits NCCL
# communicators, and it calls a plugin's creator on the new group's members
# only, while a split is collective over every rank of the parent. So
# new_group is wrapped: every rank of the default group splits the default
# group's hccl communicator first (members with one color, the others with
# none), in the same order everywhere since new_group must be called by
# every rank; the creator then picks up the split backend for its ranks.
# Anything else (use_local_synchronization=True, no hccl default group, an
# explicit non-hccl backend) keeps the store-based initialisation.
_split_ready = {}  # tuple(global ranks, group order) -> [split backends, in call order]
_splits_done = 0  # hcclCommSplit calls made for new_group (tests check the path is taken)


def _default_hccl_backend():
    if not dist.is_initialized():
        return None
    try:
        be = dist.distributed_c10d._get_default_group()._get_backend(torch.device("hpu"))
    except RuntimeError:
        return None
    return be if _C._hccl_backend_device(be) >= 0 else None


def _wants_hccl(backend):
    if backend is None:
        return True
    b = str(backend).lower()
    return b == "hccl" or "hpu:hccl" in b.replace(" ", "")


def _split_for_new_group(ranks, backend, use_local_synchronization, sort_ranks):
    parent = _default_hccl_backend()
    if parent is None or use_local_synchronization or not _wants_hccl(backend) or ranks is None:
        return
    world = dist.get_world_size()
    members = [int(r) for r in ranks]
    if sort_ranks:
        members.sort()
    if not members or len(set(members)) != len(members) or any(r < 0 or r >= world for r in members):
        return  # torch raises
    global _splits_done
    _splits_done += 1
    me = dist.get_rank()
    if me in members:
        b = _C._hccl_split_backend(parent, 0, me, members.index(me), len(members))
        _split_ready.setdefault(tuple(members), []).append(b)  # group rank = index, as torch numbers it
    else:
        _C._hccl_split_backend(parent, -1, me, -1, 0)


def _wrap_new_group():
    orig = dist.distributed_c10d.new_group
    if getattr(orig, "_hccl_split", False):
        return

    def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
                  group_desc=None, device_id=None, **kwargs):
        _split_for_new_group(ranks, backend, use_local_synchronization, kwargs.get("sort_ranks", True))
        return orig(ranks=ranks, timeout=timeout, backend=backend, pg_options=pg_options,
                    use_local_synchronization=use_local_synchronization, group_desc=group_desc,
                    device_id=device_id, **kwargs)

    new_group.__doc__ = orig.__doc__
    new_group.__wrapped__ = orig
    new_group._hccl_split = True
    dist.distributed_c10d.new_group = new_group
    dist.new_group = new_group


def _create_backend(dist_opts, pg_opts):
    """c10d's creator (extended API): one HCCL communicator per group. A
    sub-group prepared by new_group's split takes that communicator;
    otherwise the unique id travels through the group's store."""
    members = tuple(getattr(dist_opts, "global_ranks_in_group", None) or ())
    ready = _split_ready.get(members)
    if ready:
        b = ready.pop(0)
        if not ready:
            del _split_ready[members]
        if dist_opts.timeout is not None:
            b.set_timeout(dist_opts.timeout)
        return b
    device = _backend_device()
    _C._check_device(device)
    torch.hpu.set_device(device)
    acquire_card(device)
    return _C._hccl_create_backend(dist_opts.store, dist_opts.group_rank, dist_opts.group_size,
                                   _timeout_ms(dist_opts.timeout), device)


if hasattr(_C, "_hccl_create_backend") and "HCCL" not in dist.Backend._plugins:
    dist.Backend.register_backend("hccl", _create_backend, extended_api=True, devices=["hpu"])
    if hasattr(_C, "_hccl_split_backend"):
        _wrap_new_group()

"""Starts a training script on N hpu ranks, with the options Gaudi users know
from optimum-habana's ``gaudi_spawn.py``::

    python -m habana_torch.distributed.launch --world_size 4 train.py --epochs 1
    python -m habana_torch.distributed.launch --world_size 4 --use_mpi train.py
    python -m habana_torch.distributed.launch --world_size 4 --use_mpi --hostfile hosts train.py

Without ``--use_mpi`` it runs ``torchrun --nproc_per_node=world_size``
(one host). With ``--use_mpi`` it runs ``mpirun -n world_size`` (hosts from
``--hostfile``); the script's ``initialize_distributed_hpu()`` maps
``OMPI_COMM_WORLD_*`` to ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``. Either way
``MASTER_ADDR``/``MASTER_PORT`` are set for the ranks. ``--dry_run`` prints
the command instead of running it.
"""
import argparse
import os
import shlex
import subprocess
import sys


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world_size", type=int, default=1, help="number of ranks (processes, one card each)")
    p.add_argument("--use_mpi", action="store_true", help="launch with mpirun instead of torchrun")
    p.add_argument("--use_deepspeed", action="store_true", help="not supported here (kept for compatibility)")
    p.add_argument("--hostfile", default=None, help="MPI hostfile (with --use_mpi)")
    p.add_argument("--master_addr", default=None, help="address of rank 0 (default: localhost / first host)")
    p.add_argument("--master_port", type=int, default=29500, help="port of the rendezvous store (default 29500)")
    p.add_argument("--mpi_args", default="", help="extra mpirun arguments")
    p.add_argument("--dry_run", action="store_true", help="print the command and exit")
    p.add_argument("training_script", help="the script to run on every rank")
    p.add_argument("training_script_args", nargs=argparse.REMAINDER)
    return p.parse_args(argv)


def _first_host(hostfile):
    with open(hostfile) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                return line.split()[0]
    raise SystemExit(f"hostfile {hostfile} lists no host")


def build_command(args):
    if args.world_size < 1:
        raise SystemExit("--world_size must be >= 1")
    if args.use_deepspeed:
        raise SystemExit("--use_deepspeed is not supported by habana_torch; use --use_mpi or the default torchrun")
    if args.hostfile and not args.use_mpi:
        raise SystemExit("--hostfile needs --use_mpi (torchrun starts ranks on this host only)")
    script = [sys.executable, "-u", args.training_script] + list(args.training_script_args)
    env = {}
    if not args.use_mpi:
        addr = args.master_addr or "127.0.0.1"
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.world_size}",
               f"--master_addr={addr}", f"--master_port={args.master_port}",
               args.training_script] + list(args.training_script_args)
        return cmd, env
    addr = args.master_addr or (_first_host(args.hostfile) if args.hostfile else "127.0.0.1")
    env = {"MASTER_ADDR": addr, "MASTER_PORT": str(args.master_port)}
    cmd = ["mpirun", "-n", str(args.world_size), "--bind-to", "none", "--map-by", "slot"]
    if os.geteuid() == 0:
        cmd += ["--allow-run-as-root"]
    cmd += ["--oversubscribe"]
    if args.hostfile:
        cmd += ["--hostfile", args.hostfile]
    for name in ["MASTER_ADDR", "MASTER_PORT", "PYTHONPATH", "PATH", "LD_LIBRARY_PATH"] + sorted(
            k for k in os.environ if k.startswith(("PT_HPU_", "HPU_", "HABANA_", "HCCL_", "OMP_")) and "=" not in k):
        if name in env or name in os.environ:
            cmd += ["-x", name]
    cmd += shlex.split(args.mpi_args) + script
    return cmd, env


def main(argv=None):
    args = parse_args(argv)
    cmd, env = build_command(args)
    if args.dry_run:
        print(" ".join(shlex.quote(c) for c in cmd))
        return 0
    full_env = dict(os.environ)
    full_env.update(env)
    return subprocess.call(cmd, env=full_env)


if __name__ == "__main__":
    sys.exit(main())

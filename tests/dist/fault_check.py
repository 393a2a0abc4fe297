"""Starts fault_worker.py on N ranks as separate processes (not torchrun,
whose agent would tear the survivors down itself), lets the last rank
SIGKILL itself during DDP training, and checks that every survivor raised
within the process-group timeout and that no shared memory is left behind.
Prints 'FAULT CHECK OK'."""
import os
import subprocess
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))


def shm():
    try:
        return {f for f in os.listdir("/dev/shm") if "hccl" in f.lower() or "hpu" in f.lower()}
    except OSError:
        return set()


def main():
    world = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    timeout_s = float(os.environ.get("FAULT_TIMEOUT_S", "10"))
    before = shm()
    port = os.environ.get("MASTER_PORT", "29555")
    procs = []
    for r in range(world):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port, FAULT_TIMEOUT_S=str(timeout_s))
        procs.append(subprocess.Popen([sys.executable, os.path.join(here, "fault_worker.py")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    t0 = time.time()
    outs = []
    ok = True
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=timeout_s + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += "\n(HUNG: killed by the checker)"
            ok = False
        outs.append(out)
        lines = [l for l in out.splitlines() if l.startswith("FAULT")]
        if r == world - 1:
            print(f"rank {r}: exit {p.returncode} (the victim, SIGKILL expected)")
            ok &= p.returncode == -9
        else:
            print(f"rank {r}: exit {p.returncode}: {lines[-1] if lines else out[-600:]}")
            ok &= p.returncode == 0 and bool(lines) and lines[-1].startswith("FAULT OK")
    time.sleep(0.5)
    left = shm() - before
    print(f"all ranks gone after {time.time() - t0:.1f}s; new /dev/shm entries: {sorted(left) or 'none'}")
    ok &= not left
    print("FAULT CHECK OK" if ok else "FAULT CHECK FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""A card is held by one process at a time: a second process asking for the
same card gets an error naming the holder; PT_HPU_SHARE_CARDS=1 allows
sharing; the lock goes away with its process. Prints 'CARD LOCK OK'."""
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import os, sys, time
import habana_torch.distributed.hccl as h
os.environ.update(WORLD_SIZE="2", RANK=sys.argv[1], LOCAL_RANK="0")
try:
    h.initialize_distributed_hpu()
except RuntimeError as e:
    print("REFUSED:", e, flush=True)
    sys.exit(3)
print("ACQUIRED", flush=True)
time.sleep(float(sys.argv[2]))
"""


def main():
    lock_dir = tempfile.mkdtemp(prefix="hpu-card-locks-")
    env = dict(os.environ, PT_HPU_CARD_LOCK_DIR=lock_dir)
    env.pop("PT_HPU_SHARE_CARDS", None)
    holder = subprocess.Popen([sys.executable, "-c", CHILD, "0", "30"], env=env, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "ACQUIRED"
    second = subprocess.run([sys.executable, "-c", CHILD, "1", "0"], env=env, capture_output=True, text=True)
    assert second.returncode == 3, second
    assert f"process {holder.pid}" in second.stdout and "PT_HPU_SHARE_CARDS" in second.stdout, second.stdout
    print("refused as expected:", second.stdout.strip()[:200])
    shared = subprocess.run([sys.executable, "-c", CHILD, "1", "0"], env=dict(env, PT_HPU_SHARE_CARDS="1"),
                            capture_output=True, text=True)
    assert shared.returncode == 0 and "ACQUIRED" in shared.stdout, shared
    holder.kill()
    holder.wait()
    again = subprocess.run([sys.executable, "-c", CHILD, "1", "0"], env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "ACQUIRED" in again.stdout, again
    print("CARD LOCK OK")


if __name__ == "__main__":
    main()

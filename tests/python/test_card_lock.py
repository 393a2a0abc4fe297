"""The card lock files live in a private per-user directory (the temp dir's
habana_torch-<uid>, created 0700) and are opened without following links:
a directory or a lock file planted as a symbolic link (by another user, in
a shared /tmp) is refused, and nothing is written through it."""
import os

from conftest import run_python

ACQUIRE = """
    import habana_torch.distributed.hccl as h
    try:
        print("CARD", h.acquire_card(0))
    except RuntimeError as e:
        print("REFUSED", e)
"""


def env_for(tmp):
    env = {k: v for k, v in os.environ.items() if k not in ("PT_HPU_CARD_LOCK_DIR", "PT_HPU_SHARE_CARDS")}
    return {**env, "TMPDIR": str(tmp)}


def test_default_lock_dir_is_private(tmp_path):
    r = run_python(ACQUIRE, env=env_for(tmp_path))
    assert r.stdout.startswith("CARD 0"), r.stdout + r.stderr[-2000:]
    d = tmp_path / f"habana_torch-{os.getuid()}"
    assert d.is_dir() and not d.is_symlink() and (d.stat().st_mode & 0o777) == 0o700
    lock = d / "habana_torch-card-0.lock"
    assert (lock.stat().st_mode & 0o777) == 0o600
    assert lock.read_text().startswith("process ")


def test_linked_lock_dir_is_refused(tmp_path):
    target = tmp_path / "someone-elses"
    target.mkdir()
    os.symlink(target, tmp_path / f"habana_torch-{os.getuid()}")
    r = run_python(ACQUIRE, env=env_for(tmp_path))
    assert r.stdout.startswith("REFUSED") and "symbolic link" in r.stdout, r.stdout + r.stderr[-2000:]
    assert list(target.iterdir()) == []


def test_linked_lock_file_is_not_followed(tmp_path):
    d = tmp_path / f"habana_torch-{os.getuid()}"
    d.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, d / "habana_torch-card-0.lock")
    r = run_python(ACQUIRE, env=env_for(tmp_path))
    assert r.stdout.startswith("REFUSED") and "symbolic link" in r.stdout, r.stdout + r.stderr[-2000:]
    assert victim.read_text() == "keep"

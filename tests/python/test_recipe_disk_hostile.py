"""The on-disk recipe cache (PT_HPU_RECIPE_CACHE_CONFIG) treats its files as
untrusted data. One process compiles a small lazy graph (two fusion groups
around a floor division, which does not fuse) and stores its recipe; the
test then damages the stored file in many ways (truncated, bit flips at a
seeded sample of positions, a resealed plan whose element count, member
count or node index is past the real graph, a group starting at the node
that does not fuse, a symbolic link). A second process loads each variant
from disk (its in-memory cache cleared each time): every one must be
refused and counted (DiskRejected), named on stderr, compiled again, and the
result must equal the CPU's, bit for bit."""
import json
import os
import random
import struct

from conftest import run_python

HEADER = struct.Struct("<QIIQQiiiiQ")  # magic, version, nodes, hash, sig_len, groups, fused, dropped, group size, sum
GROUP = struct.Struct("<iiq128s32siiq")  # first, count, numel, src[32][4], store[32], rows_node, feeder, row_len
FNV_BASIS, FNV_PRIME = 1469598103934665603, 1099511628211

GRAPH = """
    import json, os, shutil, sys, torch, habana_torch
    from habana_torch import _C
    from habana_torch.hpu.metrics import metric_global
    torch.manual_seed(0)
    xc, yc = torch.randn(64, 256), torch.randn(64, 256)

    def step(x, y):
        h = (x * 0.5 + y).relu()                     # group 0
        f = torch.div(h, 3, rounding_mode="floor")   # alone: does not fuse
        return (f * 0.25 - y) * y                    # group 1

    want = step(xc, yc)
    x, y = xc.to("hpu"), yc.to("hpu")
    torch.hpu.synchronize()

    def disk():
        c = dict(metric_global("recipe_cache").stats())
        return c["DiskHits"], c["DiskRejected"]
"""

STORE = GRAPH + """
    got = step(x, y).cpu()
    print(json.dumps({"equal": torch.equal(got, want), "disk": disk()}))
"""

# Runs each variant directory's files in place of the cache's, from disk.
LOAD = GRAPH + """
    cache, variants = os.environ["RECIPE_TEST_CACHE"], os.environ["RECIPE_TEST_VARIANTS"]
    for name in sorted(os.listdir(variants)):
        for f in os.listdir(variants + "/" + name):
            dst = cache + "/" + f
            if os.path.lexists(dst):
                os.unlink(dst)
            src = variants + "/" + name + "/" + f
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            else:
                shutil.copyfile(src, dst)
        _C._recipe_cache_clear()          # the next lookup goes to disk
        before = disk()
        print(f"variant {name}", file=sys.stderr, flush=True)
        got = step(x, y).cpu()
        after = disk()
        print(json.dumps({"name": name, "equal": torch.equal(got, want),
                          "hits": after[0] - before[0], "rejected": after[1] - before[1]}), flush=True)
"""


def fnv(h, data):
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def reseal(data):
    """Recomputes the checksum, as someone crafting a file would."""
    h = list(HEADER.unpack_from(data))
    h[-1] = 0
    head = HEADER.pack(*h)
    h[-1] = fnv(fnv(FNV_BASIS, head), data[HEADER.size:])
    return HEADER.pack(*h) + bytes(data[HEADER.size:])


class Recipe:
    def __init__(self, data):
        self.data = bytearray(data)
        (_, self.version, self.n, _, self.sig_len, self.ngroups, _, _, self.group_size, _) = HEADER.unpack_from(data)
        self.group_of_at = HEADER.size + 8 * self.sig_len
        self.groups_at = self.group_of_at + 4 * self.n

    def group(self, g):
        return list(GROUP.unpack_from(self.data, self.groups_at + g * GROUP.size))

    def edited(self, groups=None, group_of=None):
        d = bytearray(self.data)
        for g, fields in (groups or {}).items():
            GROUP.pack_into(d, self.groups_at + g * GROUP.size, *fields)
        for i, v in (group_of or {}).items():
            struct.pack_into("<i", d, self.group_of_at + 4 * i, v)
        return reseal(d)


def run(code, env, timeout=300):
    r = run_python(code, env=env, timeout=timeout)
    assert r.returncode == 0, r.stderr[-4000:]
    return r


def test_hostile_recipe_files_are_refused_and_results_stay_right(tmp_path):
    cache = tmp_path / "recipes"
    env = {"PT_HPU_LAZY_MODE": "1", "PT_HPU_RECIPE_CACHE_CONFIG": str(cache)}
    first = json.loads(run(STORE, env).stdout.splitlines()[-1])
    assert first["equal"] and first["disk"] == [0, 0], first
    assert (cache.stat().st_mode & 0o777) == 0o700  # created private

    # The recipe of the step: the file whose plan has the two groups.
    files = {f.name: f.read_bytes() for f in cache.glob("*.recipe")}
    main = [name for name, data in files.items() if Recipe(data).ngroups == 2]
    assert len(main) == 1, {n: Recipe(d).ngroups for n, d in files.items()}
    name = main[0]
    rec = Recipe(files[name])
    assert rec.version == 11 and rec.group_size == GROUP.size
    g0, g1 = rec.group(0), rec.group(1)
    lone = g0[0] + g0[1]  # the floor division, between the groups
    assert g1[0] == lone + 1 and struct.unpack_from("<i", rec.data, rec.group_of_at + 4 * lone)[0] == -1

    variants = {"pristine": files[name]}
    data = files[name]
    for cut in (0, 40, HEADER.size, len(data) // 2, len(data) - 1):
        variants[f"truncated-{cut}"] = data[:cut]
    rnd = random.Random(28)
    for pos in sorted(rnd.sample(range(len(data)), min(300, len(data)))):
        flipped = bytearray(data)
        flipped[pos] ^= 1 << rnd.randrange(8)
        variants[f"flip-{pos:05d}"] = bytes(flipped)
    big = list(g0)
    big[2] *= 4                                   # numel past the tensors
    variants["numel-past-tensor"] = rec.edited({0: big})
    many = list(g1)
    many[1] = 40                                  # members past the graph's end
    variants["count-past-end"] = rec.edited({1: many})
    far = list(g1)
    far[0] = rec.n + 10                           # a node index past the graph
    variants["index-past-end"] = rec.edited({1: far})
    variants["group-of-past-groups"] = rec.edited(group_of={0: 50})
    nf = list(g1)
    nf[0], nf[1] = lone, g1[1] + 1                # the floor division joins group 1
    variants["non-fusible-member"] = rec.edited({1: nf}, group_of={lone: 1})

    vdir = tmp_path / "variants"
    for i, (vname, vdata) in enumerate(variants.items()):
        d = vdir / f"{i:04d}-{vname}"
        d.mkdir(parents=True)
        (d / name).write_bytes(vdata)
    elsewhere = tmp_path / "elsewhere.recipe"  # a valid recipe, behind a link
    elsewhere.write_bytes(data)
    d = vdir / f"{len(variants):04d}-symlink"
    d.mkdir()
    os.symlink(elsewhere, d / name)
    # last: the pristine file again, proving the setup reads the disk
    d = vdir / f"{len(variants) + 1:04d}-pristine-again"
    d.mkdir()
    (d / name).write_bytes(data)

    r = run(LOAD, {**env, "RECIPE_TEST_CACHE": str(cache), "RECIPE_TEST_VARIANTS": str(vdir)})
    results = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(variants) + 2
    logged = {}
    for chunk in r.stderr.split("variant ")[1:]:
        vname, _, text = chunk.partition("\n")
        logged[vname] = text
    for res in results:
        vname = res["name"]
        assert res["equal"], res                                   # the CPU's result, always
        if "pristine" in vname:
            assert (res["hits"], res["rejected"]) == (1, 0), res  # loaded from disk, trusted
            continue
        assert (res["hits"], res["rejected"]) == (0, 1), res      # refused, counted
        line = [ln for ln in logged[vname].splitlines() if "recipe cache: ignoring" in ln]
        assert len(line) == 1 and str(cache / name) in line[0], (vname, logged[vname][-500:])
    reasons = {res["name"].split("-", 1)[1]: logged[res["name"]] for res in results}
    assert "element count" in reasons["numel-past-tensor"]
    assert "does not fuse" in reasons["non-fusible-member"]
    assert "symbolic link" in reasons["symlink"]

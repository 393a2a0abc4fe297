"""Draws a Chrome trace from torch.profiler (export_chrome_trace) as lanes,
Perfetto-style, into a PNG: the host threads' ops on top (nesting depth up
to --depth), then each card's engine lanes (HPU <n>: MME, TPC, DMA, HCCL),
with the flow arrows from host ops to the device events they launched.

    python scripts/render_trace.py trace.json out.png [--start-us A] [--end-us B] [--depth 2]

Times are microseconds from the first event drawn. Needs matplotlib.
"""
import argparse
import json

LANE_COLORS = {"MME": "#3b6fb6", "TPC": "#e08a2c", "DMA": "#3a9a5b", "HCCL": "#c0392b"}
HOST_COLOR = "#9aa3ad"


def load(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    procs = {}
    for e in events:  # the last process_name wins, as in the viewers
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e["pid"]] = e["args"]["name"]
    slices = [e for e in events if e.get("ph") == "X" and "dur" in e]
    flows = {}
    for e in events:
        if e.get("ph") in ("s", "f") and e.get("cat") == "ac2g":
            flows.setdefault(e["id"], {})[e["ph"]] = e
    return slices, names, procs, flows


def host_rows(slices, cards, depth):
    """(pid, tid, level) -> slices, nesting levels by containment per thread."""
    rows = {}
    by_thread = {}
    for e in slices:
        if e["pid"] in cards or e.get("cat") not in ("cpu_op", "user_annotation", "python_function"):
            continue
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, evs in by_thread.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            level = len(stack)
            stack.append(e["ts"] + e["dur"])
            if level < depth:
                rows.setdefault((key[0], key[1], level), []).append(e)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--start-us", type=float, default=None)
    ap.add_argument("--end-us", type=float, default=None)
    ap.add_argument("--depth", type=int, default=2, help="host op nesting levels drawn")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    slices, names, procs, flows = load(args.trace)
    cards = sorted(pid for pid, name in procs.items() if name.startswith("HPU "))
    device = [e for e in slices if e["pid"] in cards]
    if not device:
        raise SystemExit(f"{args.trace}: no HPU device events (profile with ProfilerActivity.HPU)")
    hosts = host_rows(slices, set(cards), args.depth)
    t0 = min(e["ts"] for e in slices if e["pid"] in cards or any(e in v for v in hosts.values()))
    lo = args.start_us if args.start_us is not None else 0.0
    hi = args.end_us if args.end_us is not None else max(e["ts"] + e["dur"] for e in device) - t0

    # Rows, top to bottom: host threads (by level), then each card's lanes.
    row_of, labels = {}, []
    for key in sorted(hosts):
        pid, tid, level = key
        row_of[("host",) + key] = len(labels)
        labels.append(f"host {tid}" if level == 0 else "")
    lane_tids = {}
    for pid in cards:
        tids = sorted(tid for (p, tid) in names if p == pid)
        lane_tids[pid] = tids
        for tid in tids:
            row_of[("dev", pid, tid)] = len(labels)
            labels.append(f"{procs[pid]}  {names[(pid, tid)]}")

    fig_h = 0.9 + 0.42 * len(labels)
    fig, ax = plt.subplots(figsize=(13, fig_h), dpi=110)
    span = max(hi - lo, 1e-9)

    def draw(e, row, color):
        x0, x1 = e["ts"] - t0, e["ts"] - t0 + e["dur"]
        if x1 < lo or x0 > hi:
            return
        w = max(e["dur"], span * 0.0015)  # a short event stays visible
        ax.add_patch(Rectangle((x0, row - 0.38), w, 0.76, facecolor=color, edgecolor="white", linewidth=0.3))
        if e["dur"] > span * 0.06:
            name = e["name"].replace("aten::", "")
            room = int(e["dur"] / span * 160)
            ax.text(x0 + e["dur"] / 2, row, name[:room], ha="center", va="center", fontsize=6.5,
                    color="white", clip_on=True)

    for key, evs in hosts.items():
        for e in evs:
            draw(e, row_of[("host",) + key], HOST_COLOR)
    lane_name = {}
    for e in device:
        lane = names.get((e["pid"], e["tid"]), "")
        lane_name[e["tid"]] = lane
        draw(e, row_of[("dev", e["pid"], e["tid"])], LANE_COLORS.get(lane, "#777"))

    # Flow arrows: from the host thread's top row to the device lane.
    for pair in flows.values():
        s, f = pair.get("s"), pair.get("f")
        if not s or not f or ("dev", f["pid"], f["tid"]) not in row_of:
            continue
        src = row_of.get(("host", s["pid"], s["tid"], 0))
        if src is None:
            continue
        xs, xf = s["ts"] - t0, f["ts"] - t0
        if max(xs, xf) < lo or min(xs, xf) > hi:
            continue
        ax.annotate("", xy=(xf, row_of[("dev", f["pid"], f["tid"])] - 0.38), xytext=(xs, src + 0.38),
                    arrowprops=dict(arrowstyle="-|>", color="#555", lw=0.4, alpha=0.35, mutation_scale=5))

    ax.set_xlim(lo, hi)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_xlabel("microseconds", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    for spine in ("top", "right"):
        ax.spines[spine].set_visible(False)
    if args.title:
        ax.set_title(args.title, fontsize=9)
    fig.tight_layout()
    fig.savefig(args.png)
    print(f"{args.png}: {len(device)} device events on {len(cards)} card(s), {len(labels)} rows")


if __name__ == "__main__":
    main()

"""Summarise a junit xml of the distributed test base as markdown.

    python tests/dist/dist_base_report.py /tmp/dist_base.xml

Prints the counts (passed / failed / errors / skipped / total), the failing
and erroring tests with the first line of their message, and the skipped
tests grouped by reason. Exit status 1 if any test failed or errored, so a
caller can tell a clean run from the summary alone.
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET


def first_line(text):
    text = (text or "").strip()
    return text.splitlines()[0][:300] if text else ""


_EXC = re.compile(r"^(?:E\s+)?((?:\w+\.)*\w*(?:Error|Exception)\b.*)$")


def failure_line(elem):
    # A rank's failure reaches the parent as "RuntimeError: Process N exited
    # with error code 10 and exception:" followed by the rank's traceback;
    # the rank's last exception line is the one that says what went wrong.
    text = (elem.get("message") or "") + "\n" + (elem.text or "")
    lines = [m.group(1).strip() for m in map(_EXC.match, (l.strip() for l in text.splitlines())) if m]
    lines = [l for l in lines if not l.startswith("RuntimeError: Process ")]
    return lines[-1][:300] if lines else first_line(elem.get("message") or elem.text)


def collect(path):
    root = ET.parse(path).getroot()
    cases = root.iter("testcase")
    out = {"passed": [], "failed": [], "errors": [], "skipped": []}
    for case in cases:
        name = case.get("name")
        fail = case.find("failure")
        err = case.find("error")
        skip = case.find("skipped")
        if fail is not None:
            out["failed"].append((name, failure_line(fail)))
        elif err is not None:
            out["errors"].append((name, failure_line(err)))
        elif skip is not None:
            out["skipped"].append((name, first_line(skip.get("message") or skip.text)))
        else:
            out["passed"].append((name, ""))
    return out


def skip_reason(message):
    # pytest writes unittest skips as "<file>:<line>: <reason>"; the location
    # differs per test, the reason is what groups them.
    head, sep, tail = message.partition(": ")
    return tail if sep and ".py:" in head else message


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    res = collect(argv[1])
    total = sum(len(v) for v in res.values())
    print("| passed | failed | errors | skipped | total |")
    print("| --- | --- | --- | --- | --- |")
    print(f"| {len(res['passed'])} | {len(res['failed'])} | {len(res['errors'])} "
          f"| {len(res['skipped'])} | {total} |")
    for kind in ("failed", "errors"):
        if res[kind]:
            print(f"\n### {kind} ({len(res[kind])})\n")
            for name, msg in sorted(res[kind]):
                print(f"- `{name}`: {msg}")
    groups = collections.defaultdict(list)
    for name, msg in res["skipped"]:
        groups[skip_reason(msg)].append(name)
    if groups:
        print(f"\n### skipped ({len(res['skipped'])}), by reason\n")
        for reason, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            print(f"- {reason} ({len(names)}): " + ", ".join(f"`{n}`" for n in sorted(names)))
    return 1 if res["failed"] or res["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

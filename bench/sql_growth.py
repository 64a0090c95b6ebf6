#!/usr/bin/env python3
"""Which SurrealDB queries grow with a store: reads an Onyx log written with
`ONYX_LOG=warn,onyx::sql=trace` (one line per query: its time in
microseconds and its text; see bench/soak.sh's SOAK_LOG and SOAK_KEEP_LOG)
and prints, for the queries that cost most, their count and mean time in an
early minute and in the last full minute, largest growth in total time first.

    python3 bench/sql_growth.py /tmp/onyx.log [--early 2] [--top 15]
"""

import argparse
import re
import sys
from collections import defaultdict
from datetime import datetime

LINE = re.compile(r"^(\S+)\s+TRACE\b.*?\bmicros=(\d+)\s+sql=(.*)$")


def parse(path):
    """(minute index from the first query, µs, sql) for each query line."""
    start = None
    for line in open(path, encoding="utf-8", errors="replace"):
        found = LINE.match(line.rstrip("\n"))
        if not found:
            continue
        at = datetime.fromisoformat(found.group(1).replace("Z", "+00:00")).timestamp()
        start = at if start is None else start
        yield int((at - start) // 60) + 1, int(found.group(2)), found.group(3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log")
    parser.add_argument("--early", type=int, default=2, help="the early minute to compare with (default 2)")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    # (minute, sql) -> [count, µs]
    table = defaultdict(lambda: [0, 0])
    minutes = set()
    for minute, micros, sql in parse(args.log):
        cell = table[(minute, sql)]
        cell[0] += 1
        cell[1] += micros
        minutes.add(minute)
    if len(minutes) < 2:
        sys.exit(f"{args.log}: fewer than two minutes of `onyx::sql` trace lines")
    # The last minute is cut short by the end of the run: the one before it.
    late = max(minutes) - 1
    early = args.early if args.early in minutes and args.early < late else min(minutes)
    queries = {sql for (_, sql) in table}
    rows = []
    for sql in queries:
        e_count, e_us = table.get((early, sql), (0, 0))
        l_count, l_us = table.get((late, sql), (0, 0))
        rows.append((l_us - e_us, sql, e_count, e_us, l_count, l_us))
    rows.sort(reverse=True)
    total = lambda m: sum(us for (minute, _), (_, us) in table.items() if minute == m)
    print(f"all queries: minute {early} {total(early) / 1e6:.2f} s, minute {late} {total(late) / 1e6:.2f} s of query time")
    print()
    print(f"| query | minute {early}: n | mean µs | minute {late}: n | mean µs | total growth s |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for growth, sql, e_count, e_us, l_count, l_us in rows[: args.top]:
        mean = lambda us, n: f"{us / n:.0f}" if n else "—"
        shown = sql if len(sql) <= 110 else sql[:107] + "..."
        shown = shown.replace("|", "\\|")
        print(f"| `{shown}` | {e_count} | {mean(e_us, e_count)} | {l_count} | {mean(l_us, l_count)} | {growth / 1e6:+.2f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What of a running process's own binary is resident, by ELF section.

    bench/rss_sections.py PID BINARY        (needs readelf; root or the same user)
    bench/rss_sections.py PID BINARY api/link/onyx.order    (also needs nm)

Reads /proc/PID/maps for the mappings of BINARY and /proc/PID/pagemap for
which of their pages are in memory, and sums them by the section each page
belongs to: `.text` is code, `.data.rel.ro` the tables the loader relocates at
start (anonymous once written), `.rela.dyn`/`.relr.dyn` the relocations
themselves, `.eh_frame*` what unwinding (backtraces) reads.

With the link order file, `.text` is split further: the front of it where the
linker put the ordered functions, and the 64 KB runs resident elsewhere, which
are code the order file missed (a stale file, or a path its profile never ran).
"""
import os
import re
import struct
import subprocess
import sys

PAGE = 4096
# The kernel maps a file's pages around a fault in runs of this size.
RUN = 64 * 1024


def sections(binary):
    """(name, address, size) of each section loaded at a non-zero address."""
    listing = subprocess.run(["readelf", "-S", "-W", binary], capture_output=True, text=True, check=True)
    found = []
    for line in listing.stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and int(m.group(2), 16):
            found.append((m.group(1), int(m.group(2), 16), int(m.group(3), 16)))
    return found


def ordered_end(binary, order_file):
    """The address where the ordered functions end, and how many of the
    file's names the binary has; `None` when the binary was not laid out
    with this file (its functions are not in the file's order)."""
    wanted = [line.strip() for line in open(order_file) if line.strip()]
    listing = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True)
    address = {}
    for line in listing.stdout.splitlines():
        fields = line.split()
        if len(fields) == 3:
            address.setdefault(fields[2], int(fields[0], 16))
    found = [address[name] for name in wanted if name in address]
    in_order = sum(a < b for a, b in zip(found, found[1:]))
    if not found or in_order < 0.9 * (len(found) - 1):
        return None
    return max(found), len(found), len(wanted)


def main():
    pid, binary = sys.argv[1], sys.argv[2]
    order = ordered_end(binary, sys.argv[3]) if len(sys.argv) > 3 else None
    if len(sys.argv) > 3 and order is None:
        print(f"  ({binary} was not linked with {sys.argv[3]}: .text is not split)")
    name = os.path.basename(os.path.realpath(binary))
    mappings = []
    for line in open(f"/proc/{pid}/maps"):
        fields = line.split()
        if len(fields) >= 6 and os.path.basename(fields[5]) == name:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            mappings.append((start, end, int(fields[2], 16)))
    if not mappings:
        sys.exit(f"{binary} is not mapped by process {pid}")
    load_bias = min(start - offset for start, _, offset in mappings)
    table = sections(binary)
    resident = {}
    runs = set()
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for start, end, _ in mappings:
            pagemap.seek(start // PAGE * 8)
            entries = pagemap.read((end - start) // PAGE * 8)
            for i in range(0, len(entries), 8):
                if not struct.unpack_from("Q", entries, i)[0] >> 63:
                    continue
                address = start + i // 8 * PAGE - load_bias
                section = next((s for s, at, size in table if at <= address < at + size), "(between sections)")
                if order and section == ".text":
                    if address <= order[0]:
                        section = ".text (ordered)"
                    else:
                        section = ".text (elsewhere)"
                        runs.add(address // RUN)
                resident[section] = resident.get(section, 0) + 1
    sizes = {s: size for s, _, size in table}
    if order:
        text_at = next(at for s, at, _ in table if s == ".text")
        sizes[".text (ordered)"] = order[0] - text_at
        sizes[".text (elsewhere)"] = sizes.get(".text", 0) - sizes[".text (ordered)"]
    for section, pages in sorted(resident.items(), key=lambda item: -item[1]):
        if pages * PAGE >= 64 * 1024:
            print(f"  {section:18s} {pages * PAGE / 2**20:6.1f} MB resident of {sizes.get(section, 0) / 2**20:6.1f} MB")
    if order:
        print(f"  .text elsewhere: {len(runs)} runs of 64 KB; the order file's names found in the binary: {order[1]:,} of {order[2]:,}")


if __name__ == "__main__":
    main()

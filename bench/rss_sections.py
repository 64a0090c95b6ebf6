#!/usr/bin/env python3
"""What of a running process's own binary is resident, by ELF section.

    bench/rss_sections.py PID BINARY        (needs readelf; root or the same user)

Reads /proc/PID/maps for the mappings of BINARY and /proc/PID/pagemap for
which of their pages are in memory, and sums them by the section each page
belongs to: `.text` is code, `.data.rel.ro` the tables the loader relocates at
start (anonymous once written), `.rela.dyn`/`.relr.dyn` the relocations
themselves, `.eh_frame*` what unwinding (backtraces) reads.
"""
import os
import re
import struct
import subprocess
import sys

PAGE = 4096


def sections(binary):
    """(name, address, size) of each section loaded at a non-zero address."""
    listing = subprocess.run(["readelf", "-S", "-W", binary], capture_output=True, text=True, check=True)
    found = []
    for line in listing.stdout.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m and int(m.group(2), 16):
            found.append((m.group(1), int(m.group(2), 16), int(m.group(3), 16)))
    return found


def main():
    pid, binary = sys.argv[1], sys.argv[2]
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
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for start, end, _ in mappings:
            pagemap.seek(start // PAGE * 8)
            entries = pagemap.read((end - start) // PAGE * 8)
            for i in range(0, len(entries), 8):
                if not struct.unpack_from("Q", entries, i)[0] >> 63:
                    continue
                address = start + i // 8 * PAGE - load_bias
                section = next((s for s, at, size in table if at <= address < at + size), "(between sections)")
                resident[section] = resident.get(section, 0) + 1
    sizes = {s: size for s, _, size in table}
    for section, pages in sorted(resident.items(), key=lambda item: -item[1]):
        if pages * PAGE >= 64 * 1024:
            print(f"  {section:18s} {pages * PAGE / 2**20:6.1f} MB resident of {sizes.get(section, 0) / 2**20:6.1f} MB")


if __name__ == "__main__":
    main()

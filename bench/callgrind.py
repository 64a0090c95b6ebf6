"""Reads a callgrind output file for the bench scripts (instructions.sh).

callgrind compresses names (`fn=(12) name` once, then `fn=(12)`) and marks a
function's recursion depth after its name (`name'2`); both are undone here.
"""
import collections
import re


def read(path, binary=None, counts=None):
    """(own, calls): each function's own instruction count, and each
    (caller, callee) pair's inclusive count. With `binary` (a file name),
    only functions of that object file are kept in `own`. With `counts` (a
    Counter), how many times each function was called is added to it."""
    names = {"fn": {}, "ob": {}, "fl": {}}

    def name(kind, text):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?", text)
        if not m:
            return text
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), text)

    own = collections.Counter()
    calls = collections.Counter()
    ob = fn = callee = None
    in_call = False
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith(("fn=", "cfn=")):
            line = re.sub(r"'\d+$", "", line)
        key, _, value = line.partition("=")
        if key == "ob":
            ob = name("ob", value)
        elif key == "cob":
            name("ob", value)
        elif key == "fn":
            fn = name("fn", value)
        elif key == "cfn":
            callee = name("fn", value)
        elif key in ("fl", "fi", "fe", "cfi", "cfl"):
            name("fl", value)
        elif key == "calls":
            in_call = True
            if counts is not None and callee is not None:
                counts[callee] += int(value.split()[0])
        elif line[:1].isdigit() or line[:1] in "+-*":
            parts = line.split()
            if len(parts) < 2:
                continue
            if in_call:
                calls[(fn, callee)] += int(parts[1])
                in_call = False
            elif binary is None or (ob or "").endswith("/" + binary):
                own[fn] += int(parts[1])
    return own, calls

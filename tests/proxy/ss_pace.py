#!/usr/bin/env python3
"""ss_pace.py FILTER [SECS]: the pacing caps of the established TCP sockets
that match an ss filter, from `ss -tin`.

Without SECS: one line per socket, "CAP ACKED" (pacing cap in bit/s, 0 for
none; bytes acknowledged).  With SECS: two samples SECS apart; prints the
caps at the second, sorted, on one line, then the bits the sockets had
acknowledged between the samples per second, together (-1 if the set of
sockets changed)."""
import re
import subprocess
import sys
import time

UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


def sample(flt):
    """[(cap, acked)] of the sockets matching flt, and when ss ran."""
    t = time.monotonic()
    out = subprocess.run(["ss", "-tinH", "state", "established", flt], capture_output=True, text=True,
                         check=True, timeout=10).stdout
    socks = []
    for line in out.replace("\n\t", " ").splitlines():
        m = re.search(r"pacing_rate [0-9.]+[kKMG]?bps/([0-9.]+)([kKMG]?)bps", line)
        a = re.search(r"bytes_acked:([0-9]+)", line)
        socks.append((round(float(m.group(1)) * UNITS[m.group(2)]) if m else 0, int(a.group(1)) if a else 0))
    return socks, (t + time.monotonic()) / 2


def main():
    flt = sys.argv[1]
    if len(sys.argv) < 3:
        for cap, acked in sample(flt)[0]:
            print(cap, acked)
        return
    a, ta = sample(flt)
    time.sleep(float(sys.argv[2]))
    b, tb = sample(flt)
    print(" ".join(str(c) for c, _ in sorted(b)))
    if len(a) != len(b):
        print(-1)
    else:
        print(round((sum(x for _, x in b) - sum(x for _, x in a)) * 8 / (tb - ta)))


if __name__ == "__main__":
    main()

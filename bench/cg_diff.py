#!/usr/bin/env python3
"""bench/cg_diff.py N1.txt N2.txt CALLS

Per-call inclusive instruction counts per function: two `callgrind_annotate
--inclusive=yes` outputs of the same operation run N1 and N2 times in one
backend each; (Ir(N2) - Ir(N1)) / CALLS removes start-up costs."""
import re
import sys

LINE = re.compile(r'^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*?)\s*$')


def parse(path):
    out = {}
    for line in open(path, errors='replace'):
        m = LINE.match(line)
        if m and not m.group(2).startswith(('=>', '<', '*')):
            name = re.sub(r'\s*\[[^\]]*\]$', '', m.group(2))
            out.setdefault(name, int(m.group(1).replace(',', '')))
    return out


a, b, calls = parse(sys.argv[1]), parse(sys.argv[2]), int(sys.argv[3])
rows = sorted(((b[k] - a.get(k, 0)) / calls, k) for k in b)
rows.reverse()
total = (b.get('PROGRAM TOTALS', 0) - a.get('PROGRAM TOTALS', 0)) / calls
print(f'# instructions per call, inclusive (total {total:,.0f})')
for v, k in rows[:120]:
    if v <= 0:
        continue
    print(f'{v:12,.0f}  {100 * v / total if total else 0:5.1f}%  {k}')

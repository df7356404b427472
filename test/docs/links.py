#!/usr/bin/env python3
"""test/docs/links.py: every relative link in README.md and docs/*.md leads
somewhere.

A link to a file must name a file of the checkout; a link with a #fragment
must name a heading of that page (GitHub's anchors: lower case, punctuation
but '-' and '_' dropped, spaces as '-').  Code spans and fenced blocks are
skipped.  Prints one line per broken link and exits 1 if there is any; run
with --self-test to check that it catches a broken file and a broken anchor.
"""
import os
import re
import sys
import tempfile

LINK = re.compile(r'(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)')


def strip_code(text):
    text = re.sub(r'^```.*?^```', '', text, flags=re.S | re.M)
    return re.sub(r'`[^`\n]*`', '', text)


def anchors(path):
    out = set()
    seen = {}
    with open(path, encoding='utf-8') as f:
        text = re.sub(r'^```.*?^```', '', f.read(), flags=re.S | re.M)
    for m in re.finditer(r'^#{1,6}\s+(.*?)\s*#*\s*$', text, flags=re.M):
        a = m.group(1).strip().lower()
        a = re.sub(r'[^\w\- ]', '', a).replace(' ', '-')
        n = seen.get(a, 0)
        seen[a] = n + 1
        out.add(a if n == 0 else '%s-%d' % (a, n))
    return out


def check(root, pages):
    bad = []
    for page in pages:
        with open(os.path.join(root, page), encoding='utf-8') as f:
            text = strip_code(f.read())
        for m in LINK.finditer(text):
            target = m.group(1) or m.group(2)
            if re.match(r'^[a-z]+:', target):
                continue            # http:, mailto: ...
            path, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(root, os.path.dirname(page), path)) if path \
                else os.path.join(root, page)
            if not os.path.exists(dest):
                bad.append('%s: %s: no such file' % (page, target))
            elif frag and dest.endswith('.md') and frag not in anchors(dest):
                bad.append('%s: %s: no heading #%s in %s' % (page, target, frag,
                                                             os.path.relpath(dest, root)))
    return bad


def pages_of(root):
    docs = os.path.join(root, 'docs')
    return ['README.md'] + sorted('docs/' + p for p in os.listdir(docs) if p.endswith('.md'))


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, 'docs'))
        with open(os.path.join(d, 'docs', 'a.md'), 'w') as f:
            f.write('# A page\n\n## Some heading, here\n')
        with open(os.path.join(d, 'README.md'), 'w') as f:
            f.write('[ok](docs/a.md#some-heading-here) `[skipped](nowhere.md)`\n'
                    '[gone](docs/b.md) [no anchor](docs/a.md#other)\n')
        bad = check(d, pages_of(d))
        return len(bad) == 2 and 'docs/b.md' in bad[0] and '#other' in bad[1]


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not self_test():
        print('not ok - links.py self-test: a broken file or anchor went unseen')
        return 1
    pages = pages_of(root)
    bad = check(root, pages)
    for b in bad:
        print('  ' + b)
    print('%s - relative links in %d pages (%d broken); the self-test catches a broken file and anchor'
          % ('not ok' if bad else 'ok', len(pages), len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())

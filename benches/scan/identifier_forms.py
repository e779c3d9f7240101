#!/usr/bin/env python3
"""How often the identifier filters read a random token as an identifier,
and how many real identifiers they recognise.

Reads `GENERIC_IDENTIFIERS` (scan/src/rules/builtin.rs) and `SVC_IDENTIFIERS`
and `SVC_NOT_SECRET` (scan/src/rules/builtin/services.rs) from the sources,
draws random alphanumeric tokens of 15-40 characters (seeded), keeps those
`SVC_NOT_SECRET` lets through, and counts how many each form matches (each
is a token the rule would drop). Then collects the distinct identifiers of
15+ characters from the Python standard library and the nightly Rust
sources and counts how many each form recognises.

    python3 benches/scan/identifier_forms.py [ROUNDS_PER_LENGTH]

Python's `re` and Rust's `regex` agree on these patterns (plain classes,
alternations and counted repetitions, no look-around).
"""
import collections, os, random, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def const(path, name):
    src = open(os.path.join(ROOT, path)).read()
    m = re.search(r'const ' + name + r': &str = r"(.*?)";', src, re.S)
    return m.group(1)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
    forms = {
        'GENERIC_IDENTIFIERS': re.compile(const('scan/src/rules/builtin.rs', 'GENERIC_IDENTIFIERS')),
        'SVC_IDENTIFIERS': re.compile(const('scan/src/rules/builtin/services.rs', 'SVC_IDENTIFIERS')),
    }
    not_secret = re.compile(const('scan/src/rules/builtin/services.rs', 'SVC_NOT_SECRET'))
    rng = random.Random(2)
    alnum = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
    tokens = [''.join(rng.choice(alnum) for _ in range(n))
              for n in (15, 16, 20, 24, 32, 40) for _ in range(rounds)]
    tokens = [t for t in tokens if not not_secret.match(t)]
    print(f'random tokens past SVC_NOT_SECRET: {len(tokens)}')
    for name, form in forms.items():
        dropped = [t for t in tokens if form.match(t)]
        print(f'  {name}: reads {len(dropped)} as identifiers, e.g. {dropped[:4]}')
    stdlib = subprocess.run([sys.executable, '-c', 'import sysconfig;print(sysconfig.get_paths()["stdlib"])'],
                            capture_output=True, text=True).stdout.strip()
    sysroot = subprocess.run(['rustc', '+nightly', '--print', 'sysroot'], capture_output=True, text=True).stdout.strip()
    ids = collections.Counter()
    word = re.compile(rb'\b[A-Za-z_][A-Za-z0-9_]{14,}\b')
    for top in (stdlib, os.path.join(sysroot, 'lib/rustlib/src')):
        for d, _, files in os.walk(top):
            for f in files:
                if f.endswith(('.py', '.rs', '.c', '.h')):
                    try:
                        data = open(os.path.join(d, f), 'rb').read()
                    except OSError:
                        continue
                    for w in word.findall(data):
                        s = w.decode()
                        if not not_secret.match(s):
                            ids[s] += 1
    print(f'distinct identifiers of 15+ characters past SVC_NOT_SECRET: {len(ids)}')
    for name, form in forms.items():
        print(f'  {name}: recognises {sum(1 for s in ids if form.match(s))}')


if __name__ == '__main__':
    main()

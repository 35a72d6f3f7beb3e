#!/usr/bin/env python3
"""Generate canonical/testdata/python/cases.json: JSON texts and what CPython's
json.dumps makes of them, for the Python-based profiles.

  python_sort_keys  json.dumps(json.loads(text), sort_keys=True)        (ensure_ascii)
  genesis           json.dumps(..., sort_keys=True, separators=(",", ":"))

null means the reference cannot produce JSON for the input (json.loads
refuses it, or json.dumps would write Infinity/NaN). Deterministic: rerun to
regenerate, then run `node es_cases.mjs` for the ECMAScript side.
Run from this directory: python3 python_cases.py
"""
import json
import math
import os
import random
import struct

rng = random.Random(20261121)

INTERESTING = (
    [chr(c) for c in range(0x00, 0x20)] + ['\x7f', '"', '\\', '/', '<', '>', '&', "'", ' ', '~']
    + ['\x80', '\x9f', '\xa0', '\xe9', '\xff', '\u0100', '\u07ff', '\u0800', '\u2028', '\u2029',
       '\ufeff', '\ufb00', '\ue000', '\uf8ff', '\ufffd', '\uffff',
       '\U00010000', '\U0001f512', '\U0001f600', '\U0010ffff',
       '\ud800', '\udbff', '\udc00', '\udfff']  # the last four are lone surrogates
)
ASCII = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.:'


def rand_str(maxlen=8):
    out = []
    for _ in range(rng.randint(0, maxlen)):
        out.append(rng.choice(INTERESTING) if rng.random() < 0.5 else rng.choice(ASCII))
    s = ''.join(out)
    # Adjacent high+low lone surrogates would be read back as one astral
    # character; keep the generated value equal to what a reader sees.
    return json.loads(json.dumps(s))


def rand_double_literal():
    kind = rng.randint(0, 6)
    if kind == 0:  # random bit pattern, Python repr
        while True:
            x = struct.unpack('<d', rng.getrandbits(64).to_bytes(8, 'little'))[0]
            if math.isfinite(x):
                return repr(x)
    if kind == 1:  # 17 significant digits, exponent form
        x = struct.unpack('<d', rng.getrandbits(64).to_bytes(8, 'little'))[0]
        return '%.17e' % x if math.isfinite(x) else '1.5e300'
    if kind == 2:  # short decimals around the fixed/exponent boundaries
        mant = str(rng.randint(1, 999999))
        exp = rng.randint(-30, 30)
        sign = rng.choice(['', '-'])
        e = rng.choice(['e', 'E'])
        esign = rng.choice(['', '+']) if exp >= 0 else ''
        return f'{sign}{mant}{e}{esign}{exp}'
    if kind == 3:  # fixed notation with fraction
        return f'{rng.choice(["", "-"])}{rng.randint(0, 10**rng.randint(0, 22))}.{rng.randint(0, 10**rng.randint(1, 20))}'
    if kind == 4:  # a power of ten around the repr switch points
        return rng.choice(['1e15', '1e16', '1e17', '1e21', '1e22', '1e-4', '1e-5', '1e-6', '1e-7',
                           '0.0001', '0.00001', '123456789012345678.0', '9999999999999998.0',
                           '1000000000000000.0', '10000000000000000.0'])
    if kind == 5:  # subnormals and extremes
        return rng.choice(['5e-324', '-5e-324', '2.2250738585072014e-308', '2.225073858507201e-308',
                           '1.7976931348623157e308', '-1.7976931348623157E+308', '4.9e-324', '1e-400',
                           '-1e-400', '0.0', '-0.0', '0e0', '-0E-0', '0.000'])
    return rng.choice(['0.1', '0.2', '0.3', '1.1', '2.5', '100.0', '1.0', '-1.0', '3.141592653589793',
                       '0.30000000000000004', '9007199254740993.0', '1.5', '123.456'])


def rand_int_literal():
    kind = rng.randint(0, 3)
    if kind == 0:
        return str(rng.randint(-1000, 1000))
    if kind == 1:
        return str(rng.randint(-2**63, 2**64))
    if kind == 2:
        return rng.choice(['0', '-0', '9007199254740991', '9007199254740992', '-9007199254740991',
                           '-9007199254740992', '12345678901234567890', '100000000000000000000000'])
    return ('-' if rng.random() < 0.5 else '') + str(rng.randint(1, 9)) + ''.join(
        rng.choice('0123456789') for _ in range(rng.randint(10, 60)))


def ws():
    return rng.choice(['', '', '', ' ', '\n', '\t', ' \r\n '])


def write(v, depth, floats):
    """Render a random JSON text with varied whitespace and escapes."""
    if isinstance(v, Lit):
        return str(v)  # a raw literal (number, true, false, null)
    if isinstance(v, str):
        if rng.random() < 0.3:
            return json.dumps(v, ensure_ascii=True)
        try:
            t = json.dumps(v, ensure_ascii=False)
            t.encode('utf-8')
            return t
        except UnicodeEncodeError:
            return json.dumps(v, ensure_ascii=True)
    if isinstance(v, list):
        return '[' + ws() + (',' + ws()).join(write(x, depth + 1, floats) for x in v) + ws() + ']'
    if isinstance(v, dict):
        return '{' + ws() + (',' + ws()).join(
            write(k, depth, floats) + ws() + ':' + ws() + write(x, depth + 1, floats) for k, x in v.items()) + ws() + '}'
    raise TypeError(type(v))


class Lit(str):
    """A literal written into the JSON text as it is."""


def rand_value(depth, floats):
    r = rng.random()
    if depth > 3 or r < 0.45:
        c = rng.randint(0, 5)
        if c == 0:
            return rand_str()
        if c == 1:
            return Lit(rand_int_literal())
        if c == 2:
            return Lit(rand_double_literal()) if floats else Lit(rand_int_literal())
        if c == 3:
            return Lit(rng.choice(['true', 'false', 'null']))
        return rand_str(3)
    if r < 0.7:
        return [rand_value(depth + 1, floats) for _ in range(rng.randint(0, 5))]
    d = {}
    for _ in range(rng.randint(0, 6)):
        d[rand_str(4)] = rand_value(depth + 1, floats)
    return d


def dumps_or_none(obj, **kw):
    try:
        out = json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        return None
    return out


cases = []


def add(name, text):
    try:
        obj = json.loads(text)
    except ValueError:  # e.g. more than 4300 digits
        obj = None
        py = gen = None
    else:
        py = dumps_or_none(obj, sort_keys=True)
        gen = dumps_or_none(obj, sort_keys=True, separators=(',', ':'))
    cases.append({'name': name, 'input': text, 'python_sort_keys': py, 'genesis': gen})


for i in range(400):
    floats = i % 2 == 1
    v = rand_value(0, floats)
    if not isinstance(v, (list, dict)):
        v = {'v': v}
    add(f'random_{i:03d}', write(v, 0, floats))

for i in range(300):
    add(f'double_{i:03d}', '[' + rand_double_literal() + ']')
for i in range(100):
    add(f'int_{i:03d}', '[' + rand_int_literal() + ']')
add('int_4300_digits', '[' + '9' * 4300 + ']')
add('int_4301_digits', '[' + '9' * 4301 + ']')
add('float_overflow', '[1e400]')
add('float_overflow_neg', '[-1.8e308]')
add('lone_surrogates', '["\\ud800", "\\udfff", "a\\ud83d", "\\ude00b", "\\udc00\\ud800"]')
add('astral_keys', '{"\\ufb00": 1, "\\ud83d\\udd12": 2, "a": 3, "\\uffff": 4, "\\ue000": 5}')
add('surrogate_key', '{"\\ud800": 1, "\\ud7ff": 2, "\\ue000": 3}')

os.makedirs('../python', exist_ok=True)
with open('../python/cases.json', 'w', encoding='utf-8') as f:
    json.dump({'generator': 'canonical/testdata/gen/python_cases.py', 'python': __import__('sys').version.split()[0],
               'cases': cases}, f, ensure_ascii=True, indent=1)
print(len(cases), 'cases')

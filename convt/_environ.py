"""Environment variables read on every call, cheaply.

A repeated call reads up to four variables (the kernel set a test or user asked
for, the weight cache's budget, the default thread count).  ``os.environ.get``
runs four Python-level functions per read (``Mapping.get``, ``__getitem__``, the
key's encoding, the value's decoding); once a large call has pushed them out of
the CPU caches each read took 15-30 us, where a tiny call's whole fixed cost is
18 us with warm caches.  :func:`value` reads the mapping behind ``os.environ``
with each name encoded once, which sees every change made through
``os.environ`` (``putenv`` alone never reached it either), and falls back to
``os.environ.get`` wherever ``os.environ`` is not CPython's own mapping.
"""

import os

_encoded = {}  # name -> its key in os.environ's mapping


def value(name, default=None):
    """``os.environ.get(name, default)``."""
    environ = os.environ
    data = getattr(environ, "_data", None)
    if type(environ) is not getattr(os, "_Environ", None) or type(data) is not dict:
        return environ.get(name, default)
    key = _encoded.get(name)
    if key is None:
        key = _encoded[name] = environ.encodekey(name)
    raw = data.get(key)
    return default if raw is None else environ.decodevalue(raw)

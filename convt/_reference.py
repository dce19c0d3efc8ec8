"""A pure-NumPy float64 ConvTranspose written straight from the ONNX text.

It scatters ``x[n, c, i] * w[c, m, k]`` to ``o = i * stride + k * dilation -
pad_begin`` for every kernel position, the operator's definition, with its own
reading of the pads equations.  It shares no code with the kernels or with
convt's geometry, so tests can hold one against the other.  It is slow and
used only by tests and the demo's accuracy check.
"""

from __future__ import annotations

import itertools

import numpy as np


def _pads(auto_pad, inputs, kernel, strides, dilations, output_padding, output_shape, pads):
    count = len(inputs)
    full = [
        s * (i - 1) + a + (k - 1) * d + 1
        for i, k, s, d, a in zip(inputs, kernel, strides, dilations, output_padding)
    ]
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [i * s for i, s in zip(inputs, strides)]
    if output_shape is not None:
        total = [f - o for f, o in zip(full, output_shape)]
        if auto_pad == "SAME_UPPER":
            begin = [t // 2 for t in total]
        else:
            begin = [t - t // 2 for t in total]
        end = [t - b for t, b in zip(total, begin)]
    elif auto_pad == "NOTSET" and pads is not None:
        begin, end = list(pads[:count]), list(pads[count:])
    else:
        begin = end = [0] * count
    return begin, [f - b - e for f, b, e in zip(full, begin, end)]


def reference_conv_transpose(x, w, b=None, *, auto_pad="NOTSET", dilations=None, group=1,
                             kernel_shape=None, output_padding=None, output_shape=None,
                             pads=None, strides=None, num_threads=None):
    """ConvTranspose in float64 by direct scatter; same arguments as convt.conv_transpose.

    ``kernel_shape`` and ``num_threads`` are accepted and ignored (the kernel
    is ``w.shape[2:]``).  Returns a float64 array.
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    count = x.ndim - 2
    inputs, kernel = x.shape[2:], w.shape[2:]
    strides = list(strides or [1] * count)
    dilations = list(dilations or [1] * count)
    output_padding = list(output_padding or [0] * count)
    begin, outputs = _pads(auto_pad, inputs, kernel, strides, dilations, output_padding,
                           output_shape, pads)
    batch, channels = x.shape[:2]
    cg, mg = channels // group, w.shape[1]
    y = np.zeros((batch, mg * group, *outputs))
    for g in range(group):
        xg = x[:, g * cg:(g + 1) * cg]
        wg = w[g * cg:(g + 1) * cg]
        yg = y[:, g * mg:(g + 1) * mg]
        for position in itertools.product(*(range(k) for k in kernel)):
            source, target = [slice(None), slice(None)], [slice(None), slice(None)]
            for i_size, o_size, k, s, d, p in zip(inputs, outputs, position, strides,
                                                  dilations, begin):
                shift = k * d - p  # o = i * s + shift
                lo = max(0, -(shift // s))
                hi = min(i_size - 1, (o_size - 1 - shift) // s)
                if hi < lo:
                    break
                source.append(slice(lo, hi + 1))
                target.append(slice(lo * s + shift, hi * s + shift + 1, s))
            else:
                contribution = np.tensordot(xg, wg[(slice(None), slice(None)) + position],
                                            axes=([1], [0]))
                yg[tuple(target)] += np.moveaxis(contribution, -1, 1)[tuple(source)]
    if b is not None:
        y += np.asarray(b, dtype=np.float64).reshape((1, -1) + (1,) * count)
    return y

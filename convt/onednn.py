"""oneDNN Graph's ConvTranspose-1, from the operator text.

Channels-last data (NXC) and XOI filters by default, ``pads_begin``/``pads_end``,
``groups``, and the text's SAME rule: the total padding is
``(k - 1) * d + 1 - s``, without output_padding, so a SAME output is
``i * s + output_padding`` long (:func:`convt._geometry.onednn_pads`).  NXC
data is read and written in place through strides, never transposed.

>>> import numpy as np
>>> from convt.onednn import ConvTranspose
>>> layer = ConvTranspose(strides=(2, 2), pads_begin=(0, 0), pads_end=(0, 0),
...                       dilations=(1, 1), auto_pad="SAME_UPPER")
>>> images = np.ones((1, 32, 32, 16), np.float32)            # N, H, W, C
>>> layer.apply(images, np.ones((4, 4, 8, 16), np.float32)).shape   # filter: H, W, O, I
(1, 64, 64, 8)
"""

from __future__ import annotations

from . import _frontend, _geometry, _layouts, _validation

AUTO_PAD_VALUES = ("None", "SAME_UPPER", "SAME_LOWER", "VALID")
DATA_FORMATS = ("NXC", "NCX")
FILTER_FORMATS = ("XOI", "IOX")
# The text's T: f32, f16, bf16 (by NumPy dtype name; ml_dtypes names bf16 "bfloat16").
DTYPE_NAMES = ("float32", "float16", "bfloat16")

_OWNER = "oneDNN ConvTranspose"


def _validate(params):
    auto_pad = params["auto_pad"]
    auto_pad = "None" if auto_pad is None else _validation.check_choice(
        "auto_pad", auto_pad, AUTO_PAD_VALUES, _OWNER, ignore_case=True)
    per_axis = {
        "strides": _validation.check_per_axis("strides", params["strides"], 1, owner=_OWNER,
                                              scalar=True, allow_none=False),
        "pads_begin": _validation.check_per_axis("pads_begin", params["pads_begin"], 0,
                                                 owner=_OWNER, allow_none=False),
        "pads_end": _validation.check_per_axis("pads_end", params["pads_end"], 0, owner=_OWNER,
                                               allow_none=False),
        "dilations": _validation.check_per_axis("dilations", params["dilations"], 1,
                                                owner=_OWNER, scalar=True, allow_none=False),
        "output_padding": _validation.check_per_axis("output_padding", params["output_padding"],
                                                     0, owner=_OWNER),
    }
    _validation.check_lengths(per_axis, _OWNER)
    return dict(
        per_axis,
        auto_pad=auto_pad,
        groups=_validation.check_integer("groups", params["groups"], 1, owner=_OWNER),
        data_format=_validation.check_format("data_format", params["data_format"], DATA_FORMATS,
                                             _OWNER),
        filter_format=_validation.check_format("filter_format", params["filter_format"],
                                               FILTER_FORMATS, _OWNER),
        num_threads=_validation.check_integer("num_threads", params["num_threads"], 1,
                                              allow_none=True, owner=_OWNER),
    )


def _check_dtype(name, array):
    """The text's T is f32, f16 or bf16; other floats (float64) are refused, naming it."""
    if array.dtype.kind in "fV" and array.dtype.name not in DTYPE_NAMES:
        raise TypeError(
            f"{name} has dtype {array.dtype}; oneDNN Graph's ConvTranspose-1 takes f32, f16 and "
            f"bf16 (float32, float16, bfloat16). Cast it, e.g. {name}.astype(np.float32), or "
            f"use convt.ConvTranspose(data_format='NXC', filter_format='XOI') for float64.")
    return array


class ConvTranspose(_frontend.Parameters):
    """oneDNN Graph's ConvTranspose-1, as its text says.

    Parameters
    ----------
    strides : int or sequence of int
        Stride per spatial axis, each >= 1 (a bare int applies to every axis).
    pads_begin, pads_end : sequence of int
        Output elements cropped at the beginning / end of each axis, each >= 0;
        ignored unless auto_pad is 'None'.
    dilations : int or sequence of int
        Spacing of kernel taps per spatial axis, each >= 1.
    auto_pad : {'None', 'SAME_UPPER', 'SAME_LOWER', 'VALID'}, default='None'
        In any case.  'None' (or Python None): pads_begin and pads_end.
        SAME_*: total padding ``(k - 1) * d + 1 - s``, split by the text's C++
        integer division (toward zero), the odd unit at the end for
        SAME_UPPER and at the beginning for SAME_LOWER; a negative total
        (kernel shorter than the stride) gives zero-filled margins.  'VALID':
        zero pads.
    output_padding : sequence of int, optional
        Extra elements at the end of each output axis, any value >= 0.
    groups : int, default=1
        Groups the input and output channels are divided into.
    data_format : {'NXC', 'NCX'}, default='NXC'
        Layout of ``input`` and of the output.
    filter_format : {'XOI', 'IOX'}, default='XOI'
        Filter layout: (k..., out_channels/groups, in_channels) or
        (in_channels, out_channels/groups, k...).
    num_threads : int, optional
        Threads; ``None`` uses every core the process may use (see ConvTranspose).

    Examples
    --------
    The text's SAME rule leaves output_padding out of the total:

    >>> import numpy as np
    >>> from convt.onednn import ConvTranspose
    >>> layer = ConvTranspose(strides=2, pads_begin=(0,), pads_end=(0,), dilations=1,
    ...                       auto_pad="same_lower", output_padding=(1,))
    >>> layer.output_shape_for((1, 5, 3), (3, 2, 3))
    (1, 11, 2)
    >>> layer.pads_for((1, 5, 3), (3, 2, 3))
    ((1, 0),)
    """

    def __init__(self, *, strides, pads_begin, pads_end, dilations, auto_pad="None",
                 output_padding=None, groups=1, data_format="NXC", filter_format="XOI",
                 num_threads=None):
        self.strides = strides
        self.pads_begin = pads_begin
        self.pads_end = pads_end
        self.dilations = dilations
        self.auto_pad = auto_pad
        self.output_padding = output_padding
        self.groups = groups
        self.data_format = data_format
        self.filter_format = filter_format
        self.num_threads = num_threads
        self._attributes()

    _validate = staticmethod(_validate)

    def _geometry(self, input_shape, filter_shape, bias_shape=None):
        attributes = self._attributes()
        input_shape, filter_shape = tuple(input_shape), tuple(filter_shape)
        lengths = [len(v) for v in attributes.values() if isinstance(v, tuple)]
        _layouts.check_shapes(input_shape, filter_shape, bias_shape, attributes["groups"],
                              attributes["data_format"], attributes["filter_format"],
                              lengths[0] if lengths else None,
                              names=("input", "filter", "bias"), owner=_OWNER,
                              group_name="groups")
        return _geometry.resolve_onednn(
            _layouts.canonical_data_shape(input_shape, attributes["data_format"]),
            _layouts.canonical_filter_shape(filter_shape, attributes["filter_format"]),
            strides=attributes["strides"], dilations=attributes["dilations"],
            auto_pad=attributes["auto_pad"].upper(), pads_begin=attributes["pads_begin"],
            pads_end=attributes["pads_end"], output_padding=attributes["output_padding"])

    def output_shape_for(self, input_shape, filter_shape):
        """The output shape for inputs of these shapes (in data_format), without computing."""
        attributes = self._attributes()
        geometry = self._geometry(input_shape, filter_shape)
        filter_shape = _layouts.canonical_filter_shape(filter_shape, attributes["filter_format"])
        return _layouts.data_shape(attributes["data_format"], int(input_shape[0]),
                                   filter_shape[1] * attributes["groups"], geometry.output_shape)

    def pads_for(self, input_shape, filter_shape):
        """The resolved (pads_begin, pads_end) of every spatial axis (negative: zero margins)."""
        geometry = self._geometry(input_shape, filter_shape)
        return tuple(zip(geometry.pads_begin, geometry.pads_end))

    def apply(self, input, filter, bias=None, *, out=None):
        """Compute the operator's output.

        Parameters
        ----------
        input : array_like
            (N, D1, ..., Dn, C) for data_format 'NXC', (N, C, D1, ..., Dn) for
            'NCX'; float32, float16 or bfloat16 (ml_dtypes').
        filter : array_like
            In filter_format, the dtype of ``input``.
        bias : array_like, shape (out_channels,), optional
            Added to every output channel, the dtype of ``input``.
        out : ndarray, optional
            Array of the exact output shape and dtype, C-contiguous in the
            data_format's order, to write into.

        Returns
        -------
        ndarray
            In data_format, the dtype of ``input``.
        """
        attributes = self._attributes()
        given = {"input": input, "filter": filter, "bias": bias}
        for name, value in given.items():
            if value is not None:
                given[name] = _check_dtype(name, _layouts.as_array(name, value))
        arrays = _frontend.operands(given)
        input, filter, bias = arrays["input"], arrays["filter"], arrays["bias"]
        geometry = self._geometry(input.shape, filter.shape,
                                  None if bias is None else bias.shape)
        return _frontend.compute(
            _layouts.data_view(input, attributes["data_format"]),
            _layouts.filter_view(filter, attributes["filter_format"]),
            bias, geometry, attributes["groups"], attributes["num_threads"],
            attributes["data_format"], out)

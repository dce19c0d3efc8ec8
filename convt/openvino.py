"""OpenVINO's ConvolutionBackpropData-1 and GroupConvolutionBackpropData-1, from the operator text.

The attributes keep OpenVINO's names and values (``pads_begin``/``pads_end``,
lower-case ``auto_pad``, ``output_shape`` as an input of :meth:`apply`); the
weights keep its layouts, [C_IN, C_OUT, k...] and [G, C_IN/G, C_OUT/G, k...].
Pads follow the text (:func:`convt._geometry.openvino_pads`), also where the
OpenVINO runtime departs from it: with ``output_shape`` and 'explicit' or
'valid' the text generates both pads from the total, where the runtime keeps
``pads_begin`` and crops the end; and a negative total (``output_shape``
larger than the full size) is split like any other, where the runtime clamps
it at zero and adds the zeros at the end.

>>> import numpy as np
>>> from convt.openvino import ConvolutionBackpropData
>>> layer = ConvolutionBackpropData(strides=(2, 2), pads_begin=(1, 1), pads_end=(1, 1),
...                                 dilations=(1, 1))
>>> data = np.ones((1, 20, 224, 224), np.float32)
>>> layer.apply(data, np.ones((20, 10, 3, 3), np.float32)).shape
(1, 10, 447, 447)
"""

from __future__ import annotations

import numpy as np

from . import _frontend, _geometry, _layouts, _validation

AUTO_PAD_VALUES = ("explicit", "same_upper", "same_lower", "valid")

# The text's inputs have rank 3, 4 or 5: 1 to 3 spatial axes.
MAX_SPATIAL_AXES = 3


def _validate(params, owner):
    """Normalised attributes of (Group)ConvolutionBackpropData, or an error in its words."""
    auto_pad = params["auto_pad"]
    if auto_pad is not None:
        hints = {v.upper(): f"OpenVINO spells it in lower case: {v!r}" for v in AUTO_PAD_VALUES}
        hints["NOTSET"] = "ONNX's NOTSET is 'explicit' here"
        auto_pad = _validation.check_choice("auto_pad", auto_pad, AUTO_PAD_VALUES, owner, hints)
    per_axis = {
        "strides": _validation.check_per_axis("strides", params["strides"], 1, owner=owner,
                                              scalar=True, allow_none=False),
        "pads_begin": _validation.check_per_axis("pads_begin", params["pads_begin"], 0,
                                                 owner=owner),
        "pads_end": _validation.check_per_axis("pads_end", params["pads_end"], 0, owner=owner),
        "dilations": _validation.check_per_axis("dilations", params["dilations"], 1,
                                                owner=owner, scalar=True, allow_none=False),
        "output_padding": _validation.check_per_axis("output_padding", params["output_padding"],
                                                     0, owner=owner),
    }
    _validation.check_lengths(per_axis, owner)
    for name, value in per_axis.items():
        if isinstance(value, tuple) and len(value) > MAX_SPATIAL_AXES:
            raise ValueError(
                f"The {name!r} parameter of {owner} has {len(value)} values, one per spatial "
                f"axis; the operator is 1-D, 2-D or 3-D (inputs of rank 3, 4 or 5).")
    return dict(per_axis, auto_pad=auto_pad or "explicit", num_threads=_validation.check_integer(
        "num_threads", params["num_threads"], 1, allow_none=True, owner=owner))


class ConvolutionBackpropData(_frontend.Parameters):
    """OpenVINO's ConvolutionBackpropData-1 (transposed convolution), as its text says.

    Parameters
    ----------
    strides : int or sequence of int
        Stride per spatial axis, each >= 1 (a bare int applies to every axis).
    pads_begin, pads_end : sequence of int or None
        Output elements cropped at the beginning / end of each axis, each >= 0;
        used with auto_pad 'explicit' and no output_shape, ignored otherwise.
        None (the text: "may be omitted") means zeros.
    dilations : int or sequence of int
        Spacing of kernel taps per spatial axis, each >= 1.
    auto_pad : {'explicit', 'same_upper', 'same_lower', 'valid'}, default='explicit'
        Without output_shape every mode but 'explicit' means zero pads (the
        text: "if auto_pads != None: pads = 0"); with output_shape it says
        which side gets the odd unit of the total padding: the beginning for
        'same_upper', the end for the others.  None is 'explicit'.
    output_padding : sequence of int, optional
        Extra elements at the end of each output axis, any value >= 0 (zeros
        past the computed range).  Default zeros.
    num_threads : int, optional
        Threads; ``None`` uses every core the process may use (see ConvTranspose).

    Notes
    -----
    Per axis, with input ``X``, kernel ``K``, the full size is
    ``s * (X - 1) + (K - 1) * d + 1 + output_padding``.  Without output_shape
    the output is ``full - pads_begin - pads_end``; with it, the total
    ``full - output_shape`` is split with floor division (``//``) as above;
    negative pads are zero-filled margins.

    Examples
    --------
    The text's example 2 (output_padding) and 3 (output_shape input):

    >>> import numpy as np
    >>> from convt.openvino import ConvolutionBackpropData
    >>> w = np.ones((20, 10, 3, 3), np.float32)
    >>> ConvolutionBackpropData(strides=(3, 3), pads_begin=(0, 0), pads_end=(0, 0),
    ...     dilations=(1, 1), output_padding=(2, 2)).apply(
    ...     np.ones((1, 20, 2, 2), np.float32), w).shape
    (1, 10, 8, 8)
    >>> layer = ConvolutionBackpropData(strides=(1, 1), pads_begin=(1, 1), pads_end=(1, 1),
    ...     dilations=(1, 1), auto_pad="valid")
    >>> layer.apply(np.ones((1, 20, 224, 224), np.float32), w, output_shape=[450, 450]).shape
    (1, 10, 450, 450)
    >>> layer.pads_for((1, 20, 224, 224), (20, 10, 3, 3), output_shape=[450, 450])
    ((-112, -112), (-112, -112))
    """

    _GROUPED = False

    def __init__(self, *, strides, pads_begin, pads_end, dilations, auto_pad="explicit",
                 output_padding=None, num_threads=None):
        self.strides = strides
        self.pads_begin = pads_begin
        self.pads_end = pads_end
        self.dilations = dilations
        self.auto_pad = auto_pad
        self.output_padding = output_padding
        self.num_threads = num_threads
        self._attributes()

    @classmethod
    def _validate(cls, params):
        return _validate(params, cls.__name__)

    def _filter_names(self):
        return "C_IN, C_OUT, k..."

    def _canonical(self, data_shape, filter_shape):
        """(data shape, IOX filter shape, group) after the text's shape checks."""
        owner = type(self).__name__
        data_shape, filter_shape = tuple(data_shape), tuple(filter_shape)
        extra = 1 if self._GROUPED else 0
        if not 3 <= len(data_shape) <= 2 + MAX_SPATIAL_AXES:
            raise ValueError(
                f"data must have rank 3, 4 or 5 ([N, C_IN, Z, Y, X] with 1 to 3 spatial axes) "
                f"for {owner}; got data.shape={data_shape}.")
        if len(filter_shape) != len(data_shape) + extra:
            raise ValueError(
                f"filter must have rank {len(data_shape) + extra} ([{self._filter_names()}] with "
                f"one kernel axis per spatial axis of data) for {owner}; got "
                f"data.shape={data_shape} and filter.shape={filter_shape}.")
        group = 1
        if self._GROUPED:
            group = filter_shape[0]
            if group < 1 or data_shape[1] != group * filter_shape[1]:
                raise ValueError(
                    f"data.shape[1] (C_IN) must equal G * C_IN/G = filter.shape[0] * "
                    f"filter.shape[1] = {group} * {filter_shape[1]} for {owner}; got "
                    f"data.shape={data_shape} and filter.shape={filter_shape}.")
            filter_shape = (group * filter_shape[1],) + filter_shape[2:]
        attributes = self._attributes()
        lengths = [len(v) for v in attributes.values() if isinstance(v, tuple)]
        _layouts.check_shapes(data_shape, filter_shape, None, group,
                              axis_count=lengths[0] if lengths else None,
                              names=("data", "filter", None), owner=owner, group_name="G")
        return data_shape, filter_shape, group

    def _output_shape(self, output_shape, count):
        if output_shape is None:
            return None
        owner = type(self).__name__
        if isinstance(output_shape, np.ndarray) and output_shape.dtype.kind not in "iu":
            raise TypeError(
                f"The output_shape input of {owner} must be a 1-D tensor of an integer type; "
                f"got an array of dtype {output_shape.dtype}.")
        values = _validation.check_per_axis("output_shape", output_shape, 1, owner=owner)
        if len(values) != count:
            raise ValueError(
                f"The output_shape input of {owner} holds the spatial output size, one value "
                f"per spatial axis ({count} here, no batch or channel); got {output_shape!r}.")
        return values

    def _geometry(self, data_shape, filter_shape, output_shape):
        attributes = self._attributes()
        data_shape, filter_shape, group = self._canonical(data_shape, filter_shape)
        count = len(data_shape) - 2
        geometry = _geometry.resolve_openvino(
            data_shape, filter_shape, strides=attributes["strides"],
            dilations=attributes["dilations"], auto_pad=attributes["auto_pad"],
            pads_begin=attributes["pads_begin"] or (0,) * count,
            pads_end=attributes["pads_end"] or (0,) * count,
            output_padding=attributes["output_padding"],
            output_shape=self._output_shape(output_shape, count))
        return geometry, group

    def output_shape_for(self, data_shape, filter_shape, output_shape=None):
        """The output shape for inputs of these shapes, without computing anything.

        Examples
        --------
        The text's example 1:

        >>> from convt.openvino import ConvolutionBackpropData
        >>> ConvolutionBackpropData(strides=(2, 2), pads_begin=(1, 1), pads_end=(1, 1),
        ...     dilations=(1, 1)).output_shape_for((1, 20, 224, 224), (20, 10, 3, 3))
        (1, 10, 447, 447)
        """
        geometry, group = self._geometry(data_shape, filter_shape, output_shape)
        return (int(data_shape[0]), int(filter_shape[-geometry.ndim - 1]) * group) \
            + geometry.output_shape

    def pads_for(self, data_shape, filter_shape, output_shape=None):
        """The resolved (pads_begin, pads_end) of every spatial axis (negative: zero margins).

        Examples
        --------
        With output_shape, 'same_upper' puts the odd unit of the total at the beginning:

        >>> from convt.openvino import ConvolutionBackpropData
        >>> ConvolutionBackpropData(strides=2, pads_begin=None, pads_end=None, dilations=1,
        ...     auto_pad="same_upper").pads_for((1, 1, 3), (1, 1, 3), output_shape=[6])
        ((1, 0),)
        """
        geometry, _ = self._geometry(data_shape, filter_shape, output_shape)
        return tuple(zip(geometry.pads_begin, geometry.pads_end))

    def apply(self, data, filter, output_shape=None, *, out=None):
        """Compute the operator's output.

        Parameters
        ----------
        data : array_like, shape (N, C_IN, Z, Y, X), 1 to 3 spatial axes
            float16, bfloat16, float32 or float64 (convt's types among the
            text's "any numeric type").
        filter : array_like
            [C_IN, C_OUT, k...] (GroupConvolutionBackpropData: [G, C_IN/G,
            C_OUT/G, k...]), the dtype of ``data``.
        output_shape : sequence of int, optional
            The spatial output size (no batch or channel axis); pads are then
            generated from it.
        out : ndarray, optional
            C-contiguous array of the exact output shape and dtype to write into.

        Returns
        -------
        ndarray, shape (N, C_OUT, ...)
        """
        arrays = _frontend.operands({"data": data, "filter": filter})
        data, filter = arrays["data"], arrays["filter"]
        geometry, group = self._geometry(data.shape, filter.shape, output_shape)
        if self._GROUPED:
            # [G, C_IN/G, C_OUT/G, k...] -> [C_IN, C_OUT/G, k...]: a view when G and C_IN/G
            # merge (a small copy of the weights otherwise)
            filter = filter.reshape((-1,) + filter.shape[2:])
        return _frontend.compute(data, filter, None, geometry, group,
                                 self._attributes()["num_threads"], out=out)


class GroupConvolutionBackpropData(ConvolutionBackpropData):
    """OpenVINO's GroupConvolutionBackpropData-1: ConvolutionBackpropData per group.

    The same parameters and rules as :class:`ConvolutionBackpropData`; the
    filter is [G, C_IN/G, C_OUT/G, k...] and the output has G * C_OUT/G
    channels.

    Examples
    --------
    >>> import numpy as np
    >>> from convt.openvino import GroupConvolutionBackpropData
    >>> layer = GroupConvolutionBackpropData(strides=(2, 2), pads_begin=(1, 1),
    ...                                      pads_end=(1, 1), dilations=(1, 1))
    >>> layer.apply(np.ones((1, 8, 5, 5), np.float32),
    ...             np.ones((4, 2, 3, 4, 4), np.float32)).shape
    (1, 12, 10, 10)
    """

    _GROUPED = True

    def _filter_names(self):
        return "G, C_IN/G, C_OUT/G, k..."

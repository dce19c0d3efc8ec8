/* Plan records: the structs through which the compiled drivers read a plan.
 *
 * Each record is a list of ptrdiff_t fields written once, below; the struct
 * and the list of its field names are both made from it.  convt/_records.py
 * mirrors every record as a NumPy structured dtype of intp fields, and
 * convt._kernels refuses to import unless the names, their order and the
 * sizes agree (so the byte offsets do too).  The meaning of every field is
 * documented in _records.py.
 */
#ifndef CONVT_RECORDS_H
#define CONVT_RECORDS_H

#include <stddef.h>

#define CONVT_AXIS(X) X(in_size) X(out_size) X(stride) X(decimation)
#define CONVT_PROBLEM(X) X(ndim) X(storage) X(batch) X(groups) X(cg) X(mg) X(out_channels)
#define CONVT_GEMM_STACK(X)                                                               \
    X(taps) X(phases) X(rows) X(items) X(columns) X(chunk) X(sum_block) X(tap_start)      \
    X(phase_start) X(weight_start) X(group_size) X(kernel_start) X(table_start)           \
    X(identity) X(blocks) X(block_start) X(panel) X(tile_rows) X(tile_cols) X(row_tiles)  \
    X(col_tiles) X(row_stride) X(buffer_rows) X(buffer_planes) X(buffer_channel)          \
    X(offset_start) X(gather) X(residue_start) X(row_groups) X(group_blocks) X(siblings)  \
    X(interleave) X(exact) X(store_direct) X(partner) X(transposed) X(image_window)
#define CONVT_STACK_AXIS(X) X(first) X(extent) X(span)
#define CONVT_PHASE_AXIS(X) X(residue) X(shift) X(count)
#define CONVT_WORK_ITEM(X) X(image) X(group) X(stack) X(tile)
#define CONVT_GEMM_LAYOUT(X)                                                              \
    X(operand) X(product) X(per_thread) X(blas) X(pack_min_blocks) X(half_panels)         \
    X(masked_stores) X(input_is_tile) X(pair_pack_min_blocks) X(buffer_pack_min_blocks)  \
    X(transposed) X(stream_output)
#define CONVT_DIRECT_LAYOUT(X)                                                            \
    X(rows) X(max_stride) X(max_taps) X(phase_length) X(max_sources) X(x_rows) X(x_row)   \
    X(weights) X(floats) X(ints) X(interleave) X(masked_stores) X(transpose) X(channels)   \
    X(band_rows) X(stream_output)

#define CONVT_MEMBER(name) ptrdiff_t name;
#define CONVT_NAME(name) #name,
#define CONVT_RECORD(TYPE, FIELDS)                                                        \
    typedef struct TYPE { FIELDS(CONVT_MEMBER) } TYPE;                                    \
    static const char *const TYPE##_fields[] = {FIELDS(CONVT_NAME) NULL};

CONVT_RECORD(convt_axis, CONVT_AXIS)
CONVT_RECORD(convt_problem, CONVT_PROBLEM)
CONVT_RECORD(convt_gemm_stack, CONVT_GEMM_STACK)
CONVT_RECORD(convt_stack_axis, CONVT_STACK_AXIS)
CONVT_RECORD(convt_phase_axis, CONVT_PHASE_AXIS)
CONVT_RECORD(convt_work_item, CONVT_WORK_ITEM)
CONVT_RECORD(convt_gemm_layout, CONVT_GEMM_LAYOUT)
CONVT_RECORD(convt_direct_layout, CONVT_DIRECT_LAYOUT)

#endif /* CONVT_RECORDS_H */

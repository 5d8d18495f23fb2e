/*
 * reduce.h -- the element types and reduction operators gpuring runs, and
 * the host reduction primitive used by the host executor.
 *
 * kernels/reduce_cuda.h implements the same primitive on the GPU with the
 * same type/op enums and bit-identical results, so a step program means the
 * same thing on both.
 */
#ifndef GPURING_KERNELS_REDUCE_H
#define GPURING_KERNELS_REDUCE_H

#include <stddef.h>

#ifdef __cplusplus /* included by the CUDA sources */
extern "C" {
#endif

#include "common/gpuring_common.h"

typedef enum {
    GPURING_TYPE_INT8,
    GPURING_TYPE_UINT8,
    GPURING_TYPE_INT16,
    GPURING_TYPE_UINT16,
    GPURING_TYPE_INT32,
    GPURING_TYPE_UINT32,
    GPURING_TYPE_INT64,
    GPURING_TYPE_UINT64,
    GPURING_TYPE_FLOAT,
    GPURING_TYPE_DOUBLE,
    /* 16-bit floats (ieee binary16, and bfloat16 = the top half of a
     * float), stored as their 16-bit patterns.  appended after DOUBLE so no
     * existing value moves: use gpuring_type_is_integer(), never a range
     * test on the enum. */
    GPURING_TYPE_FLOAT16,
    GPURING_TYPE_BFLOAT16,
    GPURING_TYPE_COUNT
} gpuring_type_t;

typedef enum {
    GPURING_OP_SUM,
    GPURING_OP_PROD,
    GPURING_OP_MIN,
    GPURING_OP_MAX,
    GPURING_OP_BAND, /* bitwise: integer types only */
    GPURING_OP_BOR,
    GPURING_OP_BXOR,
    GPURING_OP_LAND, /* logical (result 0 or 1): integer types only */
    GPURING_OP_LOR,
    GPURING_OP_LXOR,
    GPURING_OP_COUNT
} gpuring_op_t;

/* bytes per element; 0 for an unknown type (inline: every call's path asks it) */
static inline size_t gpuring_type_size(gpuring_type_t type)
{
    switch (type) {
    case GPURING_TYPE_INT8:
    case GPURING_TYPE_UINT8: return 1;
    case GPURING_TYPE_INT16:
    case GPURING_TYPE_UINT16:
    case GPURING_TYPE_FLOAT16:
    case GPURING_TYPE_BFLOAT16: return 2;
    case GPURING_TYPE_INT32:
    case GPURING_TYPE_UINT32:
    case GPURING_TYPE_FLOAT: return 4;
    case GPURING_TYPE_INT64:
    case GPURING_TYPE_UINT64:
    case GPURING_TYPE_DOUBLE: return 8;
    default: return 0;
    }
}
const char *gpuring_type_name(gpuring_type_t type);
const char *gpuring_op_name(gpuring_op_t op);
/* 1 if the op is defined on the type (bitwise/logical ops need integers). */
int gpuring_op_supported(gpuring_type_t type, gpuring_op_t op);
/* 1 for the (signed or unsigned) integer types, 0 for floats and unknown. */
int gpuring_type_is_integer(gpuring_type_t type);

/*
 * dst[i] = a[i] (op) b[i] for i < count.  dst may alias a or b exactly
 * (same pointer); no other overlap.  For commutative ops only, so the order
 * of a and b does not matter.
 *
 * float16/bfloat16: sum and prod convert both operands to float (exactly),
 * do one float operation and round the result to nearest even; a nan
 * result is the canonical quiet nan 0x7fff (sign and payload are not
 * kept).  min/max compare the float values and return one operand's bits
 * unchanged, with the (a < b ? a : b) rule of float min/max.  the result
 * equals the correctly rounded exact sum or product (float has enough bits
 * for the double rounding to be harmless).  reduce_host.c has the details.
 */
void gpuring_reduce_host(void *dst, const void *a, const void *b, size_t count,
                         gpuring_type_t type, gpuring_op_t op);

/*
 * The same reduction stored twice: to dst, and to `stream` with
 * non-temporal stores (around the cache: an output not read again soon),
 * in one pass -- neither store reads its line first, nothing is read back.
 * dst may alias a or b exactly, as above; stream may be a or b (read before
 * written, line by line) but not dst.  Whole 64-byte lines of stream go
 * around the cache; the few elements before and after them are copied.
 * Returns 0, having done nothing, where it has no such loop (the 16-bit
 * floats) or stream's lines do not start on an element: the caller
 * reduces, then copies.  A caller that streamed orders those stores
 * before publishing them (_mm_sfence on x86-64).
 */
int gpuring_reduce_host_stream(void *stream, void *dst, const void *a, const void *b,
                               size_t count, gpuring_type_t type, gpuring_op_t op);

/* memcpy with non-temporal stores for `stream`'s whole 64-byte runs from its
 * first 16-byte boundary (the bytes before it and the tail by memcpy; the same
 * ordering rule as above). */
void gpuring_copy_host_stream(void *stream, const void *src, size_t bytes);

/* Is a copy to `dst` from `src` one whose destination is 1 to 31 bytes past its
 * source modulo a page?  A large copy there by rep movsb -- glibc's memcpy, and
 * the kernel's copy of a CMA read (process_vm_readv, UCX's same-host rendezvous)
 * -- ran 4-8x slower than one line over on the x86 machines this was measured
 * on (AMD EPYC, 256 KiB: memcpy from another core's writes 1.5-2.5 against 10-17
 * GB/s; a CMA read of a page-aligned source 1.5 against 7.4-9.0 GB/s at every
 * offset from 32 up) -- and a FIFO slot on a page copied into malloc's buffers,
 * 16 bytes into one, was just that (host slots now start 16 bytes in too:
 * proxy/conn.h's GPURING_SLOTS_SKEW). */
static inline int gpuring_copy_host_skewed(const void *dst, const void *src)
{
    const size_t skew = ((uintptr_t)dst - (uintptr_t)src) & 4095;

    return skew != 0 && skew <= 31;
}

/* memcpy, but a large skewed copy (above) moves 64-byte lines instead, each loaded
 * before the one before it is stored (256 KiB handed from one core to the other,
 * the sender's copy included: 28 us in 64-byte blocks, where memcpy took 177 skewed
 * and 24 unskewed). */
void gpuring_copy_host(void *dst, const void *src, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* GPURING_KERNELS_REDUCE_H */

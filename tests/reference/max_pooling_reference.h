/* Float64 reference of the max pooling family, written from spec
 * max_pooling.md §5 and §6 over packed logical arrays (no strides: tests
 * read and write through their layouts). */
#ifndef DML_TESTS_MAX_POOLING_REFERENCE_H
#define DML_TESTS_MAX_POOLING_REFERENCE_H

#include <stdint.h>

typedef struct ref_pooling {
    uint32_t spatial_rank;    /* K = 2 or 3 */
    uint32_t input_sizes[5];  /* {N, C, spatial...} */
    uint32_t output_sizes[5]; /* {N, C, spatial...} (forward output / InputGradient) */
    uint32_t strides[3], window[3], start_padding[3], dilations[3];
} ref_pooling;

/* Forward: output[i] and the chosen logical input index indices[i] (or
 * UINT64_MAX for an all-padding window, whose output is `lowest`). */
void ref_max_pooling(const ref_pooling* p, const double* input, double lowest, double* output, uint64_t* indices);

/* Gradient: output_gradient (input sizes) from input and input_gradient
 * (output sizes); sums are exact in float64. */
void ref_max_pooling_grad(const ref_pooling* p, const double* input, const double* input_gradient,
                          double* output_gradient);

#endif

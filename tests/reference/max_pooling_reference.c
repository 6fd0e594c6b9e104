#include "max_pooling_reference.h"

#include <math.h>
#include <stdbool.h>

static uint64_t element_count(uint32_t rank, const uint32_t* sizes) {
    uint64_t count = 1;
    for (uint32_t i = 0; i < rank; i++)
        count *= sizes[i];
    return count;
}

/* greater(v, best) of spec §5 with the NaN rule (decision MP-3). */
static bool greater(double v, double best) { return v > best || (isnan(best) && !isnan(v)); }

/* The argmax of the window of output element `out_index`, per spec §5: taps
 * visited outermost spatial dimension first, padding skipped, strict >. */
static uint64_t window_argmax(const ref_pooling* p, const double* input, uint64_t out_index) {
    uint32_t k = p->spatial_rank, rank = k + 2;
    uint32_t out_coords[5];
    for (uint32_t i = rank; i-- > 0;) {
        out_coords[i] = (uint32_t)(out_index % p->output_sizes[i]);
        out_index /= p->output_sizes[i];
    }
    uint64_t taps = 1;
    for (uint32_t i = 0; i < k; i++)
        taps *= p->window[i];
    uint64_t best_index = UINT64_MAX;
    double best = 0;
    for (uint64_t t = 0; t < taps; t++) {
        /* Tap t in row-major order over the window: last spatial dim fastest. */
        uint64_t rest = t, logical = 0;
        int64_t position[3];
        for (uint32_t i = k; i-- > 0;) {
            int64_t tap = (int64_t)(rest % p->window[i]);
            rest /= p->window[i];
            position[i] = (int64_t)out_coords[2 + i] * p->strides[i] - (int64_t)p->start_padding[i] +
                          tap * (int64_t)p->dilations[i];
        }
        bool inside = true;
        for (uint32_t i = 0; i < k; i++)
            inside &= position[i] >= 0 && position[i] < (int64_t)p->input_sizes[2 + i];
        if (!inside) continue;
        logical = (uint64_t)out_coords[0] * p->input_sizes[1] + out_coords[1];
        for (uint32_t i = 0; i < k; i++)
            logical = logical * p->input_sizes[2 + i] + (uint64_t)position[i];
        if (best_index == UINT64_MAX || greater(input[logical], best)) {
            best = input[logical];
            best_index = logical;
        }
    }
    return best_index;
}

void ref_max_pooling(const ref_pooling* p, const double* input, double lowest, double* output, uint64_t* indices) {
    uint64_t outputs = element_count(p->spatial_rank + 2, p->output_sizes);
    for (uint64_t o = 0; o < outputs; o++) {
        uint64_t index = window_argmax(p, input, o);
        output[o] = index == UINT64_MAX ? lowest : input[index];
        indices[o] = index;
    }
}

void ref_max_pooling_grad(const ref_pooling* p, const double* input, const double* input_gradient,
                          double* output_gradient) {
    uint64_t inputs = element_count(p->spatial_rank + 2, p->input_sizes);
    uint64_t outputs = element_count(p->spatial_rank + 2, p->output_sizes);
    for (uint64_t i = 0; i < inputs; i++)
        output_gradient[i] = 0;
    for (uint64_t o = 0; o < outputs; o++) {
        uint64_t index = window_argmax(p, input, o);
        if (index != UINT64_MAX) output_gradient[index] += input_gradient[o];
    }
}

/* The CUDA ROI kernels replayed on the host, against the CPU backend.
 *
 * src/cuda/roi_pooling.cu and roi_align.cu keep their per-element work in
 * __host__ __device__ functions; this program compiles those files for the
 * host, builds each problem with the same functions the dispatch uses, runs
 * every element (and, for the feature gradient, every block task in the
 * kernel's order: ROI chunks, ordered compaction, runs per batch of ROIs,
 * pixels) and expects the CPU backend's bits (a NaN matches any NaN). It runs
 * without a GPU, so CI checks the CUDA code's math and summation order; the
 * launches themselves run on a GPU in test_cuda_backend. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/core/half.h"
#include "../src/cuda/cuda.h"
#include "../src/ops/roi_align_math.h"
#include "../src/ops/roi_pooling_math.h"
/* The kernel files' own system includes, here at global scope (include guards
 * keep it out of the namespace below). */
#include <cooperative_groups.h>
#include <cuda_fp16.h> /* roi_pooling.cu's */

extern "C" {
#include "harness.h"
#include "roi_cases.h"
}

/* The kernel files, each in its own namespace: their internals and entry
 * points stay apart from each other and from the library's copies. */
namespace align_replay {
#include "../src/cuda/roi_align.cu"
}
namespace pooling_replay {
#include "../src/cuda/roi_pooling.cu"
}

static DMLDevice* cpu_device(void) {
    DML_DEVICE_DESC desc = {};
    desc.Backend = DML_BACKEND_CPU;
    DMLDevice* device = NULL;
    HRESULT status = dmlCreateDevice(&desc, &device);
    EXPECT(status == S_OK, "dmlCreateDevice: %s", dmlGetLastErrorMessage());
    return device;
}

/* What a dispatch would pass the kernel: the validated operator and the slot
 * addresses (here the CUDA side's host buffers). */
static dml_kernel_args kernel_args(const DMLOperator* op, test_buffer* const* inputs, uint32_t input_count,
                                   test_buffer* const* outputs, uint32_t output_count) {
    dml_kernel_args args;
    memset(&args, 0, sizeof args);
    args.op = op;
    for (uint32_t i = 0; i < input_count; i++)
        args.inputs[i] = inputs[i] ? inputs[i]->data : NULL;
    for (uint32_t i = 0; i < output_count; i++)
        args.outputs[i] = outputs[i] ? outputs[i]->data : NULL;
    return args;
}

/* ---- ROI align ---- */

using align_replay::grad_problem;
using align_replay::kChunk;
using align_replay::kRunBatch;
using align_replay::kThreads;
using align_replay::kTile;

/* gather_output_gradient, one block task at a time, its threads in turn
 * between the barriers. */
template <class T> static void replay_gather(const grad_problem& g) {
    const align_replay::align_shape& s = g.shape;
    static double acc[kThreads][kChunk];
    for (uint64_t task = 0; task < g.tasks; task++) {
        align_replay::tile_task t = align_replay::tile_task_at(g, task);
        memset(acc, 0, sizeof acc);
        for (uint32_t base = 0; base < s.roi_count; base += kThreads) {
            uint32_t touching[kThreads], total = 0;
            for (uint32_t thread = 0; thread < kThreads; thread++) {
                uint32_t r = base + thread;
                if (r < s.roi_count && align_replay::box_meets_tile(g.boxes[r], t)) touching[total++] = r;
            }
            for (uint32_t batch = 0; batch < total; batch += kRunBatch) {
                align_replay::sample_run runs[kRunBatch][2 * kTile];
                for (uint32_t thread = 0; thread < kThreads; thread++) {
                    uint32_t k = batch + thread / (2 * kTile), slot = thread % (2 * kTile);
                    if (k < total)
                        runs[thread / (2 * kTile)][slot] = align_replay::tile_run(g, g.rois[touching[k]], t, slot);
                }
                uint32_t batch_end = total - batch < kRunBatch ? total : batch + kRunBatch;
                for (uint32_t thread = 0; thread < kThreads; thread++) {
                    uint64_t y = (uint64_t)t.y0 + thread / kTile, x = (uint64_t)t.x0 + thread % kTile;
                    if (y >= s.height || x >= s.width) continue;
                    for (uint32_t next = batch; next < batch_end; next++) {
                        align_replay::sample_run rows = runs[next - batch][thread / kTile];
                        align_replay::sample_run columns = runs[next - batch][kTile + thread % kTile];
                        if (rows.begin < rows.end && columns.begin < columns.end)
                            align_replay::gather_roi<T>(g, touching[next], rows, columns, (uint32_t)y, (uint32_t)x,
                                                        t.c0, acc[thread]);
                    }
                }
            }
        }
        for (uint32_t thread = 0; thread < kThreads; thread++) {
            uint64_t y = (uint64_t)t.y0 + thread / kTile, x = (uint64_t)t.x0 + thread % kTile;
            if (y < s.height && x < s.width) align_replay::store_pixel<T>(g, t, (uint32_t)y, (uint32_t)x, acc[thread]);
        }
    }
}

/* The kernels of launch_grad, in its order. */
template <class T> static void replay_grad(const dml_kernel_args* args) {
    grad_problem g = align_replay::grad_problem_make(args);
    bool box_gradient = g.roi_gradient != NULL;
    char* scratch = (char*)malloc(align_replay::grad_scratch_layout(g, box_gradient, NULL));
    align_replay::grad_scratch_layout(g, box_gradient, scratch);
    const align_replay::align_shape& s = g.shape;
    for (uint64_t r = 0; r < s.roi_count; r++)
        align_replay::prepare_roi<T>(g, r);
    if (g.params.reduction_max)
        for (uint64_t i = 0; i < (uint64_t)s.roi_count * s.channels * s.out_height * s.out_width; i++)
            align_replay::select_max_element<T>(g, i);
    if (g.output_gradient) replay_gather<T>(g);
    if (g.roi_gradient) {
        for (uint64_t i = 0; i < (uint64_t)s.roi_count * s.channels; i++)
            align_replay::channel_sums_element<T>(g, i);
        for (uint64_t i = 0; i < (uint64_t)s.roi_count * 4; i++)
            align_replay::combine_element<T>(g, i);
    }
    free(scratch);
}

template <class T> static void replay_forward(const dml_kernel_args* args) {
    align_replay::forward_problem f = align_replay::forward_problem_make(args);
    for (uint64_t i = 0; i < f.count; i++)
        align_replay::forward_element<T>(f, i);
}

/* roi_align_forward_packed, task by task in its order (ROIs fastest), each
 * thread's outputs in turn. */
template <class T, bool ChannelsLast> static void replay_forward_packed(const dml_kernel_args* args) {
    align_replay::forward_packed_plan n;
    HRESULT status = align_replay::forward_packed_plan_make(args->op, ChannelsLast, &n);
    EXPECT(status == S_OK, "the packed plan declined (%s)", dmlStatusName(status));
    if (status != S_OK) return;
    align_replay::forward_problem f = align_replay::forward_problem_make(args);
    const align_replay::align_shape& s = f.shape;
    dml_roi_axis_sample* samples = (dml_roi_axis_sample*)malloc(n.shared_bytes);
    for (uint64_t task = 0; task < (uint64_t)s.roi_count * n.chunks; task++) {
        uint32_t r = (uint32_t)(task % s.roi_count), c0 = (uint32_t)(task / s.roi_count) * n.chunk;
        uint32_t c_last = (c0 + n.chunk < s.channels ? c0 + n.chunk : s.channels) - 1;
        align_replay::roi_region region = align_replay::region_make<T>(f.source, r, f.params, s);
        align_replay::region_samples(region, f.params, 0, 1, samples);
        for (uint32_t group = 0; group < n.groups; group++)
            for (uint32_t oy = 0; oy < s.out_height; oy++)
                for (uint32_t ox = 0; ox < s.out_width; ox++)
                    align_replay::forward_packed_outputs<T, ChannelsLast>(
                        f, n, region, samples, samples + region.x.count, r, c0 + group, c_last, oy, ox);
    }
    free(samples);
}

/* roi_align_forward_staged, task by task: the list, then each chunk of the
 * task's group staged in turn; a range of at most kept_rois ROIs has its
 * samples computed once (with the first chunk, each axis in a random count
 * of parts), a longer one each round's axes, samples and outputs for each
 * chunk (the kernel overlaps the rounds, each in its own sets of axes and
 * samples: the same values). */
template <class T, unsigned K>
static void replay_staged_tasks(const align_replay::forward_problem& f, const align_replay::staged_plan& n) {
    const align_replay::align_shape& s = f.shape;
    T* staged = (T*)malloc(n.staging_bytes);
    uint16_t* list = (uint16_t*)malloc((size_t)s.roi_count * sizeof *list);
    const size_t geometry_bytes = n.shared_bytes - n.staging_bytes - n.list_bytes;
    void* geometry = malloc(geometry_bytes);
    memset(geometry, 0xFF, geometry_bytes); /* NaN fractions, out-of-bounds taps: a record never written shows */
    const align_replay::staged_samples kept_samples = align_replay::staged_kept(geometry, n);
    for (uint64_t task = 0; task < align_replay::staged_tasks(n, s.batch); task++) {
        const align_replay::staged_task t = align_replay::staged_task_of(n, s, task);
        uint32_t listed = 0;
        for (uint32_t r = 0; r < s.roi_count; r++)
            if (align_replay::staged_list_entry(f, t.b, r, &list[listed])) listed++;
        const uint32_t begin = (uint32_t)((uint64_t)listed * t.range / n.ranges);
        const uint32_t end = (uint32_t)((uint64_t)listed * (t.range + 1) / n.ranges);
        if (begin == end) continue;
        const bool kept = end - begin <= n.kept_rois;
        for (uint32_t j = 0, c0; (c0 = align_replay::staged_chunk_channel(n, s, t, j)) < s.channels; j++) {
            const T* source = align_replay::staging_source<T>(f, t.b, c0);
            for (uint32_t i = 0; i < s.height * s.width; i++) {
                T values[K];
                for (unsigned k = 0; k < K; k++)
                    values[k] = align_replay::staging_value<T>(f, source, c0, i, k);
                align_replay::staging_store<T, K>(f, n, staged, i, values);
            }
            if (kept) {
                if (j == 0) {
                    /* The kernel's parts come from its block size and range: any count. */
                    const uint32_t slots = n.x_slots > n.y_slots ? n.x_slots : n.y_slots;
                    const uint32_t parts = (uint32_t)test_rand_range(1, slots);
                    for (uint32_t i = 0; i < end - begin; i++)
                        for (uint32_t axis = 0; axis < 2; axis++)
                            for (uint32_t part = 0; part < parts; part++)
                                align_replay::staged_kept_records<T>(f, n, kept_samples, i, list[begin + i], axis == 1,
                                                                     part, parts);
                }
                for (uint32_t i = 0; i < end - begin; i++)
                    for (uint32_t oy = 0; oy < s.out_height; oy++)
                        for (uint32_t ox = 0; ox < s.out_width; ox++)
                            align_replay::staged_output<T, K>(f, n, staged, kept_samples, list[begin + i], i, oy, ox,
                                                              c0);
                continue;
            }
            for (uint32_t first = begin, round = 0; first < end; first += n.round_rois, round++) {
                const uint32_t count = end - first < n.round_rois ? end - first : n.round_rois;
                const align_replay::staged_samples g = align_replay::staged_samples_at(geometry, n, round);
                for (uint32_t i = 0; i < 2 * count; i++)
                    align_replay::staged_axis<T>(f, g, i / 2, list[first + i / 2], i % 2);
                for (uint32_t i = 0; i < count; i++)
                    for (uint32_t slot = 0; slot < n.x_slots + n.y_slots; slot++)
                        align_replay::staged_sample(f, n, g, i, slot);
                for (uint32_t i = 0; i < count; i++)
                    for (uint32_t oy = 0; oy < s.out_height; oy++)
                        for (uint32_t ox = 0; ox < s.out_width; ox++)
                            align_replay::staged_output<T, K>(f, n, staged, g, list[first + i], i, oy, ox, c0);
            }
        }
    }
    free(staged);
    free(list);
    free(geometry);
}

/* The staged kernel's plan for an H100's 227 KB of shared memory a block,
 * with the choices the device's plan makes at random: ROI ranges, chunk
 * groups, and the samples of as many ROIs kept as the rest of the shared
 * memory holds (a block alone on its multiprocessor), as the rounds'
 * geometry holds, or as few as a random number (the rounds then run for
 * longer ranges). */
template <class T> static void replay_forward_staged(const dml_kernel_args* args) {
    align_replay::staged_plan n;
    const size_t limit = 232448 - 128;
    HRESULT status = align_replay::staged_plan_make(args->op, limit, &n);
    EXPECT(status == S_OK, "the staged plan declined (%s)", dmlStatusName(status));
    if (status != S_OK) return;
    n.ranges = 1 + test_rand_range(0, 3);
    n.group = 1 + test_rand_range(0, 3);
    const int keep = test_rand_range(0, 2);
    if (keep == 0) align_replay::staged_plan_keep(&n, limit);
    if (keep == 2) n.kept_rois = test_rand_range(0, n.kept_rois);
    const align_replay::forward_problem f = align_replay::forward_problem_make(args);
    if (n.k == 4)
        replay_staged_tasks<T, 4>(f, n);
    else if (n.k == 2)
        replay_staged_tasks<T, 2>(f, n);
    else
        replay_staged_tasks<T, 1>(f, n);
}

/* Runs `run` on the CPU backend and replays the CUDA code on its CUDA side
 * (with packed, the forward pass as roi_align_forward_packed, or with staged
 * as roi_align_forward_staged: packed NCHW, or channels-last where the case
 * says so). */
static void compare_roi_align_run(DMLDevice* cpu, roi_align_run* run, const roi_align_case* packed = NULL,
                                  bool staged = false) {
    test_buffer *inputs[4], *outputs[2];
    roi_align_run_buffers(run, false, inputs, outputs);
    HRESULT status = test_run(cpu, &run->op, run->input_count, inputs, run->output_count, outputs);
    EXPECT(status == S_OK, "CPU %s (%s); %s", dmlStatusName(status), dmlGetLastErrorMessage(), run->context);
    DMLOperator* op = NULL;
    if (status == S_OK) status = dmlCreateOperator(cpu, &run->op, &op);
    if (status != S_OK) return;
    roi_align_run_buffers(run, true, inputs, outputs);
    dml_kernel_args args = kernel_args(op, inputs, run->input_count, outputs, run->output_count);
    bool is_half = run->input_gradient.present
                       ? run->input_gradient.tensor.buffer.DataType == DML_TENSOR_DATA_TYPE_FLOAT16
                       : run->input.tensor.buffer.DataType == DML_TENSOR_DATA_TYPE_FLOAT16;
    bool grad = run->op.Type == DML_OPERATOR_ROI_ALIGN_GRAD;
    if (grad)
        is_half ? replay_grad<uint16_t>(&args) : replay_grad<float>(&args);
    else if (packed && staged)
        is_half ? replay_forward_staged<uint16_t>(&args) : replay_forward_staged<float>(&args);
    else if (packed && packed->channels_last)
        is_half ? replay_forward_packed<uint16_t, true>(&args) : replay_forward_packed<float, true>(&args);
    else if (packed)
        is_half ? replay_forward_packed<uint16_t, false>(&args) : replay_forward_packed<float, false>(&args);
    else
        is_half ? replay_forward<uint16_t>(&args) : replay_forward<float>(&args);
    dmlReleaseOperator(op);
    roi_align_run_compare(run, "host replay");
}

TEST_CASE(replay_roi_align_matches_cpu) {
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < 300 && !test_case_failed(); iteration++) {
        roi_align_case c;
        random_roi_align_case(&c);
        roi_align_run run;
        roi_align_forward_setup(&run, &c);
        compare_roi_align_run(cpu, &run);
        roi_align_run_free(&run);
        /* InputTensor is required for MAX and for the ROI gradient (§3). */
        bool want_roi_gradient = test_rand_bool();
        bool want_output_gradient = !want_roi_gradient || test_rand_bool();
        bool with_input = c.reduction == DML_REDUCE_FUNCTION_MAX || want_roi_gradient || test_rand_bool();
        roi_align_grad_setup(&run, &c, with_input, want_output_gradient, want_roi_gradient);
        compare_roi_align_run(cpu, &run);
        roi_align_run_free(&run);
        roi_align_case_free(&c);
    }
    dmlReleaseDevice(cpu);
}

/* The packed forward kernel, on the cases of test_cuda_backend's
 * cuda_roi_align_nchw_matches_cpu and cuda_roi_align_nhwc_matches_cpu. */
TEST_CASE(replay_roi_align_packed_matches_cpu) {
    DMLDevice* cpu = cpu_device();
    for (int layout = 0; layout < 2 && !test_case_failed(); layout++)
        for (int iteration = 0; iteration < PACKED_ROI_ALIGN_CASES && !test_case_failed(); iteration++) {
            roi_align_case c;
            packed_roi_align_case(&c, iteration, layout == 1);
            roi_align_run run;
            roi_align_forward_setup(&run, &c);
            compare_roi_align_run(cpu, &run, &c);
            roi_align_run_free(&run);
            roi_align_case_free(&c);
        }
    dmlReleaseDevice(cpu);
}

/* The staged forward kernel, on the cases of test_cuda_backend's
 * cuda_roi_align_staged_nchw_matches_cpu (those it takes). */
TEST_CASE(replay_roi_align_staged_matches_cpu) {
    DMLDevice* cpu = cpu_device();
    for (int iteration = 0; iteration < STAGED_ROI_ALIGN_CASES && !test_case_failed(); iteration++) {
        roi_align_case c;
        staged_roi_align_case(&c, iteration);
        if (staged_roi_align_case_declines(iteration)) {
            roi_align_case_free(&c);
            continue;
        }
        roi_align_run run;
        roi_align_forward_setup(&run, &c);
        compare_roi_align_run(cpu, &run, &c, true);
        roi_align_run_free(&run);
        roi_align_case_free(&c);
    }
    dmlReleaseDevice(cpu);
}

/* More than 256 ROIs per image (several scan chunks), heavy overlap. */
TEST_CASE(replay_roi_align_grad_many_overlapping_rois) {
    DMLDevice* cpu = cpu_device();
    for (int variant = 2; variant < 4 && !test_case_failed(); variant++) {
        roi_align_case c;
        large_roi_align_case(&c, variant);
        roi_align_run run;
        roi_align_grad_setup(&run, &c, true, true, true);
        compare_roi_align_run(cpu, &run);
        roi_align_run_free(&run);
        roi_align_case_free(&c);
    }
    dmlReleaseDevice(cpu);
}

/* ---- ROI pooling ---- */

/* roi_pooling_nchw, task by task in its order, each thread's outputs in turn. */
template <class T, bool ChannelsLast>
static void replay_pooling_packed(const DMLOperator* op, const dml_kernel_args* args) {
    pooling_replay::packed_plan n;
    HRESULT status = pooling_replay::packed_plan_make(op, ChannelsLast, &n);
    EXPECT(status == S_OK, "the packed plan declined (%s)", dmlStatusName(status));
    if (status != S_OK) return;
    const pooling_replay::roi_pooling_problem f = pooling_replay::bound_problem(n.shape_only, args);
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width, plane_size = f.height * f.width;
    const uint32_t chunk = n.groups * pooling_replay::kChannelsPerThread;
    dml_pooled_bin* bins = (dml_pooled_bin*)malloc(pooling_replay::packed_shared_bytes(f));
    for (uint64_t task = 0; task < (uint64_t)n.rois * n.chunks; task++) {
        uint32_t r = (uint32_t)(task / n.chunks), c0 = (uint32_t)(task % n.chunks) * chunk, batch = 0;
        uint32_t c_last = (c0 + chunk < f.channels ? c0 + chunk : f.channels) - 1;
        pooling_replay::roi_bins<T>(f, r, 0, 1, bins, &batch);
        const T* image = (const T*)f.input + (uint64_t)batch * f.channels * plane_size;
        T* out = (T*)f.output + (uint64_t)r * f.channels * PH * PW;
        for (uint32_t group = 0; group < n.groups; group++)
            for (uint32_t ph = 0; ph < PH; ph++)
                for (uint32_t pw = 0; pw < PW; pw++)
                    pooling_replay::pool_bin_outputs<T, ChannelsLast>(f, n, image, out, bins[ph], bins[PH + pw],
                                                                      c0 + group, c_last, ph, pw);
    }
    free(bins);
}

/* roi_pooling_staged<T, Words, ChannelsLast>, task by task in its order:
 * the chunk staged (into a poisoned buffer), then scans of the list, each
 * keeping the share's next `kept` ROIs of the image where the kernel's ranks
 * put them, their bins, and every (ROI, ph, pw) thread in turn. */
template <class T, unsigned Words, bool ChannelsLast>
static void replay_staged_kernel(const pooling_replay::staged_plan& n, const pooling_replay::roi_pooling_problem& f,
                                 bool whole) {
    using namespace pooling_replay;
    const uint32_t PH = f.params.pooled_height, PW = f.params.pooled_width, per_roi = PH + PW;
    uint32_t* stage = (uint32_t*)malloc(n.regions_offset);
    uint32_t* bins = (uint32_t*)malloc((size_t)n.kept * per_roi * sizeof *bins);
    uint32_t* indices = (uint32_t*)malloc((size_t)n.kept * sizeof *indices);
    kept_region* regions = (kept_region*)malloc((size_t)n.kept * sizeof *regions);
    for (uint64_t t = 0; t < (uint64_t)n.shares * f.batch * n.chunks; t++) {
        const staged_task task = staged_task_of(f, n, t);
        const T* image = (const T*)f.input + (uint64_t)task.b * f.channels * f.height * f.width;
        memset(stage, 0xFF, n.regions_offset); /* NaN: a read of an unstaged pixel shows */
        for (uint32_t pixel = 0; pixel < f.height * f.width; pixel++) {
            uint32_t words[Words];
            load_pixel<T, Words, ChannelsLast>(f, image, task.c0, pixel, whole, words);
            copy_words<Words>(stage + staged_offset<Words>(f, n, pixel), words);
        }
        uint32_t pooled = 0, share_rois = 0;
        do {
            memset(regions, 0xFF, (size_t)n.kept * sizeof *regions); /* poisoned: every kept slot is written */
            memset(indices, 0xFF, (size_t)n.kept * sizeof *indices);
            uint32_t ranked = 0;
            for (uint32_t r = 0; r < n.rois; r++) {
                float row[5];
                roi_row<T>(f, r, row);
                const dml_pooled_region region = dml_roi_pooled_region(row, f.batch, f.params.spatial_scale);
                if (!region_of_image(region, task.b)) continue;
                const uint32_t rank = ranked++, number = share_ranks_below(rank, task.share, n.shares) - pooled;
                if (rank % n.shares == task.share && number < n.kept) {
                    regions[number] = kept_region_of(region);
                    indices[number] = r;
                }
            }
            share_rois = share_ranks_below(ranked, task.share, n.shares);
            const uint32_t left = share_rois > pooled ? share_rois - pooled : 0;
            const uint32_t count = left < n.kept ? left : n.kept;
            for (uint32_t i = 0; i < count * per_roi; i++)
                bins[i] = staged_bin(f, regions[i / per_roi], i % per_roi);
            for (uint32_t k = 0; k < count; k++)
                for (uint32_t ph = 0; ph < PH; ph++)
                    for (uint32_t pw = 0; pw < PW; pw++)
                        pool_staged_bin<T, Words, ChannelsLast>(f, n, stage, unpack_bin(bins[k * per_roi + ph]),
                                                                unpack_bin(bins[k * per_roi + PH + pw]), indices[k],
                                                                task.c0, ph, pw, whole);
            pooled += n.kept;
        } while (pooled < share_rois);
    }
    free(stage);
    free(bins);
    free(indices);
    free(regions);
}

/* The staged kernel's plan for `resident` blocks (a number of shares of
 * an image's ROIs) that keep `kept` ROIs each, then its replay; the plan's
 * pixel words into *words. */
template <class T, bool ChannelsLast>
static void replay_pooling_staged(const DMLOperator* op, const dml_kernel_args* args, uint64_t resident, uint32_t kept,
                                  uint32_t* words) {
    pooling_replay::staged_plan n;
    HRESULT status = pooling_replay::staged_plan_make(op, ChannelsLast, resident, kept, &n);
    EXPECT(status == S_OK, "the staged plan declined (%s)", dmlStatusName(status));
    if (status != S_OK) return;
    if (n.shares % 2 == 0) n.cluster = 2; /* plan_staged's clusters: their order of the tasks */
    const pooling_replay::roi_pooling_problem f = pooling_replay::bound_problem(n.shape_only, args);
    *words = n.words;
    /* Channels-last pixels as whole vectors where K divides C (run_staged's
     * rule; the host buffers are aligned). */
    const bool whole = ChannelsLast && f.channels % n.channels == 0;
    switch (n.words) {
    case 8: replay_staged_kernel<T, 8, ChannelsLast>(n, f, whole); break;
    case 4: replay_staged_kernel<T, 4, ChannelsLast>(n, f, whole); break;
    case 2: replay_staged_kernel<T, 2, ChannelsLast>(n, f, whole); break;
    default: replay_staged_kernel<T, 1, ChannelsLast>(n, f, whole); break;
    }
}

TEST_CASE(replay_roi_pooling_matches_cpu) {
    DMLDevice* cpu = cpu_device();
    uint32_t staged_words[9] = {}; /* staged replays by pixel words */
    for (int iteration = 0; iteration < 300 && !test_case_failed(); iteration++) {
        DML_TENSOR_DATA_TYPE type = test_rand_bool() ? DML_TENSOR_DATA_TYPE_FLOAT32 : DML_TENSOR_DATA_TYPE_FLOAT16;
        bool packed = iteration % 2 == 1; /* roi_pooling_packed too: NCHW, or channels-last (every fourth) */
        bool channels_last = iteration % 4 == 3;
        uint32_t batch = test_rand_range(1, 3), channels = test_rand_range(1, channels_last ? 1300 : packed ? 70 : 4);
        uint32_t height = test_rand_range(1, 12), width = test_rand_range(1, 12), roi_count = test_rand_range(1, 10);
        if (packed && iteration % 8 == 5) channels = test_rand_range(1, 2); /* one word a staged pixel, mostly */
        if (packed && iteration % 8 == 1) { /* the staged kernel's narrower pixels, two rounds of ROIs */
            height = test_rand_range(20, 90);
            width = test_rand_range(20, 90);
            roi_count = test_rand_range(60, 300); /* up to two rounds of the kernel's threads */
        }
        uint32_t pooled_height = test_rand_range(1, 4), pooled_width = test_rand_range(1, packed ? 9 : 4);
        float scale = random_roi_scale();
        uint32_t in_sizes[4] = {batch, channels, height, width}, roi_sizes[4] = {1, 1, roi_count, 5};
        uint32_t out_sizes[4] = {roi_count, channels, pooled_height, pooled_width};
        twin_buffer input, rois, output;
        twin_init(&input, type, 4, in_sizes, packed ? TEST_LAYOUT_PACKED : test_random_layout(true));
        twin_init(&rois, type, 4, roi_sizes, test_random_layout(true));
        twin_init(&output, type, 4, out_sizes, packed ? TEST_LAYOUT_PACKED : test_random_layout(false));
        if (channels_last) {
            twin_make_channels_last(&input);
            twin_make_channels_last(&output);
        }
        double* image = random_image(input.tensor.element_count, true);
        twin_fill(&input, image);
        double* rows = (double*)malloc((size_t)roi_count * 5 * sizeof *rows);
        for (uint32_t r = 0; r < roi_count; r++) {
            uint32_t kind = test_rand_range(0, 19);
            rows[r * 5] = kind == 0  ? NAN
                          : kind < 3 ? test_rand_double(-1.5, batch + 0.5)
                                     : test_rand_range(0, batch - 1);
            for (int k = 1; k < 5; k++)
                rows[r * 5 + k] = random_roi_coordinate(k % 2 ? width : height, scale, true);
        }
        twin_fill(&rois, rows);
        DML_ROI_POOLING_OPERATOR_DESC desc = {
            &input.tensor.desc, &rois.tensor.desc, &output.tensor.desc, scale, {pooled_width, pooled_height}};
        DML_OPERATOR_DESC op_desc = {DML_OPERATOR_ROI_POOLING, &desc};
        char context[200];
        snprintf(context, sizeof context, "ROI_POOLING %s in [%u %u %u %u] R %u pooled %ux%u scale %g%s",
                 dmlDataTypeName(type), batch, channels, height, width, roi_count, pooled_height, pooled_width, scale,
                 channels_last ? " channels-last" : "");
        test_buffer* cpu_inputs[2] = {&input.cpu, &rois.cpu};
        test_buffer* cpu_outputs[1] = {&output.cpu};
        HRESULT status = test_run(cpu, &op_desc, 2, cpu_inputs, 1, cpu_outputs);
        EXPECT(status == S_OK, "CPU %s (%s); %s", dmlStatusName(status), dmlGetLastErrorMessage(), context);
        DMLOperator* op = NULL;
        if (status == S_OK && dmlCreateOperator(cpu, &op_desc, &op) == S_OK) {
            test_buffer* inputs[2] = {&input.cuda, &rois.cuda};
            test_buffer* outputs[1] = {&output.cuda};
            dml_kernel_args args = kernel_args(op, inputs, 2, outputs, 1);
            pooling_replay::roi_pooling_problem f = pooling_replay::roi_pooling_problem_make(&args);
            for (uint64_t i = 0; i < f.count; i++) {
                if (type == DML_TENSOR_DATA_TYPE_FLOAT16)
                    pooling_replay::pool_element<uint16_t>(f, i);
                else
                    pooling_replay::pool_element<float>(f, i);
            }
            /* A copy of an input element: the same bits, NaN payloads included. */
            EXPECT(memcmp(output.cpu.block, output.cuda.block, (size_t)output.cpu.size + 2 * TEST_GUARD_BYTES) == 0,
                   "ROI_POOLING replay differs from the CPU; %s", context);
            if (packed) {
                test_buffer_poison(&output.cuda);
                bool is_half = type == DML_TENSOR_DATA_TYPE_FLOAT16;
                if (channels_last)
                    is_half ? replay_pooling_packed<uint16_t, true>(op, &args)
                            : replay_pooling_packed<float, true>(op, &args);
                else
                    is_half ? replay_pooling_packed<uint16_t, false>(op, &args)
                            : replay_pooling_packed<float, false>(op, &args);
                EXPECT(memcmp(output.cpu.block, output.cuda.block, (size_t)output.cpu.size + 2 * TEST_GUARD_BYTES) == 0,
                       "ROI_POOLING packed replay differs from the CPU; %s", context);
                test_buffer_poison(&output.cuda);
                /* 1 .. 40 resident blocks: one share of an image's ROIs or
                 * several; blocks that keep 1 .. 4 ROIs (several scans a
                 * task) or up to 80. */
                uint64_t resident = test_rand_range(1, 40);
                uint32_t kept = test_rand_bool() ? test_rand_range(1, 4) : test_rand_range(1, 80), words = 0;
                if (channels_last)
                    is_half ? replay_pooling_staged<uint16_t, true>(op, &args, resident, kept, &words)
                            : replay_pooling_staged<float, true>(op, &args, resident, kept, &words);
                else
                    is_half ? replay_pooling_staged<uint16_t, false>(op, &args, resident, kept, &words)
                            : replay_pooling_staged<float, false>(op, &args, resident, kept, &words);
                staged_words[words]++;
                EXPECT(memcmp(output.cpu.block, output.cuda.block, (size_t)output.cpu.size + 2 * TEST_GUARD_BYTES) == 0,
                       "ROI_POOLING staged replay (%u words a pixel, %u resident blocks, %u kept) differs from the "
                       "CPU; %s",
                       words, (unsigned)resident, kept, context);
            }
            dmlReleaseOperator(op);
        }
        twin_free(&input);
        twin_free(&rois);
        twin_free(&output);
        free(image);
        free(rows);
    }
    for (uint32_t words = 1; words <= 8; words *= 2)
        EXPECT(staged_words[words] > 0, "no staged replay with %u words a pixel", words);
    dmlReleaseDevice(cpu);
}

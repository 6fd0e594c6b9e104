/* What every benchmark program shares (BENCHMARKS.md): timing with medians,
 * the machine's copy bandwidth (the floor of a memory-bound operator), one
 * report line per measurement in a human table and a CSV beside it, libdml
 * jobs through the public API (the implementation's name and the temporary
 * resource included), and oneDNN, the CPU peer.
 *
 * A program's main, over a table of shapes (bench_run_program, at the end):
 *
 *     bench_program program = {title, shapes, shape_name, measure (libdml's rows of a shape and type,
 *                              bench_report against bench_peer_best, then bench_report_peers),
 *                              peer_layouts, measure_peer (oneDNN's rows, bench_peer_emit)};
 *     return bench_run_program(&program, argc, argv);
 *
 * or the same steps by hand: bench_begin (BENCH_PEER_CHILD: measure oneDNN
 * only), the measurements, bench_end.
 *
 * oneDNN reads its ISA cap (ONEDNN_MAX_CPU_ISA) once per process, so its
 * rows come from child processes of the same program, one per cap
 * (bench_begin runs them: oneDNN's default and SSE41, faster than its AVX2
 * pooling on AMD). Each child prints its rows; the parent keeps them.
 * Arguments: --csv PATH writes the CSV; --only TEXT measures only the
 * workloads whose name contains TEXT (bench_selected); --peer-only is the
 * child's mode. */
#ifndef DML_BENCH_H
#define DML_BENCH_H

#include <dml/dml.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef DML_BENCH_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

/* ---- Timing and the floor ---- */
double bench_now_seconds(void);

/* Runs fn(context) `warmup` times, then `repeats` timed times; returns the
 * median seconds. */
double bench_median_seconds(void (*fn)(void* context), void* context, int warmup, int repeats);
enum { BENCH_WARMUP = 3, BENCH_REPEATS = 15 };

/* Copy bandwidth of this machine in bytes/s (bytes read + bytes written):
 * `threads` threads copy BENCH_COPY_MIB MiB (8 times the 32 MiB L3 here)
 * into as many, once with plain stores and once with non-temporal ones,
 * best of BENCH_COPY_REPEATS each (the best run is what the machine can do;
 * a median also measures the other tenants). `best` is the faster. */
typedef struct bench_copy {
    double plain, non_temporal, best;
} bench_copy;
enum { BENCH_COPY_MIB = 256, BENCH_COPY_REPEATS = 10 };
bench_copy bench_copy_bandwidths(int threads);
double bench_copy_bandwidth(int threads); /* bench_copy_bandwidths(threads).best */

/* ---- A program's run ---- */
typedef struct bench_peer_row {
    char workload[96];
    char dtype[16];
    char layout[32];         /* "nchw", "nChw8c", ... with the ISA cap: "nChw8c isa=SSE41" */
    char implementation[64]; /* oneDNN's impl_info_str, e.g. "jit:avx2" */
    double seconds, bytes;
} bench_peer_row;

typedef struct bench_context {
    int threads;
    double copy_bandwidth; /* bytes/s, read + write, measured at bench_begin */
    FILE* csv;             /* NULL when --csv was not given */
    bench_peer_row* peers; /* oneDNN's rows from the child processes */
    size_t peer_count;
    const char* only; /* --only TEXT, or NULL */
} bench_context;

typedef enum bench_mode { BENCH_MAIN, BENCH_PEER_CHILD } bench_mode;

/* Parses the arguments. In the main process: measures the copy bandwidth,
 * prints the title and the machine line, opens the CSV (header row), and
 * runs the peer children, collecting their rows. In a child: does nothing
 * but return BENCH_PEER_CHILD. */
bench_mode bench_begin(bench_context* ctx, const char* title, int argc, char** argv);
/* The same for a program whose peer is not oneDNN (`peer` names it, e.g.
 * "torchvision"): no oneDNN children, and the header says which peer the
 * ratios refer to. */
bench_mode bench_begin_with_peer(bench_context* ctx, const char* title, const char* peer, int argc, char** argv);
void bench_end(bench_context* ctx);
/* Whether a workload (or a shape name) is to be measured (--only). */
bool bench_selected(const bench_context* ctx, const char* workload);

/* A child's row, printed for the parent (the ISA cap is added to layout). */
void bench_peer_emit(const bench_peer_row* row);
/* The fastest peer row of a workload and type over every layout and cap, or NULL. */
const bench_peer_row* bench_peer_best(const bench_context* ctx, const char* workload, const char* dtype);
/* Reports every peer row of a workload and type (against `best`). */
void bench_report_peers(const bench_context* ctx, const char* workload, const char* dtype);

/* One measurement. `bytes` is the minimal traffic (each input read once,
 * each output written once); peer_seconds <= 0 when there is no peer. */
typedef struct bench_row {
    const char* workload; /* e.g. "maxpool_fwd_idx 32x256x56x56 3x3/2 p1" */
    const char* dtype;    /* "FLOAT32", "FLOAT16" */
    const char* layout;   /* "nchw", "nhwc", "nChw8c", ... */
    const char* library;  /* "libdml", "oneDNN" */
    const char* implementation;
    double seconds, bytes;
    const char* peer; /* "oneDNN nChw8c jit:sse41", or NULL */
    double peer_seconds;
} bench_row;

/* Prints the row (its operator, type, library, layout and implementation;
 * time, GB/s, fraction of the floor bytes / copy bandwidth, ratio = seconds
 * / peer seconds: < 1 is faster than the peer) and appends it to the CSV:
 * workload,operator,dtype,layout,library,implementation,median_ms,gb_per_s,floor_fraction,peer,peer_ms,ratio
 * The operator is the workload's first word ("maxpool_fwd_idx",
 * "bn_train_grad"): rows of one operator compare with each other only. */
void bench_report(const bench_context* ctx, const bench_row* row);

/* ---- libdml through the public API ---- */
#define BENCH_CHECK_DML(call)                                                                                          \
    do {                                                                                                               \
        HRESULT status_ = (call);                                                                                      \
        if (FAILED(status_)) {                                                                                         \
            fprintf(stderr, "%s: %s\n", #call, dmlGetLastErrorMessage());                                              \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

enum { BENCH_MAX_BINDINGS = 8 };

/* A compiled operator with its bindings and the TemporaryResource it asked for. */
typedef struct bench_dml_job {
    DMLCompiledOperator* compiled;
    DML_DISPATCH_BINDINGS bindings;
    DML_BUFFER_BINDING buffers[BENCH_MAX_BINDINGS], temporary_buffer;
    DML_BINDING_DESC inputs[BENCH_MAX_BINDINGS], outputs[BENCH_MAX_BINDINGS];
    void* temporary;
    char implementation[64]; /* DML_COMPILED_OPERATOR_INFO.ImplementationName */
} bench_dml_job;

/* Creates, compiles and initializes desc, then binds buffers[0..inputs) as
 * inputs and the next `outputs` as outputs (a NULL buffer binds NONE), with
 * sizes in bytes, and a TemporaryResource of TemporaryResourceSize bytes. */
void bench_dml_prepare(bench_dml_job* job, DMLDevice* device, const DML_OPERATOR_DESC* desc, int inputs, int outputs,
                       void* const* buffers, const uint64_t* sizes);
/* Dispatches the job (a bench_median_seconds callback). */
void bench_dml_run(void* job);
/* Median seconds of the job's dispatch. */
double bench_dml_time(bench_dml_job* job);
void bench_dml_release(bench_dml_job* job);

/* A buffer tensor description of `rank` sizes with explicit element strides
 * (NULL: packed); TotalTensorSizeInBytes from DMLCalcBufferTensorSize. */
DML_TENSOR_DESC* bench_tensor(DML_BUFFER_TENSOR_DESC* buffer, DML_TENSOR_DESC* desc, DML_TENSOR_DATA_TYPE type,
                              uint32_t rank, const UINT* sizes, const UINT* strides);
/* Channels-last element strides (NHWC, NDHWC) for logical sizes {N, C, ...}. */
void bench_channels_last_strides(uint32_t rank, const UINT* sizes, UINT* strides);
/* malloc'ed, 64-byte aligned, filled with reproducible values in [-1, 1)
 * of the type (FLOAT32 or FLOAT16). */
void* bench_filled(DML_TENSOR_DATA_TYPE type, uint64_t elements);
const char* bench_dtype_name(DML_TENSOR_DATA_TYPE type);

#ifdef DML_BENCH_HAVE_ONEDNN
/* ---- oneDNN (the peer) ---- */
#define BENCH_CHECK_DNNL(call)                                                                                         \
    do {                                                                                                               \
        dnnl_status_t status_ = (call);                                                                                \
        if (status_ != dnnl_success) {                                                                                 \
            fprintf(stderr, "%s failed: %d\n", #call, (int)status_);                                                   \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

typedef struct bench_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
} bench_dnnl;

void bench_dnnl_init(bench_dnnl* dnnl);
void bench_dnnl_free(bench_dnnl* dnnl);
dnnl_memory_desc_t bench_dnnl_md(int rank, const dnnl_dim_t* dims, dnnl_data_type_t type, dnnl_format_tag_t tag);
/* A memory of md allocated by oneDNN; filled with values in [-1, 1) when `fill`. */
dnnl_memory_t bench_dnnl_memory(const bench_dnnl* dnnl, const dnnl_memory_desc_t* md, bool fill);
/* Median seconds of executing primitive with args (and waiting). */
double bench_dnnl_time(const bench_dnnl* dnnl, dnnl_primitive_t primitive, int arg_count, const dnnl_exec_arg_t* args);
/* oneDNN's name for the implementation pd chose, e.g. "jit:avx2". */
const char* bench_dnnl_impl(const_dnnl_primitive_desc_t pd);
/* Whether oneDNN chose a reference (untuned) implementation: a blocking
 * without a JIT kernel at the ISA cap (nChw16c under SSE41), no peer anyone
 * runs, and slow to measure; the benches skip those rows. */
bool bench_dnnl_is_reference(const_dnnl_primitive_desc_t pd);
#endif

/* ---- A program over a table of shapes ---- */

/* What a program measures, by index into its own table of shapes. Its
 * main is bench_run_program(&program, argc, argv), which parses the
 * arguments (bench_begin), and then:
 * - in a peer child: measure_peer for every selected shape, FLOAT32 and
 *   FLOAT16, and each of its peer_layouts;
 * - otherwise: with a device of all cores, for every selected shape its
 *   name, then measure for FLOAT32 and for FLOAT16 (libdml's rows and the
 *   peers' rows: bench_report, bench_report_peers), and bench_end. */
typedef struct bench_program {
    const char* title;
    size_t shapes;
    const char* (*shape_name)(size_t shape); /* matched by --only, printed as the heading */
    void (*measure)(const bench_context* ctx, DMLDevice* device, size_t shape, DML_TENSOR_DATA_TYPE type);
#ifdef DML_BENCH_HAVE_ONEDNN
    size_t peer_layouts;
    void (*measure_peer)(const bench_dnnl* dnnl, size_t shape, dnnl_data_type_t type, size_t layout);
#endif
} bench_program;

int bench_run_program(const bench_program* program, int argc, char** argv);

#endif

/* popen, readlink: POSIX. */
#define _POSIX_C_SOURCE 200809L

#include "bench.h"

#include <emmintrin.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <unistd.h>

/* ---- Timing and the floor ---- */

double bench_now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

static int compare_doubles(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

double bench_median_seconds(void (*fn)(void* context), void* context, int warmup, int repeats) {
    for (int i = 0; i < warmup; i++)
        fn(context);
    double* times = malloc((size_t)repeats * sizeof *times);
    for (int i = 0; i < repeats; i++) {
        double start = bench_now_seconds();
        fn(context);
        times[i] = bench_now_seconds() - start;
    }
    qsort(times, (size_t)repeats, sizeof *times, compare_doubles);
    double median = times[repeats / 2];
    free(times);
    return median;
}

/* The copy behind the floor: each thread copies its contiguous share of
 * src into dst, 16 bytes at a time, with ordinary stores (the destination's
 * lines are read before they are written) or with non-temporal ones
 * (written around the caches: no read). */
typedef struct copy_job {
    char* dst;
    const char* src;
    size_t bytes; /* a multiple of 16 */
    int threads;
    bool non_temporal;
} copy_job;

static void parallel_copy(void* context) {
    copy_job* job = context;
    size_t blocks = job->bytes / 16, share = (blocks + (size_t)job->threads - 1) / (size_t)job->threads;
#pragma omp parallel for num_threads(job->threads) schedule(static)
    for (int t = 0; t < job->threads; t++) {
        size_t begin = (size_t)t * share, end = begin + share < blocks ? begin + share : blocks;
        const __m128i* from = (const __m128i*)job->src;
        __m128i* to = (__m128i*)job->dst;
        if (job->non_temporal) {
            for (size_t i = begin; i < end; i++)
                _mm_stream_si128(to + i, _mm_load_si128(from + i));
            _mm_sfence();
        } else {
            for (size_t i = begin; i < end; i++)
                _mm_store_si128(to + i, _mm_load_si128(from + i));
        }
    }
}

/* Runs fn(context) `warmup` times, then `repeats` times; returns the
 * fastest: what the machine can do, where the median also measures the
 * other tenants of a shared machine. */
static double best_seconds(void (*fn)(void* context), void* context, int warmup, int repeats) {
    for (int i = 0; i < warmup; i++)
        fn(context);
    double best = 0;
    for (int i = 0; i < repeats; i++) {
        double start = bench_now_seconds();
        fn(context);
        double seconds = bench_now_seconds() - start;
        if (i == 0 || seconds < best) best = seconds;
    }
    return best;
}

bench_copy bench_copy_bandwidths(int threads) {
    size_t bytes = (size_t)BENCH_COPY_MIB << 20;
    char* src = aligned_alloc(64, bytes);
    char* dst = aligned_alloc(64, bytes);
    if (src == NULL || dst == NULL) {
        fprintf(stderr, "bench: out of memory (2 x %zu bytes)\n", bytes);
        exit(1);
    }
    copy_job job = {dst, src, bytes, threads, false};
    /* Each thread first touches its own share (pages placed and mapped, as the copies read them). */
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; t++) {
        size_t share = (bytes + (size_t)threads - 1) / (size_t)threads, begin = (size_t)t * share;
        if (begin < bytes) {
            memset(src + begin, 1, begin + share > bytes ? bytes - begin : share);
            memset(dst + begin, 2, begin + share > bytes ? bytes - begin : share);
        }
    }
    bench_copy copy;
    copy.plain = 2.0 * (double)bytes / best_seconds(parallel_copy, &job, 1, BENCH_COPY_REPEATS);
    job.non_temporal = true;
    copy.non_temporal = 2.0 * (double)bytes / best_seconds(parallel_copy, &job, 1, BENCH_COPY_REPEATS);
    copy.best = copy.plain > copy.non_temporal ? copy.plain : copy.non_temporal;
    free(src);
    free(dst);
    return copy;
}

double bench_copy_bandwidth(int threads) { return bench_copy_bandwidths(threads).best; }

/* ---- A program's run ---- */

/* The child's line: PEER <tab> workload <tab> dtype <tab> layout <tab> implementation <tab> seconds <tab> bytes. */
static const char peer_tag[] = "PEER\t";

void bench_peer_emit(const bench_peer_row* row) {
    const char* cap = getenv("ONEDNN_MAX_CPU_ISA");
    printf("%s%s\t%s\t%s%s%s\t%s\t%.9g\t%.17g\n", peer_tag, row->workload, row->dtype, row->layout, cap ? " isa=" : "",
           cap ? cap : "", row->implementation, row->seconds, row->bytes);
    fflush(stdout);
}

#ifdef DML_BENCH_HAVE_ONEDNN
/* oneDNN's ISA caps the children run under: NULL is oneDNN's own choice. */
static const char* const peer_isas[] = {NULL, "SSE41"};

static void copy_field(char* dst, size_t size, const char* begin, const char* end) {
    size_t length = (size_t)(end - begin) < size - 1 ? (size_t)(end - begin) : size - 1;
    memcpy(dst, begin, length);
    dst[length] = '\0';
}

static bool parse_peer_line(const char* line, bench_peer_row* row) {
    if (strncmp(line, peer_tag, sizeof peer_tag - 1) != 0) return false;
    enum { FIELDS = 6 };
    const char* fields[FIELDS];
    const char* at = line + sizeof peer_tag - 1;
    for (int i = 0; i < FIELDS; i++) {
        fields[i] = at;
        const char* tab = strchr(at, '\t');
        if (tab == NULL && i < FIELDS - 1) return false;
        at = tab ? tab + 1 : at;
    }
    copy_field(row->workload, sizeof row->workload, fields[0], fields[1] - 1);
    copy_field(row->dtype, sizeof row->dtype, fields[1], fields[2] - 1);
    copy_field(row->layout, sizeof row->layout, fields[2], fields[3] - 1);
    copy_field(row->implementation, sizeof row->implementation, fields[3], fields[4] - 1);
    row->seconds = strtod(fields[4], NULL);
    row->bytes = strtod(fields[5], NULL);
    return row->seconds > 0;
}

/* Runs this program again as a peer child under each ISA cap and keeps the
 * rows it prints; the child's other output goes to stderr. */
static void collect_peers(bench_context* ctx) {
    char self[4096];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    if (length <= 0) return;
    self[length] = '\0';
    for (size_t i = 0; i < sizeof peer_isas / sizeof peer_isas[0]; i++) {
        char command[4300];
        snprintf(command, sizeof command, "%s%s%s'%s' --peer-only%s%s%s", peer_isas[i] ? "ONEDNN_MAX_CPU_ISA=" : "",
                 peer_isas[i] ? peer_isas[i] : "", peer_isas[i] ? " " : "", self, ctx->only ? " --only '" : "",
                 ctx->only ? ctx->only : "", ctx->only ? "'" : "");
        FILE* child = popen(command, "r");
        if (child == NULL) continue;
        char line[512];
        while (fgets(line, sizeof line, child)) {
            bench_peer_row row;
            line[strcspn(line, "\n")] = '\0';
            if (!parse_peer_line(line, &row)) continue;
            bench_peer_row* grown = realloc(ctx->peers, (ctx->peer_count + 1) * sizeof *grown);
            if (grown == NULL) break;
            ctx->peers = grown;
            ctx->peers[ctx->peer_count++] = row;
        }
        if (pclose(child) != 0) fprintf(stderr, "bench: the oneDNN child (%s) failed\n", command);
    }
}
#endif

bench_mode bench_begin(bench_context* ctx, const char* title, int argc, char** argv) {
    return bench_begin_with_peer(ctx, title, NULL, argc, argv);
}

bench_mode bench_begin_with_peer(bench_context* ctx, const char* title, const char* peer, int argc, char** argv) {
    memset(ctx, 0, sizeof *ctx);
#ifdef _OPENMP
    ctx->threads = omp_get_max_threads();
#else
    ctx->threads = 1;
#endif
    const char* csv_path = NULL;
    bool peer_child = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--peer-only") == 0) peer_child = true;
        if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc) csv_path = argv[++i];
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) ctx->only = argv[++i];
    }
    if (peer_child) return BENCH_PEER_CHILD;
    bench_copy copy = bench_copy_bandwidths(ctx->threads);
    ctx->copy_bandwidth = copy.best;
    printf("%s: %d threads; medians of %d dispatches\n", title, ctx->threads, BENCH_REPEATS);
    printf("copy bandwidth %.2f GB/s (read + write): the faster of %d MiB copies, best of %d, with plain stores "
           "%.2f GB/s and non-temporal stores %.2f GB/s\n",
           copy.best * 1e-9, BENCH_COPY_MIB, BENCH_COPY_REPEATS, copy.plain * 1e-9, copy.non_temporal * 1e-9);
    printf("floor = bytes / copy bandwidth; ratio = time / time of the peer named on the row (< 1: faster), ");
    if (peer) {
        printf("%s on the same workload\n", peer);
    } else {
        printf("the best oneDNN row of the same operator, type (FLOAT32 for a FLOAT16 row oneDNN lacks) and "
               "workload\n");
#ifdef DML_BENCH_HAVE_ONEDNN
        collect_peers(ctx);
        printf("oneDNN %s: %zu rows measured in child processes (caps: default, SSE41)\n",
               ctx->peer_count ? "found" : "failed", ctx->peer_count);
#else
        printf("oneDNN not found at build time: no peer (install libdnnl-dev)\n");
#endif
    }
    if (csv_path) {
        ctx->csv = fopen(csv_path, "w");
        if (ctx->csv == NULL)
            fprintf(stderr, "bench: cannot write %s\n", csv_path);
        else
            fprintf(ctx->csv, "workload,operator,dtype,layout,library,implementation,median_ms,gb_per_s,"
                              "floor_fraction,peer,peer_ms,ratio\n");
    }
    return BENCH_MAIN;
}

bool bench_selected(const bench_context* ctx, const char* workload) {
    return ctx->only == NULL || strstr(workload, ctx->only) != NULL;
}

void bench_end(bench_context* ctx) {
    if (ctx->csv) fclose(ctx->csv);
    free(ctx->peers);
    memset(ctx, 0, sizeof *ctx);
}

const bench_peer_row* bench_peer_best(const bench_context* ctx, const char* workload, const char* dtype) {
    const bench_peer_row* best = NULL;
    for (size_t i = 0; i < ctx->peer_count; i++) {
        const bench_peer_row* row = &ctx->peers[i];
        if (strcmp(row->workload, workload) == 0 && strcmp(row->dtype, dtype) == 0 &&
            (best == NULL || row->seconds < best->seconds))
            best = row;
    }
    return best;
}

void bench_report_peers(const bench_context* ctx, const char* workload, const char* dtype) {
    const bench_peer_row* best = bench_peer_best(ctx, workload, dtype);
    for (size_t i = 0; i < ctx->peer_count; i++) {
        const bench_peer_row* row = &ctx->peers[i];
        if (strcmp(row->workload, workload) != 0 || strcmp(row->dtype, dtype) != 0) continue;
        bench_report(ctx,
                     &(bench_row){row->workload, row->dtype, row->layout, "oneDNN", row->implementation, row->seconds,
                                  row->bytes, row == best ? NULL : "best oneDNN", row == best ? 0 : best->seconds});
    }
}

/* A CSV field: quoted, with quotes doubled. */
static void csv_field(FILE* csv, const char* text) {
    fputc('"', csv);
    for (const char* c = text ? text : ""; *c; c++) {
        if (*c == '"') fputc('"', csv);
        fputc(*c, csv);
    }
    fputs("\",", csv);
}

void bench_report(const bench_context* ctx, const bench_row* row) {
    double floor_fraction = row->bytes / ctx->copy_bandwidth / row->seconds;
    double ratio = row->peer_seconds > 0 ? row->seconds / row->peer_seconds : 0;
    char operation[64], label[160];
    snprintf(operation, sizeof operation, "%.*s", (int)strcspn(row->workload, " "), row->workload);
    snprintf(label, sizeof label, "%s %s [%s]", row->library, row->layout, row->implementation);
    printf("  %-20s %-8s %-56s %9.3f ms %7.2f GB/s floor %5.1f%%", operation, row->dtype, label, row->seconds * 1e3,
           row->bytes / row->seconds * 1e-9, 100.0 * floor_fraction);
    if (ratio > 0) printf("  x%.2f %s", ratio, row->peer);
    printf("\n");
    if (ctx->csv == NULL) return;
    csv_field(ctx->csv, row->workload);
    csv_field(ctx->csv, operation);
    csv_field(ctx->csv, row->dtype);
    csv_field(ctx->csv, row->layout);
    csv_field(ctx->csv, row->library);
    csv_field(ctx->csv, row->implementation);
    fprintf(ctx->csv, "%.4f,%.3f,%.4f,", row->seconds * 1e3, row->bytes / row->seconds * 1e-9, floor_fraction);
    csv_field(ctx->csv, ratio > 0 ? row->peer : "");
    if (ratio > 0)
        fprintf(ctx->csv, "%.4f,%.4f\n", row->peer_seconds * 1e3, ratio);
    else
        fprintf(ctx->csv, ",\n");
    fflush(ctx->csv);
}

/* ---- libdml ---- */

void bench_dml_prepare(bench_dml_job* job, DMLDevice* device, const DML_OPERATOR_DESC* desc, int inputs, int outputs,
                       void* const* buffers, const uint64_t* sizes) {
    memset(job, 0, sizeof *job);
    DMLOperator* op;
    BENCH_CHECK_DML(dmlCreateOperator(device, desc, &op));
    BENCH_CHECK_DML(dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &job->compiled));
    dmlReleaseOperator(op);
    BENCH_CHECK_DML(dmlInitializeOperator(job->compiled, 0, NULL, NULL));
    for (int i = 0; i < inputs + outputs && i < BENCH_MAX_BINDINGS; i++)
        job->buffers[i] = (DML_BUFFER_BINDING){buffers[i], 0, sizes[i]};
    for (int i = 0; i < inputs; i++)
        job->inputs[i] =
            (DML_BINDING_DESC){buffers[i] ? DML_BINDING_TYPE_BUFFER : DML_BINDING_TYPE_NONE, &job->buffers[i]};
    for (int i = 0; i < outputs; i++)
        job->outputs[i] = (DML_BINDING_DESC){buffers[inputs + i] ? DML_BINDING_TYPE_BUFFER : DML_BINDING_TYPE_NONE,
                                             &job->buffers[inputs + i]};
    job->bindings =
        (DML_DISPATCH_BINDINGS){(UINT)inputs, job->inputs, (UINT)outputs, job->outputs, {0, NULL}, {0, NULL}};
    DML_COMPILED_OPERATOR_INFO info;
    BENCH_CHECK_DML(dmlGetCompiledOperatorInfo(job->compiled, &info));
    snprintf(job->implementation, sizeof job->implementation, "%s", info.ImplementationName);
    if (info.TemporaryResourceSize > 0) {
        job->temporary = malloc(info.TemporaryResourceSize);
        job->temporary_buffer = (DML_BUFFER_BINDING){job->temporary, 0, info.TemporaryResourceSize};
        job->bindings.TemporaryResource = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &job->temporary_buffer};
    }
}

void bench_dml_run(void* context) {
    bench_dml_job* job = context;
    BENCH_CHECK_DML(dmlDispatch(job->compiled, &job->bindings));
}

double bench_dml_time(bench_dml_job* job) {
    return bench_median_seconds(bench_dml_run, job, BENCH_WARMUP, BENCH_REPEATS);
}

void bench_dml_release(bench_dml_job* job) {
    dmlReleaseCompiledOperator(job->compiled);
    free(job->temporary);
    job->compiled = NULL;
    job->temporary = NULL;
}

DML_TENSOR_DESC* bench_tensor(DML_BUFFER_TENSOR_DESC* buffer, DML_TENSOR_DESC* desc, DML_TENSOR_DATA_TYPE type,
                              uint32_t rank, const UINT* sizes, const UINT* strides) {
    *buffer = (DML_BUFFER_TENSOR_DESC){
        type, DML_TENSOR_FLAG_NONE, rank, sizes, strides, DMLCalcBufferTensorSize(type, rank, sizes, strides), 0};
    *desc = (DML_TENSOR_DESC){DML_TENSOR_TYPE_BUFFER, buffer};
    return desc;
}

void bench_channels_last_strides(uint32_t rank, const UINT* sizes, UINT* strides) {
    UINT stride = 1;
    strides[1] = stride; /* C innermost */
    stride *= sizes[1];
    for (uint32_t i = rank; i-- > 2;) {
        strides[i] = stride;
        stride *= sizes[i];
    }
    strides[0] = stride;
}

void* bench_filled(DML_TENSOR_DATA_TYPE type, uint64_t elements) {
    size_t element_size = type == DML_TENSOR_DATA_TYPE_FLOAT16 ? 2 : 4;
    size_t bytes = ((size_t)elements * element_size + 63) / 64 * 64;
    void* data = aligned_alloc(64, bytes ? bytes : 64);
    if (data == NULL) {
        fprintf(stderr, "bench: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    uint64_t state = 0x9E3779B97F4A7C15ull;
    for (uint64_t i = 0; i < elements; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        float value = (float)(state >> 40) / (float)(1 << 23) - 1.0f; /* [-1, 1), exact in FLOAT16 to 2^-10 */
        if (element_size == 4) {
            ((float*)data)[i] = value;
        } else { /* value * 1024 is an integer in [-1024, 1024): a normal half or zero, exactly */
            int integer = (int)(value * 1024.0f);
            uint16_t half = 0;
            if (integer != 0) {
                unsigned magnitude = (unsigned)(integer < 0 ? -integer : integer);
                int exponent = 31 - __builtin_clz(magnitude); /* value = magnitude * 2^-10 */
                uint16_t mantissa = (uint16_t)((magnitude << (10 - exponent)) & 0x3FFu);
                half = (uint16_t)(((integer < 0) << 15) | ((exponent - 10 + 15) << 10) | mantissa);
            }
            ((uint16_t*)data)[i] = half;
        }
    }
    return data;
}

const char* bench_dtype_name(DML_TENSOR_DATA_TYPE type) {
    return type == DML_TENSOR_DATA_TYPE_FLOAT16 ? "FLOAT16" : "FLOAT32";
}

#ifdef DML_BENCH_HAVE_ONEDNN
/* ---- oneDNN ---- */

void bench_dnnl_init(bench_dnnl* dnnl) {
    BENCH_CHECK_DNNL(dnnl_engine_create(&dnnl->engine, dnnl_cpu, 0));
    BENCH_CHECK_DNNL(dnnl_stream_create(&dnnl->stream, dnnl->engine, dnnl_stream_default_flags));
}

void bench_dnnl_free(bench_dnnl* dnnl) {
    dnnl_stream_destroy(dnnl->stream);
    dnnl_engine_destroy(dnnl->engine);
}

dnnl_memory_desc_t bench_dnnl_md(int rank, const dnnl_dim_t* dims, dnnl_data_type_t type, dnnl_format_tag_t tag) {
    dnnl_memory_desc_t md;
    BENCH_CHECK_DNNL(dnnl_memory_desc_init_by_tag(&md, rank, dims, type, tag));
    return md;
}

dnnl_memory_t bench_dnnl_memory(const bench_dnnl* dnnl, const dnnl_memory_desc_t* md, bool fill) {
    dnnl_memory_t memory;
    BENCH_CHECK_DNNL(dnnl_memory_create(&memory, md, dnnl->engine, DNNL_MEMORY_ALLOCATE));
    if (fill) {
        void* data;
        BENCH_CHECK_DNNL(dnnl_memory_get_data_handle(memory, &data));
        size_t bytes = dnnl_memory_desc_get_size(md);
        bool half = md->data_type == dnnl_f16 || md->data_type == dnnl_bf16;
        void* values =
            bench_filled(half ? DML_TENSOR_DATA_TYPE_FLOAT16 : DML_TENSOR_DATA_TYPE_FLOAT32, bytes / (half ? 2 : 4));
        memcpy(data, values, bytes);
        free(values);
    }
    return memory;
}

typedef struct dnnl_call {
    const bench_dnnl* dnnl;
    dnnl_primitive_t primitive;
    int arg_count;
    const dnnl_exec_arg_t* args;
} dnnl_call;

static void run_dnnl(void* context) {
    dnnl_call* call = context;
    BENCH_CHECK_DNNL(dnnl_primitive_execute(call->primitive, call->dnnl->stream, call->arg_count, call->args));
    BENCH_CHECK_DNNL(dnnl_stream_wait(call->dnnl->stream));
}

double bench_dnnl_time(const bench_dnnl* dnnl, dnnl_primitive_t primitive, int arg_count, const dnnl_exec_arg_t* args) {
    dnnl_call call = {dnnl, primitive, arg_count, args};
    return bench_median_seconds(run_dnnl, &call, BENCH_WARMUP, BENCH_REPEATS);
}

const char* bench_dnnl_impl(const_dnnl_primitive_desc_t pd) {
    const char* name = "?";
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success) return "?";
    return name;
}

bool bench_dnnl_is_reference(const_dnnl_primitive_desc_t pd) {
    const char* name = bench_dnnl_impl(pd);
    return strncmp(name, "ref", 3) == 0 || strstr(name, "_ref") != NULL;
}
#endif

/* ---- A program over a table of shapes ---- */

int bench_run_program(const bench_program* program, int argc, char** argv) {
    bench_context ctx;
    static const DML_TENSOR_DATA_TYPE types[2] = {DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16};
    if (bench_begin(&ctx, program->title, argc, argv) == BENCH_PEER_CHILD) {
#ifdef DML_BENCH_HAVE_ONEDNN
        static const dnnl_data_type_t peer_types[2] = {dnnl_f32, dnnl_f16};
        bench_dnnl dnnl;
        bench_dnnl_init(&dnnl);
        for (size_t shape = 0; shape < program->shapes; shape++)
            if (bench_selected(&ctx, program->shape_name(shape)))
                for (int t = 0; t < 2; t++)
                    for (size_t layout = 0; layout < program->peer_layouts; layout++)
                        program->measure_peer(&dnnl, shape, peer_types[t], layout);
        bench_dnnl_free(&dnnl);
#endif
        return 0;
    }
    /* The device's threads are the header's (OMP_NUM_THREADS): with no
     * ThreadCount a CPU device takes every processor. */
    DML_DEVICE_DESC device_desc = {.Backend = DML_BACKEND_CPU, .ThreadCount = (UINT)ctx.threads};
    DMLDevice* device;
    BENCH_CHECK_DML(dmlCreateDevice(&device_desc, &device));
    for (size_t shape = 0; shape < program->shapes; shape++) {
        if (!bench_selected(&ctx, program->shape_name(shape))) continue;
        printf("%s\n", program->shape_name(shape));
        for (int t = 0; t < 2; t++)
            program->measure(&ctx, device, shape, types[t]);
    }
    dmlReleaseDevice(device);
    bench_end(&ctx);
    return 0;
}

/* tilegrad's C API: load a saved module (`Module.save(directory)`) and run it from C or C++, without Python.

   A saved module is a directory: model.so (the kernels and `tg_run`), weights.bin (the weights' raw bytes, each
   array 64-byte aligned, in order) and manifest.json (for the Python runtime). The library describes its
   arguments itself (`tg_info`, codegen/descriptor.py), so this header needs nothing else: it opens the library,
   reads the weights, computes the weights the library derives from a stored source (a Winograd convolution's),
   and runs the model on buffers the caller owns. Link with -ldl (glibc before 2.34); the library brings its own
   OpenMP runtime.

     char error[256];
     tg_model* m = tg_model_load("out/", 0, error, sizeof error);   // 0 threads: OpenMP's default
     if (!m) { fprintf(stderr, "%s\n", error); return 1; }
     const tg_model_info* info = tg_model_describe(m);           // names, element types, shapes, bytes
     tg_model_run(m, inputs, outputs);                            // void* per input / output, C-contiguous
     tg_model_free(m);

   A module compiled with dynamic dimensions (`compile(dynamic={"seq": (1, 512)})`) runs every value within their
   bounds: `info->dims` names them with their bounds, and each call's values are set first, which sizes every input
   and output (`tg_model_shape`, `tg_model_nbytes`; `info`'s static shapes say -1 where a dimension goes):

     int64_t seq = 17;
     if (tg_model_set_dims(m, &seq, error, sizeof error)) { fprintf(stderr, "%s\n", error); return 1; }
     tg_model_run(m, inputs, outputs);                            // 0, or 1 where no values were set

   One model runs one call at a time (its workspace is its own); load it once per thread to run calls at once.
   The manifest's checksums are the Python runtime's to check: load only directories you trust, as their library
   is native code that runs with your rights. */
#ifndef TILEGRAD_H
#define TILEGRAD_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TG_INFO_VERSION 2

/* tg_info's layout (codegen/descriptor.py compiles the lines from the version to the end marker into every
   library). A dynamic dimension is -1 in a buffer's shape, and so is the bytes of a buffer it sizes; `shapes`
   writes every input's dimensions, then every output's, for values of the dynamic dimensions (in `dims` order). */
typedef struct {
  const char* name; const char* dtype; int32_t rank; const int64_t* shape; int64_t nbytes; int64_t itemsize;
} tg_buffer_info;
typedef struct { int32_t weight; const char* kernel; } tg_derived_info;
typedef struct { const char* name; int64_t lo, hi; } tg_dim_info;
typedef struct {
  int32_t version, num_inputs, num_outputs, num_weights, num_derived, num_dims;
  const tg_buffer_info *inputs, *outputs, *weights, *sources;
  const tg_derived_info* derived;
  const tg_dim_info* dims;
  void (*shapes)(const int64_t* dims, int64_t* out);
  int64_t workspace_bytes;
} tg_model_info;
/* tg_info's layout: end */

typedef struct tg_model {
  void* library;
  const tg_model_info* info;
  void (*run)(void**);
  void (*call)(void (*)(void**), void**, int);
  int threads;
  void** args;  /* inputs, outputs, weights, workspace (and the dims' values): all but the first two set once */
  int64_t* dims;  /* the dynamic dimensions' values of the next call */
  int64_t* shapes;  /* every input's and output's dimensions at those values */
  int dims_set;  /* whether values were set (a module without dynamic dimensions needs none) */
} tg_model;

/* The reason a load failed, cut to the caller's buffer. */
static inline void tg_fail(char* error, size_t error_size, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(error, error_size, format, args);
  va_end(args);
}

static inline void* tg_aligned(int64_t nbytes) {
  size_t size = (size_t)((nbytes + 63) / 64 * 64);
  return aligned_alloc(64, size ? size : 64);
}

static inline void tg_model_free(tg_model* m) {
  if (!m) return;
  if (m->args && m->info) {
    int first = m->info->num_inputs + m->info->num_outputs;
    for (int k = 0; k <= m->info->num_weights; ++k) free(m->args[first + k]);
  }
  free(m->args), free(m->dims), free(m->shapes);
  if (m->library) {
    void (*release)(void) = NULL;
    *(void**)&release = dlsym(m->library, "tg_release_on_unload");
    if (release) release();
    dlclose(m->library);
  }
  free(m);
}

/* Keep every OpenMP runtime the library brought in loaded for the process: its idle worker threads wait in its
   code, and closing the library would otherwise unload it under them (a crash a moment after tg_model_free). */
static inline void tg_pin_openmp_runtime(void) {
  static const char* const runtimes[] = {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"};
  for (size_t i = 0; i < sizeof runtimes / sizeof *runtimes; ++i)
    dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);  /* NULL where not loaded: nothing to keep */
}

/* Read the next array of the weights file into `out`, which holds `nbytes`: the arrays lie in order, each at the
   first 64-byte aligned offset after the one before (saved.py writes them so); `*offset` is where the last ended.
   0 on success. */
static inline int tg_read_weight(FILE* f, int64_t* offset, void* out, int64_t nbytes, char* error,
                                 size_t error_size) {
  int64_t at = (*offset + 63) / 64 * 64;
  if (fseek(f, (long)at, SEEK_SET) != 0 || fread(out, 1, (size_t)nbytes, f) != (size_t)nbytes) {
    tg_fail(error, error_size, "weights.bin: truncated (an array of %lld bytes at %lld)", (long long)nbytes,
             (long long)at);
    return 1;
  }
  *offset = at + nbytes;
  return 0;
}

/* Call one of the library's functions on the model's threads. */
static inline void tg_model_call(tg_model* m, void (*fn)(void**), void** args) {
  if (m->threads > 0) m->call(fn, args, m->threads);
  else fn(args);
}

/* Load the saved module in `directory` to run on `threads` threads (0: OpenMP's default); NULL with the reason in
   `error` if it cannot. */
static inline tg_model* tg_model_load(const char* directory, int threads, char* error, size_t error_size) {
  char path[4096];
  tg_model* m = (tg_model*)calloc(1, sizeof *m);
  if (!m) {
    tg_fail(error, error_size, "out of memory");
    return NULL;
  }
  snprintf(path, sizeof path, "%s/model.so", directory);
  m->library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!m->library) {
    tg_fail(error, error_size, "cannot load %s: %s", path, dlerror());
    return tg_model_free(m), (tg_model*)NULL;
  }
  tg_pin_openmp_runtime();
  m->info = (const tg_model_info*)dlsym(m->library, "tg_info");
  *(void**)&m->run = dlsym(m->library, "tg_run");
  *(void**)&m->call = dlsym(m->library, "tg_call");
  if (!m->info || !m->run || !m->call || m->info->version != TG_INFO_VERSION) {
    tg_fail(error, error_size, "%s is not a module library of this C API (version %d): compile it again", path,
             TG_INFO_VERSION);
    return tg_model_free(m), (tg_model*)NULL;
  }
  const tg_model_info* info = m->info;
  m->threads = threads;
  int first = info->num_inputs + info->num_outputs, count = first + info->num_weights + 1 + (info->num_dims > 0);
  int64_t ranks = 0;
  for (int k = 0; k < first; ++k) ranks += k < info->num_inputs ? info->inputs[k].rank
                                                                : info->outputs[k - info->num_inputs].rank;
  m->args = (void**)calloc((size_t)count, sizeof(void*));
  m->dims = (int64_t*)calloc((size_t)info->num_dims + 1, sizeof(int64_t));
  m->shapes = (int64_t*)calloc((size_t)ranks + 1, sizeof(int64_t));
  void** sources = (void**)calloc((size_t)info->num_derived + 1, sizeof(void*));
  char* derived = (char*)calloc((size_t)info->num_weights + 1, 1);
  if (!m->args || !m->dims || !m->shapes || !sources || !derived) {
    tg_fail(error, error_size, "out of memory");
    free(sources), free(derived);
    return tg_model_free(m), (tg_model*)NULL;
  }
  if (info->num_dims) m->args[count - 1] = m->dims;
  else info->shapes(m->dims, m->shapes), m->dims_set = 1;  /* fixed shapes: the library's own */
  for (int d = 0; d < info->num_derived; ++d) derived[info->derived[d].weight] = 1;
  int failed = 0;
  for (int k = 0; k < info->num_weights && !failed; ++k)
    failed = !(m->args[first + k] = tg_aligned(info->weights[k].nbytes));
  for (int d = 0; d < info->num_derived && !failed; ++d)
    failed = !(sources[d] = tg_aligned(info->sources[d].nbytes));
  if (!failed) failed = !(m->args[first + info->num_weights] = tg_aligned(info->workspace_bytes));
  snprintf(path, sizeof path, "%s/weights.bin", directory);
  FILE* f = failed ? NULL : fopen(path, "rb");
  if (failed || !f) {
    tg_fail(error, error_size, failed ? "out of memory" : "cannot open %s", path);
    failed = 1;
  }
  /* The stored arrays: the weights not derived, in order, then one source per derived weight. */
  int64_t offset = 0;
  for (int k = 0; k < info->num_weights && !failed; ++k)
    if (!derived[k]) failed = tg_read_weight(f, &offset, m->args[first + k], info->weights[k].nbytes, error,
                                             error_size);
  for (int d = 0; d < info->num_derived && !failed; ++d)
    failed = tg_read_weight(f, &offset, sources[d], info->sources[d].nbytes, error, error_size);
  if (f && !failed) {
    fseek(f, 0, SEEK_END);
    if (ftell(f) != offset) {
      tg_fail(error, error_size, "weights.bin holds %ld bytes where the library's weights end at %lld: not this "
               "library's weights", ftell(f), (long long)offset);
      failed = 1;
    }
  }
  if (f) fclose(f);
  for (int d = 0; d < info->num_derived && !failed; ++d) {
    void (*derive)(void**);
    *(void**)&derive = dlsym(m->library, info->derived[d].kernel);
    void* pair[2] = {sources[d], m->args[first + info->derived[d].weight]};
    if (!derive) {
      tg_fail(error, error_size, "the library has no function %s", info->derived[d].kernel);
      failed = 1;
    } else {
      tg_model_call(m, derive, pair);
    }
  }
  for (int d = 0; d < info->num_derived; ++d) free(sources[d]);
  free(sources), free(derived);
  if (failed) return tg_model_free(m), (tg_model*)NULL;
  return m;
}

static inline const tg_model_info* tg_model_describe(const tg_model* m) { return m->info; }

/* Set the values of the module's dynamic dimensions (`info->dims` order) for the calls that follow; 0, or 1 with
   the reason in `error` where a value is outside its dimension's bounds. */
static inline int tg_model_set_dims(tg_model* m, const int64_t* values, char* error, size_t error_size) {
  for (int d = 0; d < m->info->num_dims; ++d) {
    const tg_dim_info* dim = &m->info->dims[d];
    if (values[d] < dim->lo || values[d] > dim->hi) {
      tg_fail(error, error_size, "dynamic dimension '%s' is %lld, outside the bounds the module was compiled for: "
              "%lld to %lld", dim->name, (long long)values[d], (long long)dim->lo, (long long)dim->hi);
      return 1;
    }
  }
  for (int d = 0; d < m->info->num_dims; ++d) m->dims[d] = values[d];
  m->info->shapes(m->dims, m->shapes);
  m->dims_set = 1;
  return 0;
}

/* The dimensions of buffer `k` (the inputs, then the outputs) at the values set; NULL before any are set. */
static inline const int64_t* tg_model_shape(const tg_model* m, int k) {
  if (!m->dims_set) return NULL;
  const int64_t* at = m->shapes;
  for (int j = 0; j < k; ++j) at += j < m->info->num_inputs ? m->info->inputs[j].rank
                                                           : m->info->outputs[j - m->info->num_inputs].rank;
  return at;
}

/* The bytes of buffer `k` (the inputs, then the outputs) at the values set; -1 before any are set. */
static inline int64_t tg_model_nbytes(const tg_model* m, int k) {
  const int64_t* shape = tg_model_shape(m, k);
  int n = m->info->num_inputs;
  const tg_buffer_info* b = k < n ? &m->info->inputs[k] : &m->info->outputs[k - n];
  if (!shape) return -1;
  int64_t bytes = b->itemsize;
  for (int d = 0; d < b->rank; ++d) bytes *= shape[d];
  return bytes;
}

/* Run the model: `inputs[i]` and `outputs[j]` point to C-contiguous buffers of the sizes `tg_model_nbytes` gives
   (for a module without dynamic dimensions, tg_buffer_info.nbytes too), owned by the caller. 0, or 1 (nothing
   run) where the module has dynamic dimensions and no values were set. */
static inline int tg_model_run(tg_model* m, void* const* inputs, void* const* outputs) {
  if (!m->dims_set) return 1;
  int n = m->info->num_inputs;
  for (int i = 0; i < n; ++i) m->args[i] = inputs[i];
  for (int j = 0; j < m->info->num_outputs; ++j) m->args[n + j] = outputs[j];
  tg_model_call(m, m->run, m->args);
  return 0;
}

#endif

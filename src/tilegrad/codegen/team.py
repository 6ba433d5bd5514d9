"""One thread team per call: the C that lets a model's kernels share the threads of one parallel region.

With a parallel region per kernel, every kernel call wakes the other threads and puts them back to sleep. Idle
OpenMP threads sleep at once (`Config.spin_us` 0: a thread spinning between calls steals a busy core), so each
wake-up is a futex round trip, and a model of many short kernels loses a large share of its time to them (the
figures: docs/benchmarks.md, "Small models pay a thread wake-up per kernel"). So `tg_run` opens one region
and calls each kernel's team function (`K_team(args, team)`) in it: a parallel loop hands its iterations out
in blocks (`tg_next`: each thread's static share first, then what is left of the others'), serial statements
run on thread 0, and every step ends at `tg_barrier`, which spins briefly (the next kernel follows within
microseconds) and then yields the core, so a thread waiting on a descheduled one does not hold the core it needs.
Between calls the threads leave the region and sleep as before. A kernel called alone (`K(args)`, as the tuner
times it) opens its own region around the same team function, so what is tuned is what runs; one without a
parallel loop opens none (a team of one), as before: a region costs a wake-up, and a process forked after
libgomp started its threads hangs in its first region (the conformance runner's workers are forked).

Why blocks taken dynamically rather than static shares: two threads with equal shares do not finish together on
a VM (a descheduled vCPU, a worker woken late at the region's start, a share whose data sits in the other core's
cache), and the first to finish spun at the barrier for a tenth of a small model's kernel time (the measurements:
docs/benchmarks.md, "Machine A, seventeenth session").
"""

TEAM = """\
#ifndef TG_TEAM
#define TG_TEAM
#include <stdatomic.h>
#include <sched.h>
#include <omp.h>
/* What the threads of one call share (the barrier, the broadcast slots, a cursor per thread for the parallel
   loops), and what each keeps: its number, the team size, its barrier sense, how many broadcasts and how many
   parallel loops it has passed. */
#define TG_MAX_THREADS 64
typedef struct { _Alignas(64) _Atomic unsigned long long next; } tg_cursor;
typedef struct {
  atomic_int count; atomic_int sense; void* volatile slot[2]; tg_cursor cursor[TG_MAX_THREADS];
} tg_shared;
typedef struct { tg_shared* shared; int tid; int nth; int sense; int casts; unsigned long long loops; } tg_team;
#define TG_SPINS 20000
static inline void tg_barrier(tg_team* t) {
  if (t->nth == 1) return;
  int s = t->sense ^ 1;
  t->sense = s;
  if (atomic_fetch_add_explicit(&t->shared->count, 1, memory_order_acq_rel) == t->nth - 1) {
    atomic_store_explicit(&t->shared->count, 0, memory_order_relaxed);
    atomic_store_explicit(&t->shared->sense, s, memory_order_release);
    return;
  }
  for (int n = 0; atomic_load_explicit(&t->shared->sense, memory_order_acquire) != s; ++n) {
    if (n < TG_SPINS) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield();
    }
  }
}
/* Thread 0's pointer, seen by every thread (a buffer the whole team shares). Broadcasts alternate between two
   slots, so one barrier is enough: thread 0 writes a slot again two broadcasts later, past a barrier that every
   thread reaches only after reading it. */
static inline void* tg_broadcast(tg_team* t, void* p) {
  void* volatile* slot = &t->shared->slot[t->casts++ & 1];
  if (t->tid == 0) *slot = p;
  tg_barrier(t);
  return *slot;
}
/* A parallel loop shared dynamically: each thread takes blocks from the front of its static share (so data stays
   with the thread that had it in the last kernel), ever smaller, and when its share is done takes blocks from the
   front of the others' until none is left. A cursor holds the loop's tag (its number in the call, high bits) and
   the next iteration of its thread's share; a cursor whose tag is older is untouched in this loop (its share
   starts at the beginning). Every thread refreshes its own cursor as the loop begins, so no stale tag survives. */
#define TG_INDEX_BITS 40
#define TG_INDEX_MASK ((1ull << TG_INDEX_BITS) - 1)
typedef struct { int64_t n, chunk; unsigned long long tag; int victim, visited; } tg_loop;
static inline void tg_share_bounds(const tg_loop* l, int who, int64_t* first, int64_t* last) {
  int64_t a = who * l->chunk;
  *first = a < l->n ? a : l->n;
  *last = a + l->chunk < l->n ? a + l->chunk : l->n;
}
static inline void tg_loop_begin(tg_team* t, int64_t n, tg_loop* l) {
  l->n = n; l->chunk = (n + t->nth - 1) / t->nth; l->victim = t->tid; l->visited = 0;
  l->tag = ((++t->loops) & ((1ull << (64 - TG_INDEX_BITS)) - 1)) << TG_INDEX_BITS;
  if (t->nth == 1 || t->nth > TG_MAX_THREADS) return;
  int64_t first, last;
  tg_share_bounds(l, t->tid, &first, &last);
  _Atomic unsigned long long* c = &t->shared->cursor[t->tid].next;
  unsigned long long v = atomic_load_explicit(c, memory_order_relaxed);
  if ((v & ~TG_INDEX_MASK) != l->tag)  /* fails only where a thread already took from it, with this tag */
    atomic_compare_exchange_strong_explicit(c, &v, l->tag | (unsigned long long)first, memory_order_relaxed,
                                            memory_order_relaxed);
}
/* The thread's next block [lo, hi) of the loop; 0 when the whole loop is taken. */
static inline int tg_next(tg_team* t, tg_loop* l, int64_t* lo, int64_t* hi) {
  if (t->nth == 1 || t->nth > TG_MAX_THREADS) {
    if (l->visited++) return 0;
    tg_share_bounds(l, t->tid, lo, hi);
    return *lo < *hi;
  }
  for (; l->visited < t->nth; ++l->visited, l->victim = (l->victim + 1) % t->nth) {
    int64_t first, last;
    tg_share_bounds(l, l->victim, &first, &last);
    _Atomic unsigned long long* c = &t->shared->cursor[l->victim].next;
    unsigned long long v = atomic_load_explicit(c, memory_order_relaxed);
    for (;;) {
      int64_t start = (v & ~TG_INDEX_MASK) == l->tag ? (int64_t)(v & TG_INDEX_MASK) : first;
      if (start >= last) break;
      int64_t end = start + (last - start + 3) / 4;
      if (atomic_compare_exchange_weak_explicit(c, &v, l->tag | (unsigned long long)end, memory_order_relaxed,
                                                memory_order_relaxed)) {
        *lo = start;
        *hi = end;
        return 1;
      }
    }
  }
  return 0;
}
/* Denormal floats read and written as zero (MXCSR's DAZ and FTZ) by every thread of a call, each thread's own
   mode restored as the call ends, so the caller's arithmetic keeps its own (Config.flush_denormals). */
#if (defined(__x86_64__) || defined(__i386__)) && !defined(TG_KEEP_DENORMALS)
#include <xmmintrin.h>
#define TG_DENORMALS_OFF unsigned tg_mxcsr = _mm_getcsr(); _mm_setcsr(tg_mxcsr | 0x8040u);
#define TG_DENORMALS_BACK _mm_setcsr(tg_mxcsr);
#else
#define TG_DENORMALS_OFF
#define TG_DENORMALS_BACK
#endif
#define TG_TEAM_BEGIN tg_shared tg_sh = {0}; _Pragma("omp parallel") { TG_DENORMALS_OFF \\
  tg_team tg_t = {&tg_sh, omp_get_thread_num(), omp_get_num_threads(), 0}; tg_team* tg = &tg_t;
#define TG_TEAM_END TG_DENORMALS_BACK }
/* A kernel with no parallel loop, called alone, runs as a team of one: no region, no thread woken. */
#define TG_TEAM_ALONE tg_shared tg_sh = {0}; tg_team tg_t = {&tg_sh, 0, 1, 0}; tg_team* tg = &tg_t; TG_DENORMALS_OFF
#define TG_TEAM_ALONE_END TG_DENORMALS_BACK
/* The team of one in which thread 0 runs, inside the region, the kernels too small to share. */
#define TG_TEAM_OF_ONE tg_shared tg_one_sh = {0}; tg_team tg_one_t = {&tg_one_sh, 0, 1, 0}; \
  tg_team* tg_one = &tg_one_t; (void)tg_one;
#endif
"""

"""One thread team per call: the C that lets a model's kernels share the threads of one parallel region.

With a parallel region per kernel, every kernel call wakes the other threads and puts them back to sleep. Idle
OpenMP threads sleep at once (`Config.spin_us` 0: a thread spinning between calls steals a busy core), so each
wake-up is a futex round trip, and a model of many short kernels loses a large share of its time to them (the
figures: docs/benchmarks.md, "Small models pay a thread wake-up per kernel"). So `tg_run` opens one region
and calls each kernel's team function (`K_team(args, team)`) in it: a parallel loop takes the thread's static
share of its iterations (as OpenMP's static schedule does), serial statements run on thread 0, and every step
ends at `tg_barrier`, which spins briefly (the next kernel follows within microseconds) and then yields the core,
so a thread waiting on a descheduled one does not hold the core it needs. Between calls the threads leave the
region and sleep as before. A kernel called alone (`K(args)`, as the tuner times it) opens its own region
around the same team function, so what is tuned is what runs; one without a parallel loop opens none (a team
of one), as before: a region costs a wake-up, and a process forked after libgomp started its threads hangs in
its first region (the conformance runner's workers are forked).
"""

TEAM = """\
#ifndef TG_TEAM
#define TG_TEAM
#include <stdatomic.h>
#include <sched.h>
#include <omp.h>
/* What the threads of one call share, and what each keeps: its number, the team size, its barrier sense and how
   many broadcasts it has passed. */
typedef struct { atomic_int count; atomic_int sense; void* volatile slot[2]; } tg_shared;
typedef struct { tg_shared* shared; int tid; int nth; int sense; int casts; } tg_team;
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
/* The thread's block of iterations [lo, hi) of a loop of `n`: static, contiguous, as OpenMP's default. */
static inline void tg_share(const tg_team* t, int64_t n, int64_t* lo, int64_t* hi) {
  int64_t chunk = (n + t->nth - 1) / t->nth;
  int64_t a = t->tid * chunk;
  *lo = a < n ? a : n;
  *hi = a + chunk < n ? a + chunk : n;
}
#define TG_TEAM_BEGIN tg_shared tg_sh = {0}; _Pragma("omp parallel") { \\
  tg_team tg_t = {&tg_sh, omp_get_thread_num(), omp_get_num_threads(), 0}; tg_team* tg = &tg_t;
#define TG_TEAM_END }
/* A kernel with no parallel loop, called alone, runs as a team of one: no region, no thread woken. */
#define TG_TEAM_ALONE tg_shared tg_sh = {0}; tg_team tg_t = {&tg_sh, 0, 1, 0}; tg_team* tg = &tg_t;
/* The team of one in which thread 0 runs, inside the region, the kernels too small to share. */
#define TG_TEAM_OF_ONE tg_shared tg_one_sh = {0}; tg_team tg_one_t = {&tg_one_sh, 0, 1, 0}; \
  tg_team* tg_one = &tg_one_t; (void)tg_one;
#endif
"""

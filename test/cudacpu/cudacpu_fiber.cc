/*
 * cudacpu_fiber.cc -- a block's threads as fibers (test/cudacpu): an x86-64
 * context switch with no system call (callee-saved registers and the stack
 * pointer), fiber stacks cached per OS thread with a
 * guard page each, and the phase scheduler behind __syncthreads.  Built with
 * AddressSanitizer (the sanitizer flavor, test/sanitize), every switch tells it
 * which stack it moves to, so it neither loses track of the stack nor reports
 * another fiber's frames.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <vector>

#include "test/cudacpu/cudacpu_fiber.h"
#include "test/cudacpu/cudacpu_internal.h"

#if !defined(__x86_64__)
#error "the CUDA CPU runtime's fibers are written for x86-64"
#endif

/* ---- the switch ---------------------------------------------------------------------- */
/*
 * cudacpu_ctx_switch(save_sp, load_sp): push the callee-saved registers on the
 * current stack, store its pointer in *save_sp, load load_sp and pop the same
 * frame there.  The SSE and x87 control words are left alone: fibers of one OS
 * thread share them, and kernels never change them.  cudacpu_ctx_start is where a new
 * fiber's first switch "returns" to: it calls r13(r12) and never comes back.
 */
extern "C" void cudacpu_ctx_switch(void **save_sp, void *load_sp);
extern "C" void cudacpu_ctx_start(void);
__asm__(".text\n"
        ".p2align 4\n"
        ".globl cudacpu_ctx_switch\n"
        ".hidden cudacpu_ctx_switch\n"
        ".type cudacpu_ctx_switch, @function\n"
        "cudacpu_ctx_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size cudacpu_ctx_switch, .-cudacpu_ctx_switch\n"
        ".p2align 4\n"
        ".globl cudacpu_ctx_start\n"
        ".hidden cudacpu_ctx_start\n"
        ".type cudacpu_ctx_start, @function\n"
        "cudacpu_ctx_start:\n"
        "    movq %r12, %rdi\n"
        "    callq *%r13\n"
        "    ud2\n"
        ".size cudacpu_ctx_start, .-cudacpu_ctx_start\n");

__thread uint3 threadIdx;
extern __thread unsigned cudacpu_polls_since_barrier; /* cudacpu_launch.cc */

namespace cudacpu {
namespace {

struct fiber {
    void *sp;
    char *stack_lo; /* its stack: [stack_lo, stack_top) */
    char *stack_top;
    uint3 idx; /* its threadIdx */
    bool done;
};

/* one OS thread's fibers, stacks and the scheduler's saved stack pointer */
struct fiber_set {
    char *map = nullptr;   /* all stacks, each above a guard page */
    size_t map_bytes = 0;
    size_t stride = 0;
    std::vector<fiber> fibers;
    std::vector<unsigned> order;
    void *sched_sp = nullptr;
    const void *sched_stack = nullptr; /* the scheduler's stack, as ASan knows it */
    size_t sched_stack_bytes = 0;
    fiber *cur = nullptr;
    void (*body)(void *) = nullptr;
    void *arg = nullptr;
    uint64_t rng = 0;
    /* __syncthreads_or: the predicates of the fibers at this phase's barrier
     * (or_next), and the last phase's, which the fibers read as they resume */
    int or_next = 0, or_cur = 0;

    ~fiber_set()
    {
        if (map != nullptr) munmap(map, map_bytes);
    }

    void reserve(unsigned n)
    {
        if (fibers.size() >= n) return;
        if (map != nullptr) munmap(map, map_bytes);
        const size_t page = 4096;
        stride = page + (knobs_get().fiber_stack + page - 1) / page * page;
        map_bytes = stride * n;
        map = static_cast<char *>(mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
        if (map == MAP_FAILED) {
            fprintf(stderr, "cudacpu: cannot map %zu bytes of fiber stacks\n", map_bytes);
            abort();
        }
        fibers.assign(n, fiber{});
        for (unsigned t = 0; t < n; t++) {
            char *lo = map + (size_t)t * stride;
            (void)mprotect(lo, page, PROT_NONE); /* overflow faults instead of corrupting */
            fibers[t].stack_lo = lo + page;
            fibers[t].stack_top = lo + stride;
        }
    }
};

thread_local fiber_set tls_fibers;

/*
 * Every switch goes through here: save the current stack pointer in *save_sp
 * and continue on load_sp, a stack [to_lo, to_lo + to_bytes).  Under ASan the
 * switch is announced before (a fiber that will never run again passes
 * dying, so its fake frames go) and completed after, when this stack runs
 * again; the stack it came back from is stored in *from_p / *from_bytes_p.
 */
inline void switch_stack(void **save_sp, void *load_sp, const void *to_lo, size_t to_bytes,
                         bool dying, const void **from_p, size_t *from_bytes_p)
{
#ifdef CUDACPU_ASAN
    void *fake = nullptr;
    __sanitizer_start_switch_fiber(dying ? nullptr : &fake, to_lo, to_bytes);
    cudacpu_ctx_switch(save_sp, load_sp);
    __sanitizer_finish_switch_fiber(fake, from_p, from_bytes_p);
#else
    (void)to_lo, (void)to_bytes, (void)dying, (void)from_p, (void)from_bytes_p;
    cudacpu_ctx_switch(save_sp, load_sp);
#endif
}

/* from a fiber back to the scheduler */
inline void switch_to_sched(fiber_set *fs, bool dying)
{
    switch_stack(&fs->cur->sp, fs->sched_sp, fs->sched_stack, fs->sched_stack_bytes, dying,
                 &fs->sched_stack, &fs->sched_stack_bytes);
}

[[noreturn]] void fiber_main(fiber_set *fs)
{
#ifdef CUDACPU_ASAN
    /* the first switch into this fiber ends here: learn the scheduler's stack */
    __sanitizer_finish_switch_fiber(nullptr, &fs->sched_stack, &fs->sched_stack_bytes);
#endif
    fs->body(fs->arg);
    fs->cur->done = true;
    switch_to_sched(fs, true);
    __builtin_unreachable();
}

/* a fresh frame that cudacpu_ctx_switch pops into cudacpu_ctx_start(fiber_main, fs) */
void fiber_prepare(fiber *f, fiber_set *fs)
{
    /* 7 words popped, then rsp = stack_top - 16: 16-byte aligned at the call */
    uint64_t *sp = reinterpret_cast<uint64_t *>(f->stack_top) - 9;

    sp[0] = 0;                                      /* r15 */
    sp[1] = 0;                                      /* r14 */
    sp[2] = (uint64_t)(uintptr_t)&fiber_main;       /* r13 */
    sp[3] = (uint64_t)(uintptr_t)fs;                /* r12 */
    sp[4] = 0;                                      /* rbx */
    sp[5] = 0;                                      /* rbp */
    sp[6] = (uint64_t)(uintptr_t)&cudacpu_ctx_start; /* return address */
    f->sp = sp;
    f->done = false;
#ifdef CUDACPU_ASAN
    /* a reused stack may keep the poisoned redzones of an earlier fiber's frames
     * (fiber_main's never returns) or of an earlier mapping at this address */
    ASAN_UNPOISON_MEMORY_REGION(f->stack_lo, (size_t)(f->stack_top - f->stack_lo));
#endif
}

uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

} /* namespace */

void fibers_run_block(const dim3 &block, void (*body)(void *), void *arg, uint64_t salt)
{
    fiber_set &fs = tls_fibers;
    const unsigned n = block.x * block.y * block.z;
    const knobs &k = knobs_get();
    unsigned live = n;

    fs.reserve(n);
    fs.body = body;
    fs.arg = arg;
    fs.rng = k.seed ^ (salt * 0x2545f4914f6cdd1dull);
    fs.order.resize(n);
    fs.or_next = fs.or_cur = 0;
    for (unsigned t = 0; t < n; t++) {
        fs.fibers[t].idx.x = t % block.x;
        fs.fibers[t].idx.y = t / block.x % block.y;
        fs.fibers[t].idx.z = t / (block.x * block.y);
        fiber_prepare(&fs.fibers[t], &fs);
        fs.order[t] = k.order == ORDER_REVERSE ? n - 1 - t : t;
    }
    while (live > 0) {
        if (k.order == ORDER_RANDOM) { /* a new permutation every phase */
            for (unsigned t = n - 1; t > 0; t--) {
                unsigned j = (unsigned)(rng_next(&fs.rng) % (t + 1));
                std::swap(fs.order[t], fs.order[j]);
            }
        }
        for (unsigned i = 0; i < n; i++) {
            fiber *f = &fs.fibers[fs.order[i]];
            if (f->done) continue;
            threadIdx = f->idx;
            fs.cur = f;
            switch_stack(&fs.sched_sp, f->sp, f->stack_lo, (size_t)(f->stack_top - f->stack_lo),
                         false, nullptr, nullptr);
            if (f->done) live--;
        }
        fs.or_cur = fs.or_next; /* every fiber of the phase has reached the barrier */
        fs.or_next = 0;
    }
    fs.cur = nullptr;
}

} /* namespace cudacpu */

/* the barrier: back to the scheduler, which resumes this fiber in the next phase */
extern "C" void cudacpu_syncthreads(void)
{
    cudacpu::fiber_set &fs = cudacpu::tls_fibers;

    if (fs.cur == nullptr) {
        cudacpu::warn("cudacpu: __syncthreads outside a kernel");
        return;
    }
    cudacpu_polls_since_barrier = 0;
    switch_to_sched(&fs, false);
    /* resumed: threadIdx was set for us by the scheduler */
}

/* the barrier that also tells every fiber whether any fiber's predicate was non-zero */
extern "C" int cudacpu_syncthreads_or(int pred)
{
    cudacpu::fiber_set &fs = cudacpu::tls_fibers;

    if (fs.cur == nullptr) {
        cudacpu::warn("cudacpu: __syncthreads_or outside a kernel");
        return pred != 0;
    }
    fs.or_next |= pred != 0;
    cudacpu_polls_since_barrier = 0;
    switch_to_sched(&fs, false);
    return fs.or_cur;
}

/*
 * cudacpu_stream.cc -- streams and events on the CUDA CPU runtime
 * (test/cudacpu).
 *
 * A stream is an in-order queue of operations (kernel grids, copies, sets,
 * event records) served by its own thread, started with the stream.  Each
 * operation carries the stream positions it must wait for first, which is how
 * the legacy default stream (one per device, made on first use) is ordered as
 * CUDA orders it: an operation there waits for everything already queued on
 * the device's blocking streams, and one on a blocking stream waits for
 * everything already queued there.  Non-blocking streams wait for nobody.
 * One lock and one condition variable serve all queues: a few threads, no
 * hot path here.
 *
 * An event holds the stream position of its last record; it is complete once
 * that stream has finished that many operations.
 */
#include <time.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "test/cudacpu/cudacpu_internal.h"

namespace cudacpu {
namespace {

struct stream_pos {
    cudacpu_stream *s;
    uint64_t seq; /* complete once s->completed >= seq */
};

struct stream_op {
    std::function<void()> fn;
    std::vector<stream_pos> after;
};

} /* namespace */
} /* namespace cudacpu */

/* never freed (kept in `retired` once destroyed, so that LeakSanitizer does not
 * count them): events and queued dependencies may still name a destroyed stream */
struct cudacpu_stream {
    int device;
    unsigned flags;
    bool legacy;
    bool dying = false;
    std::deque<cudacpu::stream_op> queue;
    uint64_t enqueued = 0, completed = 0;
    cudaError_t error = cudaSuccess; /* an operation's (stream_op_fail), not yet returned */
};

struct cudacpu_event {
    unsigned flags;
    cudacpu_stream *s = nullptr; /* last record; none yet: complete */
    uint64_t seq = 0;
    std::shared_ptr<double> when; /* the recorded operation's completion time, seconds */
};

namespace cudacpu {
namespace {

/* never destroyed: at exit, stream threads may still wait on them */
std::mutex &mu = *new std::mutex;
std::condition_variable &cv = *new std::condition_variable; /* any queue or completion change */
std::vector<cudacpu_stream *> streams;          /* live ones */
std::vector<cudacpu_stream *> &retired = *new std::vector<cudacpu_stream *>; /* destroyed */
std::vector<cudacpu_stream *> legacy_streams;   /* per device */

double now_sec()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

thread_local cudaError_t op_error = cudaSuccess; /* stream_op_fail's, on a stream thread */

bool pos_done(const stream_pos &p)
{
    return p.s->completed >= p.seq;
}

void stream_main(cudacpu_stream *s)
{
    std::unique_lock<std::mutex> g(mu);
    for (;;) {
        cv.wait(g, [s] { return !s->queue.empty() || s->dying; });
        if (s->queue.empty()) { /* destroyed and drained */
            for (size_t i = 0; i < streams.size(); i++) {
                if (streams[i] == s) {
                    streams.erase(streams.begin() + (long)i);
                    retired.push_back(s);
                    break;
                }
            }
            cv.notify_all();
            return;
        }
        stream_op op = std::move(s->queue.front());
        s->queue.pop_front();
        for (const stream_pos &p : op.after) cv.wait(g, [&p] { return pos_done(p); });
        g.unlock();
        op.fn();
        g.lock();
        if (op_error != cudaSuccess) s->error = op_error;
        op_error = cudaSuccess;
        s->completed++;
        cv.notify_all();
    }
}

cudacpu_stream *stream_start(int device, unsigned flags, bool legacy)
{
    cudacpu_stream *s = new cudacpu_stream;
    s->device = device;
    s->flags = flags;
    s->legacy = legacy;
    std::thread(stream_main, s).detach();
    streams.push_back(s); /* lock held */
    return s;
}

/* The stream a handle names (lock held): NULL and the special handles are the current
 * device's legacy stream. */
cudacpu_stream *stream_resolve(cudaStream_t h)
{
    if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread) {
        const int dev = current_device();
        if (legacy_streams.size() <= (size_t)dev) legacy_streams.resize(dev + 1, nullptr);
        if (legacy_streams[dev] == nullptr) legacy_streams[dev] = stream_start(dev, 0, true);
        return legacy_streams[dev];
    }
    return h;
}

bool stream_blocking(const cudacpu_stream *s)
{
    return !s->legacy && !(s->flags & cudaStreamNonBlocking);
}

/* queue op on s (lock held), after `also` if given; returns its position */
stream_pos stream_push(cudacpu_stream *s, std::function<void()> fn,
                       const stream_pos *also = nullptr)
{
    stream_op op;

    op.fn = std::move(fn);
    if (also != nullptr) op.after.push_back(*also);
    for (cudacpu_stream *o : streams) {
        if (o == s || o->device != s->device || o->enqueued == o->completed) continue;
        if ((s->legacy && stream_blocking(o)) || (stream_blocking(s) && o->legacy))
            op.after.push_back(stream_pos{o, o->enqueued});
    }
    s->queue.push_back(std::move(op));
    s->enqueued++;
    cv.notify_all();
    return stream_pos{s, s->enqueued};
}

bool stream_valid(cudacpu_stream *s)
{
    for (cudacpu_stream *o : streams)
        if (o == s) return !s->dying;
    return false;
}

} /* namespace */

cudaError_t stream_enqueue(cudaStream_t h, std::function<void()> fn)
{
    std::lock_guard<std::mutex> g(mu);
    cudacpu_stream *s = stream_resolve(h);
    if (!stream_valid(s)) return fail(cudaErrorInvalidResourceHandle);
    stream_push(s, std::move(fn));
    return ok();
}

void stream_op_fail(cudaError_t err)
{
    op_error = err;
}

/* An idle stream's answer (lock held): an operation's failure, once */
static cudaError_t stream_idle_result(cudacpu_stream *s)
{
    const cudaError_t err = s->error;

    s->error = cudaSuccess;
    return err == cudaSuccess ? ok() : fail(err);
}

cudaError_t stream_run_sync(std::function<void()> fn)
{
    std::unique_lock<std::mutex> g(mu);
    const stream_pos p = stream_push(stream_resolve(nullptr), std::move(fn));
    cv.wait(g, [&p] { return pos_done(p); });
    return ok();
}

void device_drain(int device)
{
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [device] {
        for (cudacpu_stream *s : streams)
            if (s->device == device && s->completed != s->enqueued) return false;
        return true;
    });
}

} /* namespace cudacpu */

using namespace cudacpu;

extern "C" cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags)
{
    if (stream == nullptr || (flags & ~(unsigned)cudaStreamNonBlocking)) return fail(cudaErrorInvalidValue);
    const int dev = current_device();
    std::lock_guard<std::mutex> g(mu);
    *stream = stream_start(dev, flags, false);
    return ok();
}

extern "C" cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
    return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

/* as CUDA: returns at once; queued work still runs, then the stream's thread ends */
extern "C" cudaError_t cudaStreamDestroy(cudaStream_t h)
{
    std::lock_guard<std::mutex> g(mu);
    if (h == nullptr || h == cudaStreamLegacy || h == cudaStreamPerThread || !stream_valid(h))
        return fail(cudaErrorInvalidResourceHandle);
    h->dying = true; /* its thread leaves the list once the queue is drained */
    cv.notify_all();
    return ok();
}

/* Callers poll this in a loop: a busy stream gets a short while to finish (any
 * completion ends the wait) so that pollers do not take the cores its blocks need. */
#define CUDACPU_QUERY_WAIT_US 200

extern "C" cudaError_t cudaStreamQuery(cudaStream_t h)
{
    std::unique_lock<std::mutex> g(mu);
    cudacpu_stream *s = stream_resolve(h);
    if (!stream_valid(s)) return fail(cudaErrorInvalidResourceHandle);
    if (s->completed == s->enqueued) return stream_idle_result(s);
    cv.wait_for(g, std::chrono::microseconds(CUDACPU_QUERY_WAIT_US));
    return s->completed == s->enqueued ? stream_idle_result(s)
                                       : cudaErrorNotReady; /* not an error */
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t h)
{
    std::unique_lock<std::mutex> g(mu);
    cudacpu_stream *s = stream_resolve(h);
    if (!stream_valid(s)) return fail(cudaErrorInvalidResourceHandle);
    const uint64_t seq = s->enqueued;
    cv.wait(g, [s, seq] { return s->completed >= seq; });
    return stream_idle_result(s);
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    device_drain(current_device());
    return ok();
}

extern "C" cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags)
{
    if (event == nullptr || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming)))
        return fail(cudaErrorInvalidValue);
    *event = new cudacpu_event;
    (*event)->flags = flags;
    return ok();
}

extern "C" cudaError_t cudaEventCreate(cudaEvent_t *event)
{
    return cudaEventCreateWithFlags(event, cudaEventDefault);
}

extern "C" cudaError_t cudaEventDestroy(cudaEvent_t event)
{
    if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> g(mu);
    delete event; /* a queued record keeps its own time slot */
    return ok();
}

extern "C" cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t h)
{
    if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> g(mu);
    cudacpu_stream *s = stream_resolve(h);
    if (!stream_valid(s)) return fail(cudaErrorInvalidResourceHandle);
    auto when = std::make_shared<double>(0.0);
    const stream_pos p = stream_push(s, [when] { *when = now_sec(); });
    event->s = p.s;
    event->seq = p.seq;
    event->when = when;
    return ok();
}

extern "C" cudaError_t cudaEventQuery(cudaEvent_t event)
{
    if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> g(mu);
    if (event->s == nullptr || pos_done(stream_pos{event->s, event->seq})) return ok();
    return cudaErrorNotReady;
}

extern "C" cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
    if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
    std::unique_lock<std::mutex> g(mu);
    if (event->s == nullptr) return ok();
    const stream_pos p{event->s, event->seq};
    cv.wait(g, [&p] { return pos_done(p); });
    return ok();
}

extern "C" cudaError_t cudaStreamWaitEvent(cudaStream_t h, cudaEvent_t event, unsigned int flags)
{
    if (event == nullptr) return fail(cudaErrorInvalidResourceHandle);
    if (flags != 0) return fail(cudaErrorInvalidValue);
    std::lock_guard<std::mutex> g(mu);
    cudacpu_stream *s = stream_resolve(h);
    if (!stream_valid(s)) return fail(cudaErrorInvalidResourceHandle);
    if (event->s == nullptr) return ok(); /* never recorded: nothing to wait for */
    const stream_pos p{event->s, event->seq};
    stream_push(s, [] {}, &p); /* a no-op ordered after the recorded position */
    return ok();
}

extern "C" cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    if (ms == nullptr) return fail(cudaErrorInvalidValue);
    if (start == nullptr || end == nullptr) return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> g(mu);
    if ((start->flags | end->flags) & cudaEventDisableTiming)
        return fail(cudaErrorInvalidResourceHandle);
    if (start->s == nullptr || end->s == nullptr) return fail(cudaErrorInvalidResourceHandle);
    if (!pos_done(stream_pos{start->s, start->seq}) || !pos_done(stream_pos{end->s, end->seq}))
        return cudaErrorNotReady;
    *ms = (float)((*end->when - *start->when) * 1e3);
    return ok();
}

// Thread-safety annotations (Abseil style) for members guarded by a lock and methods that need it.
// GCC ignores them (they expand to nothing); they document the locking, and a Clang build checks it
// (scripts/thread_safety_check.sh: -Wthread-safety, any finding fails it). The locks themselves are
// util/mutex.h's: std::mutex carries no annotations, so guarding by one checks nothing.
#pragma once

#if defined(__clang__)
#define DS41_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define DS41_THREAD_ANNOTATION_(x)
#endif

// The class is a lock (a capability named `x` in the analysis' messages), e.g. ds41::Mutex.
#define DS41_CAPABILITY(x) DS41_THREAD_ANNOTATION_(capability(x))
// The class is an RAII holder: it holds what its constructor acquires until its destructor runs.
#define DS41_SCOPED_CAPABILITY DS41_THREAD_ANNOTATION_(scoped_lockable)
// The function acquires these (no argument: `this`); it returns with them held.
#define DS41_ACQUIRE(...) DS41_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
// The function releases these (no argument: `this`, or what a scoped holder holds).
#define DS41_RELEASE(...) DS41_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
// A try-lock: the first argument is the return value that means it acquired the rest (no rest: `this`).
#define DS41_TRY_ACQUIRE(...) DS41_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
// The function checks (or promises) that the caller holds these; the analysis trusts it from there on.
#define DS41_ASSERT_CAPABILITY(...) DS41_THREAD_ANNOTATION_(assert_capability(__VA_ARGS__))

// The member is read and written only while holding `x`.
#define DS41_GUARDED_BY(x) DS41_THREAD_ANNOTATION_(guarded_by(x))
// What the pointer member points to is read and written only while holding `x`.
#define DS41_PT_GUARDED_BY(x) DS41_THREAD_ANNOTATION_(pt_guarded_by(x))
// The function must be called with these held (exclusively).
#define DS41_REQUIRES(...) DS41_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
// The function must be called with these held at least shared.
#define DS41_REQUIRES_SHARED(...) DS41_THREAD_ANNOTATION_(requires_shared_capability(__VA_ARGS__))
// The function must be called without these held (it takes them itself).
#define DS41_EXCLUDES(...) DS41_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
// Lock order: this lock is taken after those (never while this one is held).
#define DS41_ACQUIRED_AFTER(...) DS41_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
// Lock order: this lock is taken before those.
#define DS41_ACQUIRED_BEFORE(...) DS41_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
// Opts a function out of the analysis (e.g. where the lock is provably not needed yet).
#define DS41_NO_THREAD_SAFETY_ANALYSIS DS41_THREAD_ANNOTATION_(no_thread_safety_analysis)

/* Fatal signals under write-behind.
 *
 * Untraced, a program that writes and is then ended by a signal's default
 * action (SIGTERM from a batch system, abort(), a segmentation fault) leaves
 * its bytes in the page cache, where they outlive it.  Under write-behind
 * they may still wait in our buffer for the background thread, and would
 * die with the process.  So once write-behind is on, every signal whose
 * default action ends the process, and that can be caught, gets our handler
 * wherever the program has the default action.  The handler waits for the
 * pending writes (iop_behind_drain: async-signal-safe, given up when the
 * thread makes no progress for a while), puts the default action back and
 * ends the process by the same signal: the parent sees the same wait
 * status, core-dump flag included.  A fault (SIGSEGV, SIGBUS, SIGFPE,
 * SIGILL raised by an instruction) returns instead: the instruction runs
 * again and faults under the default action, so a core dump shows the
 * faulting instruction on top.
 *
 * The program never sees our handler.  sigaction, signal and their
 * relatives report the default action, with the flags and mask the program
 * gave it, where ours stands in for it; setting the default action arms
 * ours in its place.  Handlers and SIG_IGN the program sets are its own and
 * pass through: a handler that then ends the process by exit or _exit meets
 * the wrappers that wait there.  A one-shot handler (SA_RESETHAND) gets ours
 * in front of it, which does what the kernel's reset would, with ours for
 * the default action, so its own raise of the signal drains too.  Signals
 * inherited as ignored stay ignored.
 * SIGKILL cannot be caught: what was not yet written is lost with it.
 */
#define _GNU_SOURCE

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "behind.h"
#include "core.h"

/* How long the handler waits for a background thread that makes no
 * progress (it may need a lock the interrupted thread holds). */
#define STALL_SECONDS 2.0

typedef void (*handler_t)(int);

/* The default action as the program would see it where ours stands in:
 * what the real call stored when the program asked for it. */
typedef struct {
    int flags;
    uint64_t mask; /* the kernel's signal set: all that sigaction reports */
    void (*restorer)(void);
} shown_t;

static shown_t shown[NSIG];
/* A handler of the program's set with SA_RESETHAND: the kernel would put
 * the default action back unseen as it runs it, so ours (on_oneshot) stands
 * in without that flag, puts back ours for the default action, then calls
 * it.  What the program set, as the real call stored it. */
static struct sigaction oneshot[NSIG];
static unsigned char watched[NSIG]; /* default action ends the process */
static int armed;                  /* ours may stand somewhere: queries look */
static pid_t owner;                /* the process that armed them */

REAL_DECL(int, sigaction, (int, const struct sigaction *, struct sigaction *));
REAL_DECL(int, __sigaction, (int, const struct sigaction *, struct sigaction *));
REAL_DECL(handler_t, signal, (int, handler_t));
REAL_DECL(handler_t, bsd_signal, (int, handler_t));
REAL_DECL(handler_t, ssignal, (int, handler_t));
REAL_DECL(handler_t, sysv_signal, (int, handler_t));
REAL_DECL(handler_t, __sysv_signal, (int, handler_t));
REAL_DECL(handler_t, sigset, (int, handler_t));
REAL_DECL(int, siginterrupt, (int, int));
REAL_DECL(void, abort, (void));

/* abort may be called with a broken heap, and the handler must not look
 * anything up: resolve before the program runs. */
__attribute__((constructor)) static void resolve_early(void) {
    (void)REAL(sigaction);
    (void)REAL(abort);
}

/* The kernel's struct sigaction: all zero is SIG_DFL, no flags, no mask. */
struct kernel_sigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
};

static int faulting(int sig, const siginfo_t *si) {
    /* Raised by the instruction that faulted.  SI_KERNEL may be a failed
     * sigreturn, which would not fault again: ended like the others. */
    return si && si->si_code > 0 && si->si_code != SI_KERNEL &&
           (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL);
}

static void end_by(int sig, const siginfo_t *si) {
    int e = errno;
    iop_behind_drain(STALL_SECONDS);
    struct kernel_sigaction dfl = {0};
    syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
    if (!faulting(sig, si)) {
        uint64_t one = 1ULL << (sig - 1);
        syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &one, NULL, sizeof one);
        syscall(SYS_tgkill, (pid_t)syscall(SYS_getpid), (pid_t)syscall(SYS_gettid), sig);
    }
    errno = e;
}

static void on_fatal(int sig, siginfo_t *si, void *uc) { end_by(sig, si); }
/* The same, armed by the program's own request without SA_SIGINFO for the
 * moment it takes to read back what was stored (see stand_in). */
static void on_fatal_plain(int sig) { end_by(sig, NULL); }

static void arm_default(int sig);
static void remember(int sig, const struct sigaction *stored);
static void on_oneshot(int sig, siginfo_t *si, void *uc) {
    struct sigaction prog = oneshot[sig];
    int e = errno;
    arm_default(sig); /* what the kernel's reset would have left: the default action */
    remember(sig, &prog);
    errno = e;
    if (prog.sa_flags & SA_SIGINFO) prog.sa_sigaction(sig, si, uc);
    else prog.sa_handler(sig);
}

static int is_ours(const void *h) { return h == (void *)on_fatal || h == (void *)on_fatal_plain; }

static int watching(int sig) {
    return IOP_UNLIKELY(__atomic_load_n(&armed, __ATOMIC_ACQUIRE)) && sig > 0 && sig < NSIG &&
           watched[sig];
}

/* May ours take the place of the default action now?  Not in a child that
 * shares our memory (vfork), nor in one without the background thread. */
static int standing_in(void) {
    return iop_behind_on && iop_in_runtime < IOP_VFORK_ONE &&
           (pid_t)syscall(SYS_getpid) == owner;
}

static int arm(int sig);
static void arm_default(int sig) { arm(sig); }

static int arm(int sig) {
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_fatal;
    a.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigfillset(&a.sa_mask); /* a second signal waits: the first one ends the process */
    return REAL(sigaction)(sig, &a, NULL);
}

static void remember(int sig, const struct sigaction *stored) {
    shown_t s = {stored->sa_flags, 0, stored->sa_restorer};
    memcpy(&s.mask, &stored->sa_mask, sizeof s.mask);
    shown[sig] = s;
}

/* The real call stored the program's request with ours in place of SIG_DFL:
 * what it stored is what the program will be shown; then ours is armed
 * with the flags and mask it needs. */
static void stand_in(int sig) {
    struct sigaction q;
    if (REAL(sigaction)(sig, NULL, &q) == 0 && is_ours((void *)q.sa_handler)) {
        remember(sig, &q);
        arm(sig);
    }
}

/* After the program set an action: a one-shot handler gets ours in front
 * (see oneshot), with the flags, mask and restorer the real call stored. */
static void take_oneshot(int sig) {
    struct sigaction q;
    if (REAL(sigaction)(sig, NULL, &q) != 0 || !(q.sa_flags & SA_RESETHAND) ||
        q.sa_handler == SIG_DFL || q.sa_handler == SIG_IGN || is_ours((void *)q.sa_handler) ||
        q.sa_sigaction == on_oneshot)
        return;
    oneshot[sig] = q;
    struct sigaction front = q;
    front.sa_flags = (q.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
    front.sa_sigaction = on_oneshot;
    REAL(sigaction)(sig, &front, NULL);
}

/* ``old`` as the real call reported it, shown as the default action where
 * ours stood in (``before``: what the program had asked for), or as the
 * program's one-shot handler where ours stands in front of it. */
static void show(struct sigaction *old, const shown_t *before, const struct sigaction *front) {
    if (old && old->sa_sigaction == on_oneshot) {
        *old = *front;
        return;
    }
    if (!old || !is_ours((void *)old->sa_handler)) return;
    old->sa_handler = SIG_DFL;
    old->sa_flags = before->flags;
    memcpy(&old->sa_mask, &before->mask, sizeof before->mask);
    old->sa_restorer = before->restorer;
}

static void signals_init(void) {
    if (!iop_behind_on) return; /* only under write-behind (whose init hook ran before) */
    owner = (pid_t)syscall(SYS_getpid);
    static const int ends[] = {
        SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGTRAP, SIGABRT, SIGBUS,    SIGFPE,
        SIGUSR1, SIGSEGV, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGXCPU,   SIGXFSZ,
        SIGVTALRM, SIGPROF, SIGIO, SIGSYS,
#ifdef SIGSTKFLT
        SIGSTKFLT,
#endif
#ifdef SIGPWR
        SIGPWR,
#endif
    };
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) watched[ends[i]] = 1;
    for (int sig = SIGRTMIN; sig <= SIGRTMAX && sig < NSIG; sig++) watched[sig] = 1;
    /* The init of a pid namespace is spared every signal left at its default
     * action but a fault: a handler of ours would interrupt its calls. */
    if (owner == 1)
        for (int sig = 1; sig < NSIG; sig++)
            watched[sig] &= sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL;
    unsigned char dfl[NSIG] = {0}; /* inherited ignored or handled: left as it is */
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction q;
        if (!watched[sig] || REAL(sigaction)(sig, NULL, &q) != 0) {
            watched[sig] = 0;
            continue;
        }
        remember(sig, &q);
        dfl[sig] = q.sa_handler == SIG_DFL;
    }
    __atomic_store_n(&armed, 1, __ATOMIC_RELEASE);
    for (int sig = 1; sig < NSIG; sig++)
        if (dfl[sig]) arm(sig);
}

/* ------------------------------------------------------------------ */
/* The program's calls. */

static int via_sigaction(int (*real)(int, const struct sigaction *, struct sigaction *), int sig,
                         const struct sigaction *act, struct sigaction *old) {
    if (!watching(sig)) return real(sig, act, old);
    shown_t before = shown[sig];
    struct sigaction front = oneshot[sig];
    int r, e;
    if (act && act->sa_handler == SIG_DFL && standing_in()) {
        struct sigaction probe = *act;
        if (act->sa_flags & SA_SIGINFO) probe.sa_sigaction = on_fatal;
        else probe.sa_handler = on_fatal_plain;
        r = real(sig, &probe, old);
        e = errno;
        if (r == 0) stand_in(sig);
    } else {
        r = real(sig, act, old);
        e = errno;
        if (r == 0 && act && standing_in()) take_oneshot(sig);
    }
    if (r == 0) show(old, &before, &front);
    errno = e;
    return r;
}

IOP_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    return via_sigaction(REAL(sigaction), sig, act, old);
}
IOP_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    return via_sigaction(REAL(__sigaction), sig, act, old);
}

/* signal and its relatives: the real one computes the flags and mask it
 * stores, so it is asked with ours in place of SIG_DFL. */
static handler_t via_signal(handler_t (*real)(int, handler_t), int sig, handler_t h) {
    if (!watching(sig)) return real(sig, h);
    handler_t old, front = oneshot[sig].sa_handler;
    int e;
    if (h == SIG_DFL && standing_in()) {
        old = real(sig, on_fatal_plain);
        e = errno;
        if (old != SIG_ERR) stand_in(sig);
    } else {
        old = real(sig, h);
        e = errno;
        if (old != SIG_ERR && standing_in()) take_oneshot(sig);
    }
    errno = e;
    if ((void *)old == (void *)on_oneshot) return front;
    return is_ours((void *)old) ? SIG_DFL : old;
}

#define SIGNAL_LIKE(name)                                                   \
    IOP_EXPORT handler_t name(int sig, handler_t h) { return via_signal(REAL(name), sig, h); }
SIGNAL_LIKE(signal)
SIGNAL_LIKE(bsd_signal)
SIGNAL_LIKE(ssignal)
SIGNAL_LIKE(sysv_signal)
SIGNAL_LIKE(__sysv_signal)
SIGNAL_LIKE(sigset)

/* siginterrupt rewrites the action's flags in place (glibc also keeps the
 * choice for later signal() calls): where ours stands in, the default
 * action with those flags is set again, as the program would have. */
IOP_EXPORT int siginterrupt(int sig, int interrupt) {
    int r = REAL(siginterrupt)(sig, interrupt);
    if (r != 0 || !watching(sig)) return r;
    int e = errno;
    struct sigaction a;
    if (REAL(sigaction)(sig, NULL, &a) == 0 && is_ours((void *)a.sa_handler)) {
        shown_t s = shown[sig];
        memset(&a, 0, sizeof a);
        a.sa_handler = SIG_DFL;
        a.sa_flags = interrupt ? s.flags & ~SA_RESTART : s.flags | SA_RESTART;
        memcpy(&a.sa_mask, &s.mask, sizeof s.mask);
        via_sigaction(REAL(sigaction), sig, &a, NULL);
    }
    errno = e;
    return r;
}

/* abort runs the program's SIGABRT handler, and if it returns, resets the
 * default action itself, unseen: the writes land first, the handler's too. */
IOP_EXPORT void abort(void) {
    if (IOP_UNLIKELY(iop_behind_on) && standing_in()) {
        iop_behind_drain(STALL_SECONDS);
        struct sigaction q;
        if (REAL(sigaction)(SIGABRT, NULL, &q) == 0 && q.sa_handler != SIG_DFL &&
            q.sa_handler != SIG_IGN && !is_ours((void *)q.sa_handler)) {
            sigset_t s;
            sigemptyset(&s);
            sigaddset(&s, SIGABRT);
            sigprocmask(SIG_UNBLOCK, &s, NULL);
            raise(SIGABRT); /* the program's handler, once, as abort runs it */
            arm(SIGABRT);   /* it returned: the default action follows, through ours */
        }
    }
    REAL(abort)();
    __builtin_unreachable();
}

/* A feature of no layer, after write-behind in modules.c: it arms only when
 * write-behind is on. */
const iop_module iop_signals_module = {
    .name = "signals",
    .init = signals_init,
};

/* POSIX layer: exec, spawn, clone, exit, and the calls after which pending
 * writes must have landed, see posix.c. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/socket.h>

#include "core.h"
#include "behind.h"

/* ------------------------------------------------------------------ */
/* exec replaces the image without running destructors: write out first.
 * The new program inherits LD_PRELOAD and starts its own trace. */

REAL_DECL(int, execve, (const char *, char *const[], char *const[]));
IOP_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    iop_before_exec();
    return REAL(execve)(path, argv, envp);
}
REAL_DECL(int, execv, (const char *, char *const[]));
IOP_EXPORT int execv(const char *path, char *const argv[]) {
    iop_before_exec();
    return REAL(execv)(path, argv);
}
REAL_DECL(int, execvp, (const char *, char *const[]));
IOP_EXPORT int execvp(const char *file, char *const argv[]) {
    iop_before_exec();
    return REAL(execvp)(file, argv);
}
REAL_DECL(int, execvpe, (const char *, char *const[], char *const[]));
IOP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    iop_before_exec();
    return REAL(execvpe)(file, argv, envp);
}

REAL_DECL(int, fexecve, (int, char *const[], char *const[]));
IOP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    iop_before_exec();
    return REAL(fexecve)(fd, argv, envp);
}
REAL_DECL(int, execveat, (int, const char *, char *const[], char *const[], int));
IOP_EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[],
                        int flags) {
    iop_before_exec();
    return REAL(execveat)(dirfd, path, argv, envp, flags);
}

/* Programs started without fork or our exec (posix_spawn, and system and
 * popen, which glibc builds on it) read what we wrote. */
REAL_DECL(int, posix_spawn, (pid_t *, const char *, const posix_spawn_file_actions_t *,
                             const posix_spawnattr_t *, char *const[], char *const[]));
IOP_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[]) {
    if (iop_active()) iop_fence_all();
    return REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
}
REAL_DECL(int, posix_spawnp, (pid_t *, const char *, const posix_spawn_file_actions_t *,
                              const posix_spawnattr_t *, char *const[], char *const[]));
IOP_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                            const posix_spawnattr_t *attr, char *const argv[],
                            char *const envp[]) {
    if (iop_active()) iop_fence_all();
    return REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
}
REAL_DECL(int, system, (const char *));
IOP_EXPORT int system(const char *command) {
    if (iop_active()) iop_fence_all();
    return REAL(system)(command);
}
REAL_DECL(FILE *, popen, (const char *, const char *));
IOP_EXPORT FILE *popen(const char *command, const char *type) {
    if (iop_active()) iop_fence_all();
    return REAL(popen)(command, type);
}

/* clone() and the clone system call: a child with memory of its own has no
 * background thread, so pending writes land before it starts and it forgets
 * the queue (as fork's handlers do); one sharing our memory shares the
 * thread.  Threads (CLONE_THREAD) are left alone. */
#ifndef CLONE_VM
#define CLONE_VM 0x00000100
#define CLONE_FILES 0x00000400
#define CLONE_THREAD 0x00010000
#endif
struct clone_start {
    int (*fn)(void *);
    void *arg;
    int flags;
};
static int clone_child(void *p) {
    struct clone_start c = *(struct clone_start *)p; /* our copy of the parent's frame */
    iop_behind_after_clone(c.flags & CLONE_FILES);
    return c.fn(c.arg);
}
REAL_DECL(int, clone, (int (*)(void *), void *, int, void *, ...));
IOP_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...) {
    va_list ap; /* read as libc reads them: only used when the flags say so */
    va_start(ap, arg);
    void *ptid = va_arg(ap, void *), *tls = va_arg(ap, void *), *ctid = va_arg(ap, void *);
    va_end(ap);
    if (!iop_behind_on || (flags & CLONE_THREAD) || !iop_active())
        return REAL(clone)(fn, stack, flags, arg, ptid, tls, ctid);
    iop_fence_all();
    if (flags & CLONE_VM) return REAL(clone)(fn, stack, flags, arg, ptid, tls, ctid);
    struct clone_start c = {fn, arg, flags};
    return REAL(clone)(clone_child, stack, flags, &c, ptid, tls, ctid);
}

/* The runtime's own system calls come here too: the test is one compare.
 * Six arguments are read whatever was passed, as libc's own stub reads
 * them (the sanitizer would call reading the caller's frame an error). */
REAL_DECL(long, syscall, (long, ...));
IOP_EXPORT __attribute__((no_sanitize("address"))) long syscall(long n, ...) {
    va_list ap;
    va_start(ap, n);
    long a = va_arg(ap, long), b = va_arg(ap, long), c = va_arg(ap, long),
         d = va_arg(ap, long), e = va_arg(ap, long), f = va_arg(ap, long);
    va_end(ap);
    if (IOP_LIKELY(n != SYS_clone && n != SYS_clone3 && n != SYS_fork) || !iop_behind_on)
        return REAL(syscall)(n, a, b, c, d, e, f);
    /* clone's flags: the first argument, or the first field of clone3's */
    unsigned long flags = n == SYS_fork ? 0 : n == SYS_clone ? (unsigned long)a
                                        : a ? *(const unsigned long *)a : 0;
    if ((flags & CLONE_THREAD) || !iop_active()) return REAL(syscall)(n, a, b, c, d, e, f);
    iop_fence_all();
    long r = REAL(syscall)(n, a, b, c, d, e, f);
    if (r == 0 && !(flags & CLONE_VM)) iop_behind_after_clone(flags & CLONE_FILES);
    return r;
}

/* Other ways the data may be seen elsewhere, or that the program asked to
 * be on disk: pending writes land first. */
#define WRAP_FENCE_ALL(ret, name, params, args)                               \
    REAL_DECL(ret, name, params);                                             \
    IOP_EXPORT ret name params {                                              \
        if (iop_fence_needed() && iop_active()) iop_fence_all();              \
        return REAL(name) args;                                               \
    }
WRAP_FENCE_ALL(ssize_t, send, (int fd, const void *b, size_t n, int fl), (fd, b, n, fl))
WRAP_FENCE_ALL(ssize_t, sendto, (int fd, const void *b, size_t n, int fl,
                                 const struct sockaddr *to, socklen_t l), (fd, b, n, fl, to, l))
WRAP_FENCE_ALL(ssize_t, sendmsg, (int fd, const struct msghdr *m, int fl), (fd, m, fl))
WRAP_FENCE_ALL(int, sendmmsg, (int fd, struct mmsghdr *m, unsigned n, int fl), (fd, m, n, fl))
WRAP_FENCE_ALL(int, kill, (pid_t pid, int sig), (pid, sig))
WRAP_FENCE_ALL(int, sigqueue, (pid_t pid, int sig, const union sigval v), (pid, sig, v))
WRAP_FENCE_ALL(int, msync, (void *a, size_t n, int fl), (a, n, fl))
WRAP_FENCE_ALL(void, sync, (void), ())
WRAP_FENCE_ALL(int, syncfs, (int fd), (fd))
WRAP_FENCE_ALL(ssize_t, sendfile, (int o, int i, off_t *off, size_t n), (o, i, off, n))
WRAP_FENCE_ALL(ssize_t, sendfile64, (int o, int i, off64_t *off, size_t n), (o, i, off, n))
WRAP_FENCE_ALL(ssize_t, copy_file_range, (int i, off64_t *oi, int o, off64_t *oo, size_t n,
                                          unsigned fl), (i, oi, o, oo, n, fl))
WRAP_FENCE_ALL(ssize_t, splice, (int i, off64_t *oi, int o, off64_t *oo, size_t n, unsigned fl),
               (i, oi, o, oo, n, fl))

/* RLIMIT_FSIZE decides which writes may be queued (see behind.c).  A
 * sanitizer's runtime sets limits before it can run instrumented code: the
 * real function is found with dlsym alone. */
#define WRAP_LIMIT(name, params, args)                                        \
    REAL_DECL(int, name, params);                                             \
    IOP_EXPORT __attribute__((no_sanitize("address", "undefined"))) int name params { \
        if (!real_##name) real_##name = (__typeof__(real_##name))dlsym(RTLD_NEXT, #name); \
        /* a lower RLIMIT_FSIZE must not fail writes already taken (the      \
         * check written out: an inline function is built instrumented) */   \
        if (IOP_UNLIKELY(iop_deferred) && !iop_in_runtime)                    \
            iop_fence_slow(IOP_FENCE_ALL, 0, 0, NULL, 0);                     \
        int r = real_##name args;                                             \
        if (r == 0 && iop_behind_on) iop_behind_limits_changed();             \
        return r;                                                             \
    }
WRAP_LIMIT(setrlimit, (__rlimit_resource_t res, const struct rlimit *rl), (res, rl))
WRAP_LIMIT(setrlimit64, (__rlimit_resource_t res, const struct rlimit64 *rl), (res, rl))
WRAP_LIMIT(prlimit, (pid_t pid, __rlimit_resource_t res, const struct rlimit *n, struct rlimit *o),
           (pid, res, n, o))
WRAP_LIMIT(prlimit64, (pid_t pid, __rlimit_resource_t res, const struct rlimit64 *n,
                       struct rlimit64 *o), (pid, res, n, o))

/* The list forms: collect the arguments, then use the vector forms. */
#define COLLECT_ARGS(first, argv, ap)                      \
    size_t n_ = 1;                                         \
    va_start(ap, first);                                   \
    while (va_arg(ap, char *)) n_++;                       \
    va_end(ap);                                            \
    char **argv = __builtin_alloca((n_ + 1) * sizeof(char *)); \
    argv[0] = (char *)(first);                             \
    va_start(ap, first);                                   \
    for (size_t i_ = 1; i_ <= n_; i_++) argv[i_] = va_arg(ap, char *);

IOP_EXPORT int execl(const char *path, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, argv, ap)
    va_end(ap);
    return execv(path, argv);
}
IOP_EXPORT int execlp(const char *file, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, argv, ap)
    va_end(ap);
    return execvp(file, argv);
}
IOP_EXPORT int execle(const char *path, const char *arg, ...) {
    va_list ap;
    COLLECT_ARGS(arg, argv, ap)
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}

/* _exit skips destructors (Python's os._exit, multiprocessing workers,
 * children after fork): write out first.  Nothing in a vfork child. */
REAL_DECL(void, _exit, (int));
IOP_EXPORT void _exit(int status) {
    iop_before_exit(status);
    REAL(_exit)(status);
    __builtin_unreachable();
}
REAL_DECL(void, _Exit, (int));
IOP_EXPORT void _Exit(int status) {
    iop_before_exit(status);
    REAL(_Exit)(status);
    __builtin_unreachable();
}

/* ------------------------------------------------------------------ */
/* vfork: the child borrows our memory and stack until it execs or exits, so
 * it must change nothing of ours.  The stub keeps the return address in a
 * register, as libc's does (the child may overwrite the stack), and sets
 * the vfork part of the child's guard; the parent clears it on resuming.
 * Elsewhere the exec and _exit wrappers check the process id instead. */
#if defined(__x86_64__)
__attribute__((used, visibility("hidden"))) long iop_vfork_failed(long err) {
    errno = (int)err;
    return -1;
}
__asm__(".text\n"
        ".globl vfork\n"
        ".type vfork,@function\n"
        "vfork:\n"
        "    popq %rdi\n"
        "    movl $58, %eax\n" /* SYS_vfork */
        "    syscall\n"
        "    pushq %rdi\n"
        "    movq iop_in_runtime@gottpoff(%rip), %rcx\n"
        "    testq %rax, %rax\n"
        "    jz 1f\n"
        "    andl $0xffffff, %fs:(%rcx)\n" /* parent, or no child */
        "    cmpq $-4095, %rax\n"
        "    jae 2f\n"
        "    ret\n"
        "1:  addl $0x1000000, %fs:(%rcx)\n" /* child */
        "    ret\n"
        "2:  negq %rax\n"
        "    movq %rax, %rdi\n"
        "    jmp iop_vfork_failed\n"
        ".size vfork, .-vfork\n"
        ".globl __vfork\n"
        ".set __vfork, vfork\n");
#endif

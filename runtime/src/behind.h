/* Write-behind (behind.c): the program's writes made by a background thread. */
#ifndef IOPILOT_BEHIND_H
#define IOPILOT_BEHIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core.h"

#define IOP_BEHIND_NOT_TAKEN (-2) /* the caller makes the call itself */

extern int iop_behind_on;       /* IOPILOT_ASYNC=1 and the buffer is mapped */
extern int iop_behind_relaxed;  /* IOPILOT_ASYNC_RELAXED=1: syncs are queued too */
/* Set by the MPI-IO module while MPI_File_open runs: those descriptors are
 * MPI-IO's, and stay synchronous. */
extern IOP_TLS int iop_inside_mpi_open;

/* The record flags of the calling thread's last iop_behind_write or
 * iop_behind_sync: IOP_FLAG_DEFERRED when it queued the operation, else 0.
 * Thread-local rather than an out-parameter: a wrapper's frame holds no
 * addressed local, which a thread cancelled inside the real call would
 * leave behind (sanitizers then see its stale guard zones). */
extern IOP_TLS unsigned iop_behind_flags;
/* A write of ``n`` bytes at ``off`` (-1: the descriptor's position):
 * queued, returning ``n``, or IOP_BEHIND_NOT_TAKEN once the file's pending
 * writes are done (the caller then writes). */
ssize_t iop_behind_write(iop_open *o, int fd, const void *buf, size_t n, int64_t off);
/* fsync / fdatasync: queued in relaxed mode (0, or -1 with a deferred
 * errno), else IOP_BEHIND_NOT_TAKEN once the file's writes are done. */
int iop_behind_sync(iop_open *o, int fd, int data_only);
/* Files are known to write-behind by identity (iop_open.ident: device and
 * inode), not by name: two names of one file are one file.  Its queued
 * operations are counted in the core's iop_deferred, and a call waits for
 * a file's through the core's fences (iop_fence, iop_fence_at,
 * iop_fence_all in core.h), which call write-behind's fence hook. */
/* The file got another name (link): its writes land now, and later ones
 * are made at once, since others may open it by that name. */
void iop_behind_shared(uint64_t ident);
/* In a child made by clone() or a clone system call, with memory of its
 * own: no background thread followed (see child_after_fork). */
void iop_behind_after_clone(int shares_fds);
/* RLIMIT_FSIZE may have changed (setrlimit, prlimit). */
void iop_behind_limits_changed(void);
int iop_behind_take_error(uint64_t ident);  /* a deferred errno, forgotten once taken */
void iop_behind_closing(uint64_t ident);    /* before the program closes the file */
/* Before fcntl(F_SETFL, ``flags``) on a descriptor of the file. */
void iop_behind_flags_set(uint64_t ident, long flags);
/* Before descriptors first..last are closed or replaced by the program: if
 * one is ours, pending writes land first and it is forgotten. */
void iop_behind_losing(int first, int last);
/* Async-signal-safe: wait until every pending write has landed, or until
 * the background thread made no progress for ``stall_seconds`` (it may
 * need a lock the interrupted thread holds).  1 when nothing is pending. */
int iop_behind_drain(double stall_seconds);

#endif
